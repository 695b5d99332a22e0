#!/usr/bin/env python3
"""The long fuzz runs (tests/fuzzing.py, tests/twins.py, tests/sanitized.py; CI runs a few
hundred inputs of each in tests/unit/test_fuzz.py, test_twins_fuzz.py, test_sanitizers.py).

Usage: python scripts/fuzz.py [--mode mutants|field|line|typed|fr|twins|sanitizers|targets|
                              elf|source|ras|title|fd] [--seed N] [--count N] [--minutes M]
                              [--cpu-bound S] [--keep DIR]

- mutants (default): damaged copies of the real logs and traces (bytes flipped, lines cut...);
- field: one field of one real trace row made hostile (huge, NaN, Unicode digits, ...);
- line: one hostile line in a real strace log (unbalanced brackets, quote floods, 300 KB);
- typed: the typed sweep (tests/typed_sweep.py): every registered tag, every field, every
  hostile value of TYPED_VALUES, each mutant the codec accepts analyzed alone (--seed and
  --count do not apply: the sweep is exhaustive);
- fr: the Flight Recorder inputs (tests/fr_inputs.py), each analyzed beside a real dump;
- twins: random and mutated strace blocks read by the compiled helpers and the Python twins
  (split_line, the first pass's membership; every 10th block a whole import and analysis,
  the pure path in a child): any difference is a failure;
- sanitizers: the compiled helpers built with -fsanitize=address,undefined and COUNT blocks
  through them in a child (0 sanitizer reports);
- elf, source, ras, title, fd: what a traced process controls, one damage a case
  (tests/target_fuzz.py: ELF files, Python sources for the AST path, RAS answers, process
  titles, ints in strace lines); targets: COUNT cases of each of the five.
Prints what ran, the exit statuses and every failure (internal error, hang, exit status
outside the README's table, an error without one clear line, an input over --cpu-bound CPU
seconds); ``--keep`` saves each failing input there. Exits 1 when anything failed. Run from
the repository root with the venv's python.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import fuzzing  # noqa: E402

GENERATORS = {"mutants": fuzzing.mutants, "field": fuzzing.field_mutants,
              "line": fuzzing.line_mutants}


def _run_inputs(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    codes: collections.Counter = collections.Counter()
    failures = done = 0
    slowest = (0.0, "")
    for i, m in enumerate(GENERATORS[args.mode](args.seed, args.count)):
        if args.minutes and time.monotonic() - t0 > args.minutes * 60:
            break
        o = fuzzing.run_mutant(m, time_limit=max(60.0, 4 * args.cpu_bound))
        slowest = max(slowest, (o.cpu, f"{m.seed} {'; '.join(m.how)[:100]}"))
        codes[o.code] += 1
        done += 1
        why = fuzzing.check(m, o, args.cpu_bound)
        if why:
            failures += 1
            print(f"FAIL #{i} {m.seed} {'; '.join(m.how)[:200]}: {why}", flush=True)
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                with open(os.path.join(args.keep, f"{args.mode}-{args.seed}-{i}"), "wb") as f:
                    f.write(m.data)
    wall = time.monotonic() - t0
    print(f"{done} {args.mode} inputs (seed {args.seed}) in {wall:.0f} s: {failures} failures "
          f"(internal errors, hangs, bad exits, over {args.cpu_bound:g} s CPU); exit statuses "
          f"{dict(sorted(codes.items()))}; slowest {slowest[0]:.2f} s CPU ({slowest[1]})")
    return 1 if failures else 0


def _run_typed(args: argparse.Namespace) -> int:
    import typed_sweep
    t0 = time.monotonic()
    r = typed_sweep.run_sweep(args.cpu_bound, log=sys.stdout)
    print(f"{r['mutants']} typed mutants in {time.monotonic() - t0:.0f} s: {r['edge']} refused "
          f"at the edge, {r['analyzed']} analyzed alone; {len(r['failures'])} failures; exit "
          f"statuses {dict(sorted(r['codes'].items()))}; slowest {r['slowest'][0]:.2f} s CPU "
          f"({r['slowest'][1][:100]})")
    return 1 if r["failures"] else 0


def _run_fr(args: argparse.Namespace) -> int:
    import fr_inputs
    t0 = time.monotonic()
    codes: collections.Counter = collections.Counter()
    failures = 0
    slowest = (0.0, "")
    for i, (what, data) in enumerate(fr_inputs.inputs()):
        o = fr_inputs.run(data, text=i % 2 == 1, time_limit=max(60.0, 4 * args.cpu_bound))
        codes[o.code] += 1
        slowest = max(slowest, (o.cpu, what))
        why = fuzzing.check(fuzzing.Mutant("fr", "fr", b"", []), o, args.cpu_bound)
        if why:
            failures += 1
            print(f"FAIL {what[:200]}: {why}", flush=True)
    print(f"{sum(codes.values())} Flight Recorder inputs in {time.monotonic() - t0:.0f} s: "
          f"{failures} failures; exit statuses {dict(sorted(codes.items()))}; slowest "
          f"{slowest[0]:.2f} s CPU ({slowest[1][:100]})")
    return 1 if failures else 0


def _run_twins(args: argparse.Namespace) -> int:
    import twins
    from tracer.strace.scan import py_scan_block
    from tracer.strace.fastpath import compiled, status
    fast = compiled()
    if fast is None:
        print(f"twins: nothing to compare: {status()}")
        return 1
    t0 = time.monotonic()
    blocks = twins.blocks(args.seed, args.count)
    failures = 0
    for b in blocks:
        diff = twins.line_diffs(b, fast)
        if diff or twins.membership(b) != twins.membership(b, py_scan_block):
            failures += 1
            print(f"FAIL lines {diff[:3]!r} / membership of {b[:200]!r}", flush=True)
    whole = blocks[::10]
    here = [twins.outcome(b) for b in whole]
    code = ("import json, sys, twins; bs = [bytes.fromhex(x) for x in json.load(sys.stdin)];"
            " print(json.dumps([twins.outcome(b) for b in bs]))")
    p = subprocess.run([sys.executable, "-c", code], input=json.dumps([b.hex() for b in whole]),
                       capture_output=True, text=True, cwd=os.path.join(ROOT, "tests"),
                       env={**os.environ, "HANGTRACE_PURE": "1",
                            "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "tests"), ROOT])})
    pure = json.loads(p.stdout) if p.returncode == 0 else []
    for b, h, q in zip(whole, here, pure):
        if h != q:
            failures += 1
            print(f"FAIL import of {b[:200]!r}: compiled {h} / pure {q}", flush=True)
    if p.returncode != 0:
        failures += 1
        print(f"FAIL the pure child: {p.stderr[-500:]}")
    print(f"{len(blocks)} blocks (seed {args.seed}) compared line by line and by membership, "
          f"{len(whole)} imported both ways, in {time.monotonic() - t0:.0f} s: {failures} "
          "failures")
    return 1 if failures else 0


def _run_sanitizers(args: argparse.Namespace) -> int:
    import sanitized
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hangtrace-asan-") as tmp:
        try:
            module = sanitized.build(tmp)
        except sanitized.Unavailable as e:
            print(f"sanitizers: not run: {e}")
            return 1
        ran, reports, code = sanitized.fuzz_pass(module, args.seed, args.count)
    for line in reports[:50]:
        print(f"REPORT {line}")
    print(f"{ran} inputs through the helpers built with {' '.join(sanitized.FLAGS)} in "
          f"{time.monotonic() - t0:.0f} s: {len(reports)} sanitizer reports (child status "
          f"{code})")
    return 1 if reports or code else 0


def _run_targets(args: argparse.Namespace) -> int:
    import target_fuzz
    kinds = target_fuzz.KINDS if args.mode == "targets" else (args.mode,)
    failures = 0
    for kind in kinds:
        t0 = time.monotonic()
        done = bad = 0
        slowest = (0.0, "")
        for i, (what, data) in enumerate(target_fuzz.cases(kind, args.seed, args.count)):
            if args.minutes and time.monotonic() - t0 > args.minutes * 60:
                break
            why, cpu = target_fuzz.run_case(kind, data)
            done += 1
            slowest = max(slowest, (cpu, what))
            if why is None and cpu > args.cpu_bound:
                why = f"took {cpu:.1f} s of CPU (bound {args.cpu_bound:g} s)"
            if why:
                bad += 1
                print(f"FAIL {kind} #{i} {what[:200]}: {why}", flush=True)
                if args.keep:
                    os.makedirs(args.keep, exist_ok=True)
                    with open(os.path.join(args.keep, f"{kind}-{args.seed}-{i}"), "wb") as f:
                        f.write(data)
        failures += bad
        print(f"{done} {kind} cases (seed {args.seed}) in {time.monotonic() - t0:.0f} s: {bad} "
              f"failures (internal errors, contract breaks, over {args.cpu_bound:g} s CPU); "
              f"slowest {slowest[0]:.2f} s CPU ({slowest[1][:100]})", flush=True)
    return 1 if failures else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="mutants",
                    choices=sorted(GENERATORS) + ["typed", "fr", "twins", "sanitizers",
                                                  "targets", "elf", "source", "ras", "title",
                                                  "fd"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--minutes", type=float, default=0.0, help="stop after this long (0: no limit)")
    ap.add_argument("--cpu-bound", type=float, default=5.0,
                    help="CPU seconds an input may take (mutants, field, line)")
    ap.add_argument("--keep", metavar="DIR", help="save failing inputs here")
    args = ap.parse_args()
    if args.mode == "twins":
        return _run_twins(args)
    if args.mode == "typed":
        return _run_typed(args)
    if args.mode == "fr":
        return _run_fr(args)
    if args.mode == "sanitizers":
        return _run_sanitizers(args)
    if args.mode in ("targets", "elf", "source", "ras", "title", "fd"):
        return _run_targets(args)
    return _run_inputs(args)


if __name__ == "__main__":
    sys.exit(main())
