"""Benchmark: what ``hangtrace attach`` costs on a large target, per backend.

Usage: python bench/attach_cost.py [--threads N] [--duration S] [--runs N] [--backends proc,strace,ebpf]

Starts one Python process with N threads (default 1,000) parked on an Event, then runs
``hangtrace attach PID -b BACKEND -d S --json`` RUNS times per backend, alternating backends
(A B C A B C ...: the machine may be shared), and prints per backend the medians of:
- after: seconds from the end of the recording window (report window start + --duration) to
  hangtrace's exit, i.e. how long after --duration the verdict comes (detach, end probes,
  analysis, rendering);
- total: wall time of the whole command (interpreter start-up and BCC's compile included);
- rss: hangtrace's peak RSS (ru_maxrss of the child).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1000)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--backends", default="proc,strace,ebpf")
    args = ap.parse_args()
    code = ("import threading, sys\nev = threading.Event()\n"
            f"[threading.Thread(target=ev.wait, daemon=True).start() for _ in range({args.threads})]\n"
            "print('ready', flush=True); sys.stdin.read()")
    target = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    target.stdout.readline()
    backends = args.backends.split(",")
    res = {b: {"after": [], "total": [], "rss": []} for b in backends}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(args.runs):
                for b in backends:
                    t0 = time.time()
                    p = subprocess.Popen([sys.executable, "-m", "tracer", "attach",
                                          str(target.pid), "-b", b, "-d", str(args.duration),
                                          "--json", "-o", os.path.join(tmp, f"{b}.htrace.gz")],
                                         cwd=ROOT, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True)
                    out = p.stdout.read()
                    _, status, ru = os.wait4(p.pid, 0)
                    t1 = time.time()
                    doc = json.loads(out)
                    n = len(doc["processes"][0]["threads"]) if doc["processes"] else 0
                    res[b]["after"].append(t1 - (doc["window"]["start"] + args.duration))
                    res[b]["total"].append(t1 - t0)
                    res[b]["rss"].append(ru.ru_maxrss / 1024)
                    print(f"  {b}: after {res[b]['after'][-1]:.2f} s, total "
                          f"{res[b]['total'][-1]:.1f} s, rss {res[b]['rss'][-1]:.0f} MB, "
                          f"{n} threads in the report", flush=True)
    finally:
        target.stdin.close()
        target.wait()
    print(f"{args.threads} threads, --duration {args.duration:g}, medians of {args.runs} runs "
          "(machine possibly shared):")
    for b, r in res.items():
        print(f"{b:7} verdict {statistics.median(r['after']):.2f} s after --duration, "
              f"whole command {statistics.median(r['total']):.1f} s, "
              f"peak RSS {statistics.median(r['rss']):.0f} MB")


if __name__ == "__main__":
    main()
