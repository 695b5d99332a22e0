"""Benchmark: the strace parser on hostile lines, time against line length (issue 22 item 2).

Usage: python bench/hostile_lines.py [--sizes 10000,100000,1000000] [--pure] [--import]

Each shape (``hostile_lines(size)``) is one strace line of about ``size`` bytes built to defeat
a parser that scans again from every ``<`` or quote: unbalanced ``<`` in an fd argument, nested
or paired decorations, escaped-quote floods (closed and unclosed), many small strings, bracket
and comma floods, decorations on results, a -T duration of a million digits. Printed per shape
and size: the CPU time (``time.thread_time``: stable on a shared machine) of converting the
line (``StraceConverter.feed_text``: split, decode, fd tables, scrub, everything an import does
to a line) and its ratio to the same work on the plain line of that size; and the ratio of the
largest size's time to the smallest's, over the size ratio (1.0: linear). ``--import`` also
imports a real log (tests/data/strace/python_f_ttt_T_yy.log) with each shape appended, as
``hangtrace import-strace`` does (both passes). ``--pure`` forces the pure-Python path
(HANGTRACE_PURE=1); by default the compiled helpers are used where built.
tests/unit/test_strace_hostile.py runs the same shapes at 1 MB with a time bound.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Callable, Dict, List

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

HEAD = "3817  1795953170.545572 "
REAL_LOG = os.path.join(ROOT, "tests", "data", "strace", "python_f_ttt_T_yy.log")


def _shape_table() -> Dict[str, Callable[[int], str]]:
    """name -> line of about n bytes (without the newline)."""
    return {
        "plain-write": lambda n: f'write(1, "{"x" * n}", {n}) = {n} <0.000010>',
        "lt-flood-fd": lambda n: f'read(3{"<" * n}, "x", 10) = 1 <0.000010>',
        "lt-flood-poll": lambda n: f'poll([{{fd=3{"<" * n}, events=POLLIN}}], 1, 100) = 1 '
                                   '<0.000010>',
        "lt-a-poll": lambda n: f'poll([{{fd=3{"<a" * (n // 2)}, events=POLLIN}}], 1, 0) = 0 '
                               '<0.000010>',
        "lt-nested": lambda n: f'read(3<{"<a" * (n // 2)}{">" * 3}, "x", 10) = 1 <0.000010>',
        "lt-pairs-select": lambda n: f'select(5, [3{"<>" * (n // 2)}], NULL, NULL, NULL) = 1 '
                                     '<0.000010>',
        "lt-unbalanced-pairs": lambda n: f'poll([{{fd=3<{"<<>" * (n // 3)}, events=POLLIN}}], '
                                         '1, 0) = 0 <0.000010>',
        "escaped-quotes": lambda n: 'write(1, "' + '\\"' * (n // 2) + f'", {n}) = {n} <0.00001>',
        "escaped-quotes-open": lambda n: 'write(1, "' + '\\"' * (n // 2) + ', 10) = 10 <0.1>',
        "many-strings": lambda n: 'execve("/bin/x", [' + '"\\"", ' * (n // 6) +
                                  '"x"], 0x7ffd /* 3 vars */) = 0 <0.000100>',
        "quote-flood": lambda n: 'write(1, ' + '"' * n + ', 10) = 10 <0.1>',
        "bracket-flood": lambda n: 'futex(0x1, FUTEX_WAIT, ' + "[" * n + ', NULL) = 0 <0.1>',
        "comma-flood": lambda n: 'pipe2([' + ", " * (n // 2) + '], 0) = 0 <0.000010>',
        "lt-result": lambda n: 'openat(AT_FDCWD, "/x", O_RDONLY) = 3<' + "<" * n,
        "lt-resumed": lambda n: '<... read resumed>' + "<" * n + ', 10) = 1 <0.1>',
        "long-duration": lambda n: 'getpid() = 1 <' + "1" * n + '.5>',
        "equals-flood": lambda n: 'read(3, ' + " = " * (n // 3) + ') = 1 <0.1>',
    }


SHAPES = tuple(_shape_table())


def hostile_lines(size: int) -> Dict[str, str]:
    """Every shape as one line (pid column, -ttt timestamp) of about ``size`` bytes."""
    return {name: HEAD + make(size) for name, make in _shape_table().items()}


def convert_cpu(line: str) -> float:
    """CPU seconds of one line through a fresh converter (what an import does to it)."""
    from tracer.strace.convert import StraceConverter
    conv = StraceConverter()
    t0 = time.thread_time()
    conv.feed_text(line + "\n")
    conv.finish()
    return time.thread_time() - t0


def import_cpu(line: str) -> float:
    """CPU seconds of ``import_strace`` of the real log with ``line`` appended."""
    from tracer.strace.importer import import_strace
    with tempfile.TemporaryDirectory(prefix="hangtrace-bench-") as tmp:
        log = os.path.join(tmp, "hostile.log")
        with open(REAL_LOG) as src, open(log, "w") as f:
            f.write(src.read() + line + "\n")
        t0 = time.thread_time()
        import_strace(log, os.path.join(tmp, "out.htrace"))
        return time.thread_time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--pure", action="store_true", help="the pure-Python path")
    ap.add_argument("--import", dest="imports", action="store_true",
                    help="also import a real log with each line appended")
    a = ap.parse_args()
    if a.pure:
        os.environ["HANGTRACE_PURE"] = "1"
    from tracer.strace.fastpath import status
    sizes: List[int] = [int(x) for x in a.sizes.split(",")]
    print(f"path: {status()}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'shape':22s} " + " ".join(f"{s:>10d} B" for s in sizes) + "   growth/size")
    base = {s: convert_cpu(hostile_lines(s)["plain-write"]) for s in sizes}
    worst = 0.0
    for name in SHAPES:
        times = [convert_cpu(hostile_lines(s)[name]) for s in sizes]
        worst = max(worst, times[-1])
        growth = (times[-1] / max(times[0], 1e-6)) / (sizes[-1] / sizes[0])
        print(f"{name:22s} " + " ".join(f"{t:10.4f} s" for t in times) + f"   {growth:6.2f}"
              + f"   ({times[-1] / max(base[sizes[-1]], 1e-6):.0f}x plain)")
        if a.imports:
            t = import_cpu(hostile_lines(sizes[-1])[name])
            print(f"{'':22s} import of the real log with it appended: {t:.3f} s")
    print(f"slowest line at {sizes[-1]} bytes: {worst:.3f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
