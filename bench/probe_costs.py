"""Benchmark: what each part of ``hangtrace attach -b ebpf`` costs in hangtrace's own CPU, one
part left out at a time (issue 45 item 1: which progress signal costs).

Usage: python bench/probe_costs.py [--threads N] [--duration S] [--reps R] [--variants a,b,...]

Starts one target: a Python process with N parked threads (default 100) and one thread that
writes 1 byte to /dev/null in a loop (a syscall-heavy thread the BPF program sees every call
of). Then runs ``hangtrace attach PID -b ebpf -d S --json`` R times per variant, alternating
variants (the machine is shared: neighbours in time share its load), each in a fresh process
through ``--run VARIANT``, which patches the one part out before calling the CLI. Per variant
it prints the medians of: hangtrace's CPU seconds (user+sys from wait4, the whole command:
start-up, window, end probes, analysis), that CPU less the full run's ("saves"), the saving per
thread per second of window (``saves / (threads * S)``), and the writer thread's syscalls per
second during the run (its /proc/TID/io syscw: what the tracing took from the target; the
target is always on a CPU, so its CPU time says nothing, its throughput does).

Variants (``all`` is the tool as shipped):
- ``no-proc``: without the /proc sampler beside eBPF (per-thread states, io and fault reads,
  run counts: backends/proc_backend.py);
- ``no-start``: without the start probes (evidence and memory at the window's start);
- ``no-end``: without any end probe; ``no-PROBE``: without the end probes whose name holds
  PROBE (``stack_motion``, ``log_lines``, ``memory``, ``evidence``, ``stacks``: py-spy's,
  ``futex``, ``socket``, ``file_locks``, ``kernel_stack``, ``nccl``, ``flight``).
NVML's sampler thread and the CUDA uprobes run only where there is an NVIDIA driver: not here.
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
from typing import Dict, List

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DEFAULT_VARIANTS = ("all,no-proc,no-start,no-end,no-stack_motion,no-stacks,no-log_lines,"
                    "no-memory,no-evidence")

TARGET = r"""
import os, sys, threading
ev = threading.Event()
for _ in range(int(sys.argv[1])):
    threading.Thread(target=ev.wait, daemon=True).start()
def writer():
    fd = os.open("/dev/null", os.O_WRONLY)
    print(threading.get_native_id(), flush=True)
    while True:
        os.write(fd, b"x")
threading.Thread(target=writer, daemon=True).start()
ev.wait()
"""


def patched_run(variant: str, argv: List[str]) -> int:
    """Run the CLI with one part left out (module doc)."""
    sys.path.insert(0, ROOT)
    from tracer.record import probes, session
    if variant == "no-proc":
        choose = session.choose_backends

        def without_proc(*a, **k):  # type: ignore[no-untyped-def]
            backends, why = choose(*a, **k)
            return [b for b in backends if type(b).__name__ != "ProcBackend"], why + " (no proc)"
        session.choose_backends = without_proc
        import tracer.cli.live_cmds as lc
        if hasattr(lc, "choose_backends"):
            lc.choose_backends = without_proc
    elif variant == "no-start":
        full = probes.attach_probes
        probes.attach_probes = lambda native=False: (full(native)[0], [])
    elif variant.startswith("no-"):
        key = variant[3:]
        make = probes._end_probes
        from tracer.record.probe_run import probe_name

        def fewer(native: bool) -> list:
            return [] if key == "end" else [p for p in make(native) if key not in probe_name(p)]
        probes._end_probes = fewer
    from tracer.cli.commands import run
    return run(argv)


def io_syscw(pid: int, tid: int) -> int:
    with open(f"/proc/{pid}/task/{tid}/io") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("syscw:"))


def one(variant: str, pid: int, tid: int, duration: float, out: str) -> Dict[str, float]:
    argv = [sys.executable, os.path.abspath(__file__), "--run", variant, "--", "attach",
            str(pid), "-b", "ebpf", "-d", str(duration), "--json", "-o", out]
    w0, t0 = io_syscw(pid, tid), time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    w1, t1 = io_syscw(pid, tid), time.monotonic()
    if os.waitstatus_to_exitcode(status) not in (0, 3, 4, 6, 7):
        raise SystemExit(f"{variant}: attach exited {os.waitstatus_to_exitcode(status)}")
    return {"cpu": ru.ru_utime + ru.ru_stime, "calls_s": (w1 - w0) / (t1 - t0)}


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--run":
        sys.exit(patched_run(sys.argv[2], sys.argv[4:]))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=100)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--variants", default=DEFAULT_VARIANTS)
    a = ap.parse_args()
    variants = a.variants.split(",")
    target = subprocess.Popen([sys.executable, "-c", TARGET, str(a.threads)],
                              stdout=subprocess.PIPE, text=True)
    tid = int(target.stdout.readline())
    got: Dict[str, List[Dict[str, float]]] = {v: [] for v in variants}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            print(f"load before: {os.getloadavg()[0]:.1f}; target pid {target.pid}, "
                  f"{a.threads + 2} threads, window {a.duration:g} s, {a.reps} reps", flush=True)
            for r in range(a.reps):
                for v in variants:
                    got[v].append(one(v, target.pid, tid, a.duration, os.path.join(tmp, "t.gz")))
    finally:
        target.kill()
        target.wait()
    full = statistics.median(x["cpu"] for x in got[variants[0]])
    per = (a.threads + 2) * a.duration
    print(f"{'variant':18} {'cpu s':>7} {'saves s':>8} {'ms/thread/s':>12} {'target calls/s':>15}")
    for v in variants:
        cpu = statistics.median(x["cpu"] for x in got[v])
        calls = statistics.median(x["calls_s"] for x in got[v])
        print(f"{v:18} {cpu:7.2f} {full - cpu:8.2f} {1000 * (full - cpu) / per:12.2f} "
              f"{calls:15,.0f}")
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
