"""What ``hangtrace watch`` costs: CPU of the watcher per second of watching, at the default rate.

Starts a target process with N threads (default 1,000, parked in a futex wait, as the pool
threads of an LLM worker are) and runs ``hangtrace watch PID --silent-for 1e9`` against it as a
subprocess for ``--seconds``. The cost is the watcher's CPU time (utime + stime from
/proc/PID/stat, which includes the kernel time of its /proc reads, where the kernel sums the
target's threads) over the wall time, measured after a warm-up that excludes interpreter start
and imports. Variants run alternately (A B A B ...): the N-thread target and a 1-thread one, to
see what the threads add. Prints the median per variant, every run, the per-look time of the
sampler in this process (``TreeSampler.look`` on the N-thread target), the CPU count and the
load average before and after (this machine may be shared: other work makes CPU times noisy).

    .venv/bin/python bench/watch_cost.py [--threads N] [--seconds S] [--reps R] [--interval S]
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import List, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

TARGET = """
import sys, threading, time
n = int(sys.argv[1])
ev = threading.Event()
for _ in range(n - 1):
    threading.Thread(target=ev.wait, daemon=True).start()
print("READY", flush=True)
time.sleep(10 ** 6)
"""


def start_target(threads: int) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", TARGET, str(threads)], stdout=subprocess.PIPE,
                         text=True, start_new_session=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "READY"
    return p


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        data = f.read()
    fields = data[data.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def watch_cost(target: int, seconds: float, warmup: float, interval: Optional[float],
               out_dir: str) -> float:
    """Fraction of one core the watcher used while watching ``target``."""
    args = [sys.executable, "-m", "tracer", "watch", str(target), "--silent-for", "1e9",
            "--output-dir", out_dir]
    if interval is not None:
        args += ["--interval", str(interval)]
    w = subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(warmup)
        c0, t0 = cpu_seconds(w.pid), time.monotonic()
        time.sleep(seconds)
        c1, t1 = cpu_seconds(w.pid), time.monotonic()
    finally:
        w.send_signal(signal.SIGTERM)
        w.wait(timeout=30)
    return (c1 - c0) / (t1 - t0)


def look_ms(target: int, n: int = 300) -> float:
    from tracer.record.watch_looks import TreeSampler
    s = TreeSampler([target])
    s.look()
    c = time.process_time()
    for _ in range(n):
        s.look()
    s.close()
    return (time.process_time() - c) / n * 1000


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=4.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--interval", type=float, default=None,
                    help="--interval for the watcher (default: its own default)")
    a = ap.parse_args(argv)
    big, small = start_target(a.threads), start_target(1)
    runs = {f"{a.threads} threads": [], "1 thread": []}
    load0 = os.getloadavg()
    try:
        per_look = look_ms(big.pid)
        with tempfile.TemporaryDirectory() as out:
            for _ in range(a.reps):
                for name, p in ((f"{a.threads} threads", big), ("1 thread", small)):
                    runs[name].append(watch_cost(p.pid, a.seconds, a.warmup, a.interval, out))
            assert not os.listdir(out), "the watcher captured something"
    finally:
        for p in (big, small):
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    load1 = os.getloadavg()
    print(f"hangtrace watch, interval {a.interval or 'default'}; {a.seconds:g} s per run after "
          f"{a.warmup:g} s warm-up, {a.reps} runs per variant, alternating; {os.cpu_count()} "
          f"CPUs, load average {load0[0]:.2f} before, {load1[0]:.2f} after")
    for name, vals in runs.items():
        print(f"  {name:<14} median {statistics.median(vals) * 100:.3f}% of one core   runs: "
              + " ".join(f"{v * 100:.3f}%" for v in vals))
    print(f"  sampler look on the {a.threads}-thread target: {per_look:.3f} ms CPU per look")
    return 0


if __name__ == "__main__":
    sys.exit(main())
