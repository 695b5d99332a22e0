"""Overhead of each live backend on a syscall-heavy target (bench/sysloop.c).

Compiles sysloop.c (gcc -O2), then runs it with N iterations (default 1,000,000: 1 M writes of
1 byte to /dev/null plus an eventfd write+read every 16) untraced and under each backend
(proc, ebpf, strace), REPS times each, in one run. A backend is attached through the backend
API (start/stop) to a target that waits on a pipe, so attach time is not counted in the loop's
time; the eBPF backend's attach (BCC compile + load + attach) is measured separately.
Prints a table of median wall times and ratios vs untraced, the target's median CPU time
(user+sys from wait4's rusage: the probes run inside its syscalls, and CPU time is less
disturbed than wall time by other work on the machine), the fastest run, and the load average
before and after (a loaded machine makes every ratio noisy: repeat with more --reps).

    sudo .venv/bin/python bench/overhead.py [--iterations N] [--reps R] [--backends ...]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tracer.record.backends.base import Backend, TargetSet  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def build(out_dir: str) -> str:
    exe = os.path.join(out_dir, "sysloop")
    subprocess.run(["gcc", "-O2", "-o", exe, os.path.join(HERE, "sysloop.c")], check=True)
    return exe


def run_once(exe: str, n: int, make: Optional[Callable[[], Backend]]) -> tuple:
    """(loop seconds, attach seconds, target CPU seconds) of one run; the target waits for a
    byte on stdin."""
    r, w = os.pipe()
    # "read" blocks until we write: the backend attaches to a shell that then execs sysloop.
    p = subprocess.Popen(["sh", "-c", f'read x; exec "$0" {n}', exe], stdin=r,
                         stdout=subprocess.DEVNULL)
    os.close(r)
    backend = make() if make else None
    attach = 0.0
    try:
        if backend is not None:
            t = time.monotonic()
            backend.start(TargetSet([p.pid]), lambda e: None)
            attach = time.monotonic() - t
            time.sleep(0.2)
        t0 = time.monotonic()
        os.write(w, b"\n")
        _, status, ru = os.wait4(p.pid, 0)
        loop = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        cpu = ru.ru_utime + ru.ru_stime
    finally:
        os.close(w)
        if backend is not None:
            backend.stop()
        if p.poll() is None:
            p.kill()
            p.wait()
    return loop, attach, cpu


def backends() -> Dict[str, Callable[[], Backend]]:
    from tracer.record.backends.ebpf_backend import EbpfBackend
    from tracer.record.backends.proc_backend import ProcBackend
    from tracer.record.backends.strace_backend import StraceBackend
    return {"proc": ProcBackend, "ebpf": EbpfBackend, "strace": StraceBackend}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--backends", nargs="*", default=["proc", "ebpf", "strace"])
    a = ap.parse_args(argv)
    table = backends()
    with tempfile.TemporaryDirectory() as d:
        exe = build(d)
        rows: Dict[str, List[float]] = {"untraced": []}
        cpus: Dict[str, List[float]] = {"untraced": []}
        attach: Dict[str, List[float]] = {}
        load0 = os.getloadavg()
        for _ in range(a.reps):
            loop, _, cpu = run_once(exe, a.iterations, None)
            rows["untraced"].append(loop)
            cpus["untraced"].append(cpu)
            for name in a.backends:
                why = table[name]().check()
                if why:
                    print(f"{name}: skipped ({why})", file=sys.stderr)
                    continue
                loop, att, cpu = run_once(exe, a.iterations, table[name])
                rows.setdefault(name, []).append(loop)
                cpus.setdefault(name, []).append(cpu)
                attach.setdefault(name, []).append(att)
        load1 = os.getloadavg()
    base = statistics.median(rows["untraced"])
    cbase = statistics.median(cpus["untraced"])
    fbase = min(rows["untraced"])
    print(f"sysloop {a.iterations:,} iterations, median of {a.reps} runs; "
          f"{os.cpu_count()} CPUs, load average {load0[0]:.2f} before, {load1[0]:.2f} after")
    print(f"{'backend':<10}{'wall s':>9}{'ratio':>8}{'cpu s':>8}{'ratio':>8}{'min s':>8}"
          f"{'ratio':>8}{'attach s':>10}  runs (wall s)")
    for name, times in rows.items():
        med, cpu, fast = statistics.median(times), statistics.median(cpus[name]), min(times)
        att = f"{statistics.median(attach[name]):.2f}" if name in attach else "-"
        runs = " ".join(f"{t:.3f}" for t in times)
        print(f"{name:<10}{med:>9.3f}{med / base:>7.2f}x{cpu:>8.3f}{cpu / cbase:>7.2f}x"
              f"{fast:>8.3f}{fast / fbase:>7.2f}x{att:>10}  {runs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
