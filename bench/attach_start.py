"""Benchmark: how long ``hangtrace attach`` takes from the command to the first byte of its
trace, and how long ``hangtrace --version`` and ``hangtrace doctor`` take.

Usage: python bench/attach_start.py [--backends ebpf proc strace] [--reps R] [--tree DIR ...]
       bench/attach_start.sh        (the same with this checkout's .venv, for the GPU host)

Each repetition starts a target (``sleep 60``), then runs ``python -m tracer attach -p PID
-d 1 -b BACKEND -o OUT.htrace.gz`` and polls OUT every millisecond: the time from the
command's start to OUT's first byte (the trace's header, written once every backend is in
place: the window opens then) is the attach start. The process's own interpreter start-up is
in it (as it is for a user), with the .pyc files written by a first, untimed run of each
command (``PYTHONDONTWRITEBYTECODE`` is dropped: an install has its .pyc). ``--version`` and ``doctor`` are timed to their exit. ``--tree``
names checkouts to time side by side in one run (their package first on the path, alternating
repetition by repetition); the default is this checkout. Printed: per tree and command the
median, min and max of R repetitions, in seconds.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env(tree: str) -> Dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)      # an install has its .pyc files: so do we
    env["PYTHONPATH"] = tree + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def attach_start(tree: str, backend: str, out_dir: str) -> float:
    """Seconds from the command to the trace's first byte (one run)."""
    target = subprocess.Popen(["sleep", "60"])
    out = os.path.join(out_dir, f"start-{backend}-{time.monotonic_ns()}.htrace.gz")
    try:
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "tracer", "attach", "-p", str(target.pid),
                                 "-d", "1", "-b", backend, "-o", out],
                                env=_env(tree), cwd=tree, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        first = None
        while first is None and proc.poll() is None:
            try:
                if os.path.getsize(out) > 0:
                    first = time.monotonic() - t0
                    break
            except OSError:
                pass
            time.sleep(0.001)
        proc.wait(timeout=60)
        if first is None:
            raise SystemExit(f"attach_start: {backend}: no trace written (exit {proc.returncode})")
        return first
    finally:
        target.kill()
        target.wait()


def command_time(tree: str, args: List[str]) -> float:
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "tracer", *args], env=_env(tree), cwd=tree,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.monotonic() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backends", nargs="+", default=["ebpf", "proc"])
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--tree", action="append", default=[])
    a = p.parse_args()
    trees = [os.path.abspath(t) for t in a.tree] or [HERE]
    times: Dict[str, List[float]] = {}
    with tempfile.TemporaryDirectory() as out_dir:
        for tree in trees:                        # warm-up: compiles the .pyc files
            attach_start(tree, a.backends[0], out_dir)
            command_time(tree, ["doctor"])
        for _ in range(a.reps):
            for tree in trees:
                for backend in a.backends:
                    times.setdefault(f"{tree}  attach -b {backend} (first trace byte)",
                                     []).append(attach_start(tree, backend, out_dir))
                times.setdefault(f"{tree}  --version", []).append(command_time(tree, ["--version"]))
                times.setdefault(f"{tree}  doctor", []).append(command_time(tree, ["doctor"]))
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, load average {load:.2f}, {a.reps} repetitions, "
          f"{sys.executable}")
    for name, ts in times.items():
        print(f"{name}: median {statistics.median(ts):.3f} s, min {min(ts):.3f}, "
              f"max {max(ts):.3f}")


if __name__ == "__main__":
    main()
