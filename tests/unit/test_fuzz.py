"""Mutation fuzzing of analyze and import-strace (tests/fuzzing.py): a fixed seed, a few hundred
damaged copies of the real strace logs and traces in tests/data and fixtures/. Every one must
end with a verdict or one clear error line: no internal error (a Python exception reaching
the CLI's last line of defence), no hang, no exit status outside the README's table, and (the
field and line mutators: one field of one real row, one hostile line in a real log) no input
over its CPU bound. The typed sweep (tests/typed_sweep.py: every registered tag, every field,
huge/negative/NaN/wrong-type/deep values) and the Flight Recorder inputs (tests/fr_inputs.py:
hostile pickles, huge numbers and keys, deep nesting) hold to the same checks. scripts/fuzz.py
runs the same checks on as many inputs as asked for (``--mode typed``: every typed mutant
analyzed alone)."""
from __future__ import annotations

import collections
import os
import time

import pytest

import fr_inputs
import fuzzing
import typed_sweep

SEED = 20261130
COUNT = 120
FIELD_COUNT = 100
LINE_COUNT = 100
CPU_BOUND = 5.0            # CPU seconds one input may take (a hostile line of 300 KB: < 0.3)


def test_corpus_holds_logs_and_traces() -> None:
    kinds = collections.Counter(s.kind for s in fuzzing.corpus())
    assert kinds["log"] >= 5 and kinds["trace"] >= 15, kinds


@pytest.mark.slow
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
    assert codes[1] >= 10 and sum(n for c, n in codes.items() if c != 1) >= COUNT // 3, codes


def _run_all(mutants, cpu_limit: float):
    failures = []
    codes: collections.Counter = collections.Counter()
    for m in mutants:
        o = fuzzing.run_mutant(m, time_limit=120.0)
        codes[o.code] += 1
        why = fuzzing.check(m, o, cpu_limit)
        if why:
            failures.append(f"{m.seed} {'; '.join(m.how)}: {why}")
    return failures, codes


@pytest.mark.slow
def test_one_field_of_one_real_row_at_a_time() -> None:
    """Huge, negative, NaN, Unicode digits, a wrong type, a lone surrogate, in one field of
    one row of a real trace: a verdict, or one line saying the trace is corrupt."""
    failures, codes = _run_all(fuzzing.field_mutants(SEED, FIELD_COUNT), CPU_BOUND)
    print(f"{FIELD_COUNT} field mutants, exit statuses {dict(sorted(codes.items()))}")
    assert not failures, "\n".join(failures[:20])
    assert codes[1] >= 10 and sum(n for c, n in codes.items() if c != 1) >= 50, codes


def test_one_hostile_line_in_a_real_log_at_a_time() -> None:
    """Unbalanced brackets, quote floods, lines of up to 300 KB, hostile numbers in a real
    line: each log still imports within the bound."""
    failures, codes = _run_all(fuzzing.line_mutants(SEED, LINE_COUNT), CPU_BOUND)
    print(f"{LINE_COUNT} line mutants, exit statuses {dict(sorted(codes.items()))}")
    assert not failures, "\n".join(failures[:20])
    assert sum(n for c, n in codes.items() if c != 1) >= LINE_COUNT // 2, codes


@pytest.mark.slow
def test_typed_sweep_of_every_tag_and_field() -> None:
    """Every field of a row of every registered tag, one hostile value at a time: the codec
    refuses it (one bad line) or the analysis gives a report, each within the CPU bound. In
    CI the mutants the codec accepts run in batches of one row per tag (about 90 analyses;
    a failing batch names its culprits one by one); scripts/fuzz.py --mode typed runs each
    alone."""
    t0 = time.monotonic()
    r = typed_sweep.run_sweep(CPU_BOUND, batched=True)
    print(f"{r['mutants']} typed mutants: {r['edge']} refused at the edge, {r['analyzed']} "
          f"analyzed in {r['runs']} runs, exit statuses {r['codes']}, slowest {r['slowest']}, "
          f"{time.monotonic() - t0:.1f} s")
    assert not r["failures"], "\n".join(r["failures"][:20])
    tags = {m.tag for m in typed_sweep.sweep()[1]}
    from tracer import events as ev
    assert tags == set(ev.EVENT_CLASSES) - {"end"}, set(ev.EVENT_CLASSES) - tags
    assert r["mutants"] > 5000 and r["edge"] > r["mutants"] // 2 and r["analyzed"] > 500, r


@pytest.mark.slow
def test_flight_recorder_inputs() -> None:
    """Hostile dump files beside a real one (``hangtrace analyze DIR``): each a report (the
    bad file refused with its reason, the good one read), never an internal error."""
    failures, codes = [], collections.Counter()
    for i, (what, data) in enumerate(fr_inputs.inputs()):
        o = fr_inputs.run(data, text=i % 2 == 1)
        codes[o.code] += 1
        why = fuzzing.check(fuzzing.Mutant("fr", "fr", b"", []), o, CPU_BOUND)
        if why:
            failures.append(f"{what}: {why}")
    print(f"{sum(codes.values())} Flight Recorder inputs, exit statuses {dict(codes)}")
    assert not failures, "\n".join(failures[:20])
    assert sum(codes.values()) > 500, codes
    assert not os.path.exists(fr_inputs.RAN_MARK)      # the os.system pickle never ran


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
    slow = fuzzing.Outcome(0, "", False, False, cpu=9.0)
    assert fuzzing.check(m, slow, 5.0) and fuzzing.check(m, slow) is None
