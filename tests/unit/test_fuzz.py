"""Mutation fuzzing of analyze and import-strace (tests/fuzzing.py): a fixed seed, a few hundred
damaged copies of the real strace logs and traces in tests/data and fixtures/. Every one must
end with a verdict or one clear error line: no internal error (a Python exception reaching
the CLI's last line of defence), no hang, no exit status outside the README's table.
scripts/fuzz.py runs the same check on as many mutants as asked for."""
from __future__ import annotations

import collections

import fuzzing

SEED = 20261130
COUNT = 300


def test_corpus_holds_logs_and_traces() -> None:
    kinds = collections.Counter(s.kind for s in fuzzing.corpus())
    assert kinds["log"] >= 5 and kinds["trace"] >= 15, kinds


def test_mutants_never_crash_or_hang() -> None:
    failures = []
    codes: collections.Counter = collections.Counter()
    for m in fuzzing.mutants(SEED, COUNT):
        o = fuzzing.run_mutant(m, time_limit=20.0)
        codes[o.code] += 1
        why = fuzzing.check(m, o)
        if why:
            failures.append(f"{m.seed} {'+'.join(m.how)}: {why}")
    print(f"{COUNT} mutants, exit statuses {dict(sorted(codes.items()))}")
    assert not failures, "\n".join(failures[:20])
    # The mutants reach both ends: some still give verdicts, some are refused with a line.
    assert codes[1] >= 10 and sum(n for c, n in codes.items() if c != 1) >= 100, codes


def test_the_checker_catches_what_it_should() -> None:
    """A fuzz test that cannot fail proves nothing: the checker flags each kind of failure."""
    m = fuzzing.Mutant("x", "trace", b"", [])
    assert fuzzing.check(m, fuzzing.Outcome(1, "internal error: TypeError: x\n", True, False))
    assert fuzzing.check(m, fuzzing.Outcome(-1, "", False, True)) == "hang"
    assert fuzzing.check(m, fuzzing.Outcome(2, "hangtrace: x\n", False, False))
    assert fuzzing.check(m, fuzzing.Outcome(1, "Traceback (most recent call last)\n", False,
                                            False))
    assert fuzzing.check(m, fuzzing.Outcome(1, "hangtrace: x: corrupt trace: y\n", False,
                                            False)) is None
