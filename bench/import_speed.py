"""Benchmark: import and analysis of a real strace log, as ratios to one regex pass over it.

Usage: python bench/import_speed.py [--lines N] [--reps R] [--pure] [--both] [--keep DIR]
                                    [--synthetic] [--baseline DIR] [--codec]

The log is made of real lines: fixtures/gpu-h200/startup.strace.gz (``strace -f -ttt -T -yy``
of a CUDA start-up on an H200: long paths, -yy decorations, NVIDIA ioctls, unfinished/resumed
pairs, clones and exits) repeated with its timestamps shifted, to N lines (default 1,000,000).
Each repetition runs, one after the other and alternating: (1) a single Python regex pass over
the log (``for line in file: re.match(r"(\\d+) +(\\d+\\.\\d+) (\\w+)\\(", line)``, the floor
of any pure-Python reader), (2) ``import_strace`` into a trace, (3) ``analyze_trace`` of that
trace, each in a fresh process, which reports the CPU time, wall time and peak RSS of the work
(module imports are done before the clock starts). Printed:
per repetition and as medians, the import/regex and analyze/regex ratios of CPU time (stable on
a shared machine) and of wall time, the load average before and after, and the peak RSS of an
import and an analysis of a log a quarter as long (memory must not grow with the log).
``--pure`` measures the pure-Python path (HANGTRACE_PURE=1), ``--both`` both paths side by
side; by default the compiled helpers are used when built (scripts/build_fast.py).
``--synthetic`` uses the older generated log (short lines) instead of the real one.
``--baseline DIR`` compares this tree with another checkout in one run (``compare``).
``--codec`` (with ``--baseline``) also times the trace codec alone: reading every event of the
trace (decode and type checks, gzip not included: the trace is plain) with each tree's
reader, this tree's run by its own child, the baseline's by this script's child with the
baseline's package first on the path (so a baseline older than the option can be timed).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# a "read" child times another tree's reader (compare --codec): that tree first on the path
sys.path.insert(0, os.environ.get("HANGTRACE_BENCH_TREE", ROOT))

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from synthetic_log import generate  # noqa: E402  (tests import it from here)

FIXTURE = os.path.join(ROOT, "fixtures", "gpu-h200", "startup.strace.gz")
_TS = re.compile(r"^(\d+ +)(\d+\.\d+)")
REGEX = re.compile(r"(\d+) +(\d+\.\d+) (\w+)\(")


def real_log(path: str, n_lines: int) -> None:
    """The H200 start-up log repeated with shifted timestamps to ``n_lines`` lines."""
    with gzip.open(FIXTURE, "rt") as f:
        src = f.read().splitlines()
    first = float(_TS.match(src[0]).group(2))      # type: ignore[union-attr]
    last = float(_TS.match(src[-1]).group(2))      # type: ignore[union-attr]
    span = last - first + 0.001
    written = 0
    with open(path, "w") as out:
        k = 0
        while written < n_lines:
            shift = k * span
            chunk = []
            for line in src[:n_lines - written]:
                m = _TS.match(line)
                chunk.append(f"{m.group(1)}{float(m.group(2)) + shift:.6f}{line[m.end():]}")
            out.write("\n".join(chunk) + "\n")
            written += len(chunk)
            k += 1


# --------------------------------------------------------------------------- children
def _child(kind: str, args: List[str]) -> None:
    # The modules are imported before the clock starts: the work is measured, not start-up.
    from tracer.load.trace import analyze_trace
    from tracer.strace.importer import import_strace
    c0, t0 = time.process_time(), time.perf_counter()
    if kind == "regex":
        n = 0
        with open(args[0], encoding="utf-8", errors="surrogateescape") as f:
            match = REGEX.match
            for line in f:
                if match(line):
                    n += 1
    elif kind == "import":
        n = import_strace(args[0], args[1]).events
    elif kind == "read":
        from tracer.tracefile.format import TraceReader
        n = sum(1 for _ in TraceReader(args[0]).events())
    else:
        n = len(analyze_trace(args[0]).processes)
    out = {"cpu": time.process_time() - c0, "wall": time.perf_counter() - t0, "n": n,
           "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if kind != "regex":
        from tracer.strace.fastpath import status
        out["path"] = status()
    print(json.dumps(out))


def _run(kind: str, args: List[str], pure: bool, root: str = ROOT) -> Dict[str, float]:
    """One child of this script, run from the tree at ``root`` (its own bench script)."""
    # the tree first; what the path held (a carried wheel's folder) after it
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH", "")) if p))
    if pure:
        env["HANGTRACE_PURE"] = "1"
    else:
        env.pop("HANGTRACE_PURE", None)
    script = os.path.join(root, "bench", "import_speed.py")
    if kind == "read":
        env["HANGTRACE_BENCH_TREE"] = root
        script = os.path.join(ROOT, "bench", "import_speed.py")
    r = subprocess.run([sys.executable, script, "--child", kind, *args],
                       env=env, capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def measure(log: str, trace: str, reps: int, pure: bool) -> Dict[str, float]:
    rows = []
    for i in range(reps):
        rx = _run("regex", [log], pure)
        im = _run("import", [log, trace], pure)
        an = _run("analyze", [trace], pure)
        rows.append((rx, im, an))
        print(f"  rep {i + 1}: regex {rx['cpu']:.2f} s  import {im['cpu']:.2f} s "
              f"({im['cpu'] / rx['cpu']:.1f}x)  analyze {an['cpu']:.2f} s "
              f"({an['cpu'] / rx['cpu']:.1f}x)   [CPU; wall {rx['wall']:.2f} / "
              f"{im['wall']:.2f} / {an['wall']:.2f} s]", flush=True)
    med = statistics.median
    return {
        "regex_cpu": med(r[0]["cpu"] for r in rows),
        "import_cpu": med(r[1]["cpu"] for r in rows),
        "analyze_cpu": med(r[2]["cpu"] for r in rows),
        "import_ratio": med(r[1]["cpu"] / r[0]["cpu"] for r in rows),
        "analyze_ratio": med(r[2]["cpu"] / r[0]["cpu"] for r in rows),
        "import_ratio_wall": med(r[1]["wall"] / r[0]["wall"] for r in rows),
        "analyze_ratio_wall": med(r[2]["wall"] / r[0]["wall"] for r in rows),
        "import_rss": max(r[1]["rss_mb"] for r in rows),
        "analyze_rss": max(r[2]["rss_mb"] for r in rows),
        "path": rows[0][1]["path"],
    }


def compare(log: str, trace: str, reps: int, baseline: str, codec: bool = False) -> None:
    """This tree against another checkout (``baseline``, with its own compiled helpers built),
    paired: each repetition runs the regex pass, then both imports and both analyses (each of
    its own tree's trace) in alternating order; printed are the medians of each and of the
    per-repetition ratios this/baseline, which cancel most of a shared machine's drift.
    ``codec``: also the reading of each tree's trace alone (module doc)."""
    rows = []
    kinds = ("import", "read", "analyze") if codec else ("import", "analyze")
    for i in range(reps):
        order = [ROOT, baseline] if i % 2 == 0 else [baseline, ROOT]
        rx = _run("regex", [log], False)
        got: Dict[str, Dict[str, dict]] = {}
        for kind in kinds:
            for root in order:
                tr = trace + (".base" if root == baseline else "")
                got.setdefault(root, {})[kind] = _run(
                    kind, [log, tr] if kind == "import" else [tr], False, root)
        rows.append((rx, got[ROOT], got[baseline]))
        print(f"  rep {i + 1}: regex {rx['cpu']:.2f} s  import {got[ROOT]['import']['cpu']:.2f}"
              f" / {got[baseline]['import']['cpu']:.2f} s  analyze "
              f"{got[ROOT]['analyze']['cpu']:.2f} / {got[baseline]['analyze']['cpu']:.2f} s"
              + (f"  read {got[ROOT]['read']['cpu']:.2f} / {got[baseline]['read']['cpu']:.2f} s"
                 if codec else "") + "   [CPU: this tree / baseline]", flush=True)
    med = statistics.median
    print(f"load average after: {_load()}\nthis tree: {rows[0][1]['import']['path']}\n"
          f"baseline ({baseline}): {rows[0][2]['import']['path']}")
    for kind in kinds:
        this = med(r[1][kind]["cpu"] for r in rows)
        base = med(r[2][kind]["cpu"] for r in rows)
        ratio = med(r[1][kind]["cpu"] / r[2][kind]["cpu"] for r in rows)
        print(f"  {kind:8s} median CPU {this:.2f} s, baseline {base:.2f} s; median ratio "
              f"{ratio:.3f} (min {min(r[1][kind]['cpu'] for r in rows):.2f} / "
              f"{min(r[2][kind]['cpu'] for r in rows):.2f} s); regex pass "
              f"{med(r[0]['cpu'] for r in rows):.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--pure", action="store_true", help="the pure-Python path")
    ap.add_argument("--both", action="store_true", help="compiled and pure-Python paths")
    ap.add_argument("--keep", help="directory to keep the log and traces in")
    ap.add_argument("--synthetic", action="store_true", help="the older generated log")
    ap.add_argument("--baseline", metavar="DIR",
                    help="compare with another checkout (e.g. git archive main | tar -x -C DIR;"
                         " build its helpers with DIR/scripts/build_fast.py)")
    ap.add_argument("--codec", action="store_true",
                    help="with --baseline: also time reading each tree's trace alone")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _child(a.child[0], a.child[1:])
        return
    d = a.keep or tempfile.mkdtemp(prefix="hangtrace-bench-")
    os.makedirs(d, exist_ok=True)
    log, small = os.path.join(d, "bench.strace"), os.path.join(d, "small.strace")
    trace = os.path.join(d, "bench.htrace")
    t0 = time.perf_counter()
    if a.synthetic:
        generate(log, a.lines)
        generate(small, a.lines // 4)
    else:
        real_log(log, a.lines)
        real_log(small, a.lines // 4)
    print(f"log: {a.lines:,} real lines ({os.path.getsize(log) / 1e6:.0f} MB) made in "
          f"{time.perf_counter() - t0:.1f} s; machine: {os.cpu_count()} CPUs, load average "
          f"{_load()}")
    if a.baseline:
        compare(log, trace, a.reps, os.path.abspath(a.baseline), a.codec)
        paths: List[bool] = []
    else:
        paths = [False, True] if a.both else [a.pure]
    results = {}
    for pure in paths:
        print(f"{'pure Python' if pure else 'default path'}: {a.reps} repetitions, "
              "each in fresh processes, alternating regex / import / analyze", flush=True)
        results[pure] = measure(log, trace, a.reps, pure)
        q_im = _run("import", [small, trace + ".small"], pure)
        q_an = _run("analyze", [trace + ".small"], pure)
        results[pure]["small_rss"] = (q_im["rss_mb"], q_an["rss_mb"])
    if paths:
        print(f"load average after: {_load()}")
    for pure, r in results.items():
        print(f"\n{r['path']}:\n"
              f"  median CPU: regex pass {r['regex_cpu']:.2f} s, import {r['import_cpu']:.2f} s,"
              f" analyze {r['analyze_cpu']:.2f} s\n"
              f"  import  = {r['import_ratio']:.1f}x the regex pass (wall: "
              f"{r['import_ratio_wall']:.1f}x)   [limit 6x, goal 4x]\n"
              f"  analyze = {r['analyze_ratio']:.1f}x the regex pass (wall: "
              f"{r['analyze_ratio_wall']:.1f}x)   [limit 3x, goal 2x]\n"
              f"  peak RSS: import {r['import_rss']:.0f} MB, analyze {r['analyze_rss']:.0f} MB "
              f"({a.lines:,} lines); {r['small_rss'][0]:.0f} MB, {r['small_rss'][1]:.0f} MB "
              f"({a.lines // 4:,} lines)")
    if not a.keep:
        for p in os.listdir(d):
            os.unlink(os.path.join(d, p))
        os.rmdir(d)


if __name__ == "__main__":
    main()
