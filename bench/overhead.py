"""Overhead of hangtrace on a syscall-heavy target (bench/sysloop.c).

Compiles sysloop.c (gcc -O2), then runs it with N iterations (default 3,000,000: N writes of
1 byte to /dev/null plus an eventfd write+read every 16) untraced and traced, alternating
(untraced, traced, untraced, ...: a machine shared with other work drifts; alternation keeps
the pairs comparable), REPS times each. The target waits on a pipe until the tracer is in
place, so attach time is not counted in the loop's time.

Two ways to trace it (``--through``):
- ``backend`` (default): each backend (proc, ebpf, strace, and ``floor``: an empty program on
  the sys_exit raw tracepoint, what any syscall tracing costs on this kernel) started through
  the backend API with its events dropped.
- ``attach``: the whole tool, ``python -m tracer attach PID --backend B`` (BPF, /proc sampling,
  trace writing and the analyzer fed live), under a pseudo-terminal so that the live view
  runs too (``--no-tty``: --json instead). Also measured: hangtrace's own CPU (user+sys of the
  whole process, from wait4), the time from its start until the recording began (its trace
  file exists), and how far the report's counters of the loop are from the truth (syscalls,
  bytes written, eventfd writes).

Prints median wall time and ratio, the target's median CPU time (user+sys from wait4's
rusage: the probes run inside its syscalls, and CPU time is less disturbed than wall time by
other work on the machine) and ratio, and the load average before and after.

    sudo .venv/bin/python bench/overhead.py [--through attach] [--iterations N] [--reps R]
"""
from __future__ import annotations

import argparse
import json
import os
import pty
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from tracer.record.backends.base import Backend, TargetSet  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def build(out_dir: str) -> str:
    exe = os.path.join(out_dir, "sysloop")
    subprocess.run(["gcc", "-O2", "-o", exe, os.path.join(HERE, "sysloop.c")], check=True)
    return exe


def _gated(exe: str, n: int) -> tuple:
    """sysloop N behind a pipe: it starts when a byte is written to the returned fd."""
    r, w = os.pipe()
    p = subprocess.Popen(["sh", "-c", f'read x; exec "$0" {n}', exe], stdin=r,
                         stdout=subprocess.DEVNULL)
    os.close(r)
    return p, w


def _release_and_wait(p: subprocess.Popen, w: int) -> tuple:
    """(loop wall seconds, target CPU seconds)."""
    t0 = time.monotonic()
    os.write(w, b"\n")
    _, status, ru = os.wait4(p.pid, 0)
    loop = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return loop, ru.ru_utime + ru.ru_stime


# ------------------------------------------------------------------ through the backend API
class FloorBackend(Backend):
    """An empty program on the sys_exit raw tracepoint: the floor of any syscall tracing."""
    name = "floor"

    def check(self) -> Optional[str]:
        from tracer.record.backends.ebpf.backend import ebpf_problem
        return ebpf_problem()

    def start(self, targets: TargetSet, emit) -> None:
        from bcc import BPF
        self._b = BPF(text="RAW_TRACEPOINT_PROBE(sys_exit) { return 0; }")

    def stop(self) -> None:
        self._b.cleanup()


def run_backend(exe: str, n: int, make: Optional[Callable[[], Backend]]) -> Dict[str, float]:
    p, w = _gated(exe, n)
    backend = make() if make else None
    out: Dict[str, float] = {}
    try:
        if backend is not None:
            t = time.monotonic()
            backend.start(TargetSet([p.pid]), lambda e: None)
            out["attach"] = time.monotonic() - t
            time.sleep(0.2)
        out["wall"], out["cpu"] = _release_and_wait(p, w)
    finally:
        os.close(w)
        if backend is not None:
            backend.stop()
        if p.poll() is None:
            p.kill()
            p.wait()
    return out


def backends() -> Dict[str, Callable[[], Backend]]:
    from tracer.record.backends.ebpf.backend import EbpfBackend
    from tracer.record.backends.proc_backend import ProcBackend
    from tracer.record.backends.strace_backend import StraceBackend
    return {"proc": ProcBackend, "ebpf": EbpfBackend, "strace": StraceBackend,
            "floor": FloorBackend}


# ------------------------------------------------------------------ through hangtrace attach
def _drain(fd: int) -> None:
    try:
        while os.read(fd, 65536):
            pass
    except OSError:
        pass


