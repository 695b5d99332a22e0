"""Benchmark: how long ``hangtrace attach -d D`` of a live tree of many processes takes, from
the command's start to "attaching" (the start: targets, header, start probes, the backends'
attach) and from "attaching" to "trace saved" (the window, the last drain, the end probes)
(issue 35 item 3: a 2,000-process tree with ``-d 3`` records for at most 3.3 s).

Usage: python bench/tree_attach.py [--procs 2000] [--duration 3] [--backends strace,proc,ebpf]
                                   [--runs 1] [--tree DIR ...]

The tree: one Python process forks ``--procs`` children in a tree of fan-out 8 (each child
forks its share, then sleeps in ``pause()``), started once, recorded by each backend in turn
and killed (its process group) at the end. Printed per run: seconds to "attaching", from it
to the trace's last byte (its mtime: the recording's end, before the analysis) and to "trace
saved" (after the analysis), the trace's end record less its header's start (the trace's
close, after the end probes), the report's window (``--json``: the recording window, before
the end probes since issue 46 item 9) and verdict, seconds to the command's exit, its exit
status and the load. ``--tree`` times the hangtrace of other
checkouts (on PYTHONPATH), their runs alternating on the one tree; this one's by default.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import List, Optional, Tuple

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
HANGTRACE = [sys.executable, "-m", "tracer"]

TREE = r'''
import os, signal, sys
FANOUT = 8
def grow(n):
    """Fork n processes below this one: up to FANOUT children, each growing its share."""
    kids = min(FANOUT, n)
    share, extra = divmod(n - kids, kids) if kids else (0, 0)
    for k in range(kids):
        if os.fork() == 0:
            grow(share + (1 if k < extra else 0))
            signal.pause()
            os._exit(0)
n = int(sys.argv[1])
grow(n)
print("READY", flush=True)
signal.pause()
'''


def start_tree(n: int) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", TREE, str(n)], stdout=subprocess.PIPE,
                         text=True, start_new_session=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "READY"
    deadline = time.monotonic() + 120       # the grandchildren fork after READY
    while tree_size(p.pid) < n + 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    return p


def tree_size(pid: int) -> int:
    out = subprocess.run(["ps", "-o", "pid=", "-g", str(os.getpgid(pid))],
                         capture_output=True, text=True).stdout
    return len(out.split())


def attach_once(pid: int, backend: str, duration: float,
                out: str, tree: str = REPO) -> Tuple[Optional[float], Optional[float], float,
                                                    int, Optional[float], Optional[float],
                                                    Optional[float], str]:
    """(s to "attaching", s from it to "trace saved", s to exit, exit status, s from
    "attaching" to the trace's last byte, the trace's end record less its start in s, the
    report's window in s, its verdict), of the hangtrace of checkout ``tree`` (on PYTHONPATH,
    this interpreter)."""
    t0 = time.monotonic()
    env = dict(os.environ, PYTHONPATH=tree + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen(HANGTRACE + ["attach", str(pid), "-b", backend, "-d", str(duration),
                                      "-o", out, "--json"], cwd=tree, env=env,
                         stdout=open(out + ".json", "w"), stderr=subprocess.PIPE, text=True)
    seen: List[Tuple[float, str]] = []
    wall: List[float] = []          # time.time() at "attaching", for the trace's mtime

    def read() -> None:
        assert p.stderr is not None
        for line in p.stderr:
            seen.append((time.monotonic(), line))
            if "attaching" in line and not wall:
                wall.append(time.time())
    r = threading.Thread(target=read, daemon=True)
    r.start()
    rc = p.wait()
    total = time.monotonic() - t0
    r.join(timeout=5)

    def when(what: str) -> Optional[float]:
        return next((t for t, line in seen if what in line), None)
    att, saved = when("attaching"), when("trace saved")
    closed = os.stat(out).st_mtime - wall[0] if wall and os.path.exists(out) else None
    window, verdict = report_window(out + ".json")
    return (att - t0 if att else None, saved - att if att and saved else None, total, rc,
            closed, trace_window(out), window, verdict)


def report_window(path: str) -> Tuple[Optional[float], str]:
    """The --json report's window (s) and verdict."""
    import json
    try:
        with open(path) as f:
            report = json.load(f)
        return float(report["window"]["duration"]), str(report.get("verdict"))
    except (OSError, ValueError, KeyError, TypeError):
        return None, "?"


def trace_window(path: str) -> Optional[float]:
    """The trace's end record's time (when it was closed, after the end probes) less its
    header's start."""
    sys.path.insert(0, REPO)
    from tracer.tracefile.format import TraceReader
    try:
        r = TraceReader(path)
        for _ in r.events():
            pass
        return r.info.end.ts - r.info.header["start"] if r.info.end is not None else None
    except Exception:  # a trace that could not be read: no window to show
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=2000)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--backends", default="strace,proc,ebpf")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--tree", action="append", default=[],
                    help="a checkout to time (repeatable; its runs alternate with the others')")
    ns = ap.parse_args()
    checkouts = [os.path.abspath(t) for t in ns.tree] or [REPO]
    tree = start_tree(ns.procs)
    d = tempfile.mkdtemp(prefix="hangtrace-tree-bench-")
    fmt = lambda v: f"{v:.2f}" if v is not None else "-"  # noqa: E731
    try:
        print(f"tree of {tree_size(tree.pid)} processes (root {tree.pid}), load "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        for backend in ns.backends.split(","):
            for i in range(ns.runs):
                for k, co in enumerate(checkouts):
                    att, saved, total, rc, closed, whole, window, verdict = attach_once(
                        tree.pid, backend, ns.duration,
                        os.path.join(d, f"{backend}-{i}-{k}.htrace.gz"), co)
                    who = f"{co} " if len(checkouts) > 1 else ""
                    print(f"{who}{backend}: attaching after {fmt(att)} s, trace closed "
                          f"{fmt(closed)} s and saved {fmt(saved)} s after it (end record "
                          f"{fmt(whole)} s after the start; the report's window {fmt(window)} "
                          f"s, {verdict}), exit after {total:.2f} s (status {rc}), load "
                          f"{os.getloadavg()[0]:.2f}", flush=True)
    finally:
        os.killpg(tree.pid, signal.SIGKILL)
        tree.wait()


if __name__ == "__main__":
    main()
