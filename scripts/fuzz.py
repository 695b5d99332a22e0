#!/usr/bin/env python3
"""The long fuzz run: as many mutants of the real strace logs and traces as asked for
(tests/fuzzing.py; tests/unit/test_fuzz.py runs 300 of them in CI).

Usage: python scripts/fuzz.py [--seed N] [--count N] [--minutes M] [--keep DIR]

Prints the exit statuses seen and every failure (internal error, hang, exit status outside the
README's table, an error without one clear line); ``--keep`` saves each failing input there.
Exits 1 when anything failed. Run from the repository root with the venv's python.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import fuzzing  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--minutes", type=float, default=0.0, help="stop after this long (0: no limit)")
    ap.add_argument("--keep", metavar="DIR", help="save failing inputs here")
    args = ap.parse_args()
    t0 = time.monotonic()
    codes: collections.Counter = collections.Counter()
    failures = 0
    slowest = (0.0, "")
    done = 0
    for i, m in enumerate(fuzzing.mutants(args.seed, args.count)):
        if args.minutes and time.monotonic() - t0 > args.minutes * 60:
            break
        t1 = time.monotonic()
        o = fuzzing.run_mutant(m)
        took = time.monotonic() - t1
        slowest = max(slowest, (took, f"{m.seed} {'+'.join(m.how)}"))
        codes[o.code] += 1
        done += 1
        why = fuzzing.check(m, o)
        if why:
            failures += 1
            print(f"FAIL #{i} {m.seed} {'+'.join(m.how)}: {why}", flush=True)
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                with open(os.path.join(args.keep, f"mutant-{args.seed}-{i}"), "wb") as f:
                    f.write(m.data)
    wall = time.monotonic() - t0
    print(f"{done} mutants (seed {args.seed}) in {wall:.0f} s: {failures} failures "
          f"(internal errors, hangs, bad exits); exit statuses {dict(sorted(codes.items()))}; "
          f"slowest {slowest[0]:.1f} s ({slowest[1]})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