def run_attach(exe: str, n: int, backend: str, tty: bool, tmp: str) -> Dict[str, float]:
    """One loop under ``hangtrace attach``: loop time and CPU, hangtrace's CPU, its time to
    start recording, and the report's counters against the truth."""
    p, w = _gated(exe, n)
    trace = os.path.join(tmp, f"attach-{p.pid}.htrace.gz")
    cmd = [sys.executable, "-m", "tracer", "attach", str(p.pid), "--backend", backend,
           "-d", "600", "-o", trace]
    master = None
    if tty:
        master, slave = pty.openpty()
        h = subprocess.Popen(cmd, cwd=ROOT, stdout=slave, stderr=subprocess.DEVNULL,
                             env=dict(os.environ, COLUMNS="120", LINES="40"))
        os.close(slave)
        threading.Thread(target=_drain, args=(master,), daemon=True).start()
    else:
        h = subprocess.Popen(cmd + ["--json"], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    out: Dict[str, float] = {}
    t0 = time.monotonic()
    try:
        # created before the backends attach; its header is written once they are
        while not (os.path.exists(trace) and os.path.getsize(trace) > 0):
            if h.poll() is not None:
                raise RuntimeError(f"hangtrace exited with {h.returncode} before recording")
            time.sleep(0.01)
        out["attach"] = time.monotonic() - t0
        time.sleep(0.2)
        out["wall"], out["cpu"] = _release_and_wait(p, w)
        _, _, ru = os.wait4(h.pid, 0)
        out["tool_cpu"] = ru.ru_utime + ru.ru_stime
    finally:
        os.close(w)
        for proc in (p, h):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if master is not None:
            os.close(master)
    out.update(_errors(trace, p.pid, n))
    os.unlink(trace)
    return out


def _errors(trace: str, pid: int, n: int) -> Dict[str, float]:
    """Relative error of the loop's report counters (the analysis of the saved trace)."""
    r = subprocess.run([sys.executable, "-m", "tracer", "analyze", trace, "--json"], cwd=ROOT,
                       capture_output=True, text=True)
    procs = [q for q in json.loads(r.stdout)["processes"] if q["pid"] == pid]
    c = procs[0]["counters"] if procs else {}
    truth = {"syscalls": n + 2 * (n // 16), "bytes_written": n + 8 * (n // 16),
             "eventfd_writes": n // 16}
    return {f"err_{k}": (c.get(k, 0) - v) / v for k, v in truth.items()}


# ------------------------------------------------------------------ report
def _med(rows: List[Dict[str, float]], key: str) -> Optional[float]:
    vals = [r[key] for r in rows if key in r]
    return statistics.median(vals) if vals else None


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--through", choices=["backend", "attach"], default="backend")
    ap.add_argument("--iterations", type=int, default=3_000_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--backends", nargs="*", default=None,
                    help="backend mode: proc ebpf strace floor; attach mode: ebpf (strace, proc)")
    ap.add_argument("--no-tty", action="store_true", help="attach mode: --json, no live view")
    a = ap.parse_args(argv)
    names = a.backends or (["ebpf"] if a.through == "attach" else ["proc", "ebpf", "strace"])
    table = backends()
    for name in names:
        why = table[name]().check() if name in table else f"unknown backend {name}"
        if why:
            print(f"{name}: cannot run ({why})", file=sys.stderr)
            return 1
    rows: Dict[str, List[Dict[str, float]]] = {"untraced": []}
    with tempfile.TemporaryDirectory() as d:
        exe = build(d)
        load0 = os.getloadavg()
        for _ in range(a.reps):
            for name in names:
                rows["untraced"].append(run_backend(exe, a.iterations, None))
                if a.through == "attach":
                    run = run_attach(exe, a.iterations, name, not a.no_tty, d)
                else:
                    run = run_backend(exe, a.iterations, table[name])
                rows.setdefault(name, []).append(run)
        load1 = os.getloadavg()
    base, cbase = _med(rows["untraced"], "wall"), _med(rows["untraced"], "cpu")
    how = "through hangtrace attach" + ("" if a.no_tty else " with the live view") \
        if a.through == "attach" else "through the backend API"
    print(f"sysloop {a.iterations:,} iterations {how}, median of {a.reps} alternating runs; "
          f"{os.cpu_count()} CPUs, load average {load0[0]:.2f} before, {load1[0]:.2f} after")
    print(f"{'':<10}{'wall s':>8}{'ratio':>8}{'cpu s':>8}{'ratio':>8}{'attach s':>10}"
          f"{'tool cpu s':>12}  counter errors / runs (wall s)")
    for name, rs in rows.items():
        wall, cpu = _med(rs, "wall"), _med(rs, "cpu")
        att, tool = _med(rs, "attach"), _med(rs, "tool_cpu")
        errs = ", ".join(f"{k[4:]} {_med(rs, k):+.2%}" for k in sorted(rs[0]) if k.startswith("err_"))
        print(f"{name:<10}{wall:>8.3f}{wall / base:>7.2f}x{cpu:>8.3f}{cpu / cbase:>7.2f}x"
              f"{att if att is not None else float('nan'):>10.2f}"
              f"{tool if tool is not None else float('nan'):>12.2f}  "
              f"{errs or ' '.join('%.2f' % r['wall'] for r in rs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
