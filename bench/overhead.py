"""What tracing costs a syscall-heavy target (bench/sysloop.c), and every other process.

Compiles sysloop.c (gcc -O2), then runs it with N iterations (default 3,000,000: N writes of
1 byte to /dev/null plus an eventfd write+read every 16: 1.125 syscalls per iteration)
untraced and under each MODE, alternating (untraced, mode 1, untraced, mode 2, ...: a machine
shared with other work drifts; alternation keeps the pairs comparable), REPS times each. The
loop waits on a pipe until the tracer is in place, so attach time is not in the loop's time.

Modes (``--modes``; default: floor ebpf attach bystander):
- ``floor``: an empty program on the tracepoint hangtrace's CO-RE object uses (tp_btf
  sys_exit, bpf/floor.bpf.o through libbpf): what any syscall tracing costs on this kernel;
  ``floor-bcc``: the empty raw_tp sys_exit program BCC would attach.
- ``ebpf``: the eBPF backend through the backend API (events dropped), libbpf loader;
  ``ebpf-bcc``: the same with BCC. Its attach time (start() until the program counts) is
  the "attach s" column.
- ``attach``: the whole tool, ``python -m tracer attach PID --backend ebpf`` (BPF, /proc
  sampling, trace writing and the analyzer fed live) under a pseudo-terminal so that the live
  view runs too (``--no-tty``: --json instead); ``attach-bcc`` with HANGTRACE_EBPF_LOADER=bcc.
  Also measured: hangtrace's own CPU (user+sys from wait4), the time from its start until the
  recording began (its trace file exists: "start s"), and how far the report's counters of
  the loop are from the truth (syscalls, bytes written, eventfd writes).
- ``bystander``: the loop is NOT traced while ``hangtrace attach --backend ebpf`` records
  another process (a sleeping one): what the tracepoint costs everyone else on the machine.
- ``proc``, ``strace``: those backends through the backend API.
- ``--tree DIR`` (repeatable): also ``attach@NAME``, the whole tool of another checkout (its
  .venv's python, ``-m tracer`` in DIR; NAME its short commit), alternating with this tree's:
  today's main beside this tree in one run (make one: ``git worktree add /tmp/ht-main main
  --detach && (cd /tmp/ht-main && bash scripts/setup.sh)``).

Prints, per mode, the median loop wall time and the target's CPU time (user+sys from wait4:
the probes run inside its syscalls; CPU time is less disturbed than wall time by other work
on the machine), their ratios to untraced (the median over runs of each run against the
untraced run just before it: neighbours in time share the machine's load), the CPU ratio
over the floor's (the goal: hangtrace within 5% of the floor), and the load average before
and after. For the attach modes also hangtrace's own CPU while the loop ran (its threads'
schedstat run time, ms per second of loop: "tool ms/s") and how often its threads were put on a
CPU then ("wakes/s"): on a 2-core machine each wake-up of another process costs the loop time
(bench/README.md), which is why they are shown.

    sudo .venv/bin/python bench/overhead.py [--modes M...] [--iterations N] [--reps R]
                                            [--tree DIR]...

Results (target CPU time, medians of alternating runs; sysloop 3,000,000 iterations,
3.375 M syscalls): bench/results/overhead-vm.txt, quoted in README.md.
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
MODES = ("floor", "floor-bcc", "ebpf", "ebpf-bcc", "attach", "attach-bcc", "bystander",
         "proc", "strace")
DEFAULT = ["floor", "ebpf", "attach", "bystander"]


def build(out_dir: str) -> str:
    exe = os.path.join(out_dir, "sysloop")
    subprocess.run(["gcc", "-O2", "-w", "-o", exe, os.path.join(HERE, "sysloop.c")], check=True)
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
    """An empty program on the sys_exit tracepoint: the floor of any syscall tracing."""
    name = "floor"

    def __init__(self, loader: str = "libbpf") -> None:
        super().__init__()
        self.loader = loader
        self.attach_s: Optional[float] = None
        self._prog = None

    def check(self) -> Optional[str]:
        from tracer.record.backends.ebpf.env import ebpf_problem
        return ebpf_problem((self.loader,), objects=("floor",))

    def start(self, targets: TargetSet, emit) -> None:
        t0 = time.monotonic()
        if self.loader == "libbpf":
            from tracer.record.backends.ebpf.core_loader import CoreProgram
            from tracer.record.backends.ebpf.source import object_path
            self._prog = CoreProgram(str(object_path("floor")), programs=["floor_tp_btf"])
        else:
            from tracer.record.backends.ebpf.bcc_loader import BccProgram
            from tracer.record.backends.ebpf.source import bcc_text
            self._prog = BccProgram(bcc_text("floor"), ["-DHT_BCC"])
        self.attach_s = time.monotonic() - t0

    def stop(self) -> None:
        if self._prog is not None:
            self._prog.close()
            self._prog = None


def _backend_makers() -> Dict[str, Callable[[], Backend]]:
    from tracer.record.backends.ebpf.backend import EbpfBackend
    from tracer.record.backends.proc_backend import ProcBackend
    from tracer.record.backends.strace_backend import StraceBackend
    return {"floor": lambda: FloorBackend("libbpf"), "floor-bcc": lambda: FloorBackend("bcc"),
            "ebpf": lambda: EbpfBackend(loader="libbpf"),
            "ebpf-bcc": lambda: EbpfBackend(loader="bcc"),
            "proc": ProcBackend, "strace": StraceBackend}


def run_backend(exe: str, n: int, make: Optional[Callable[[], Backend]]) -> Dict[str, float]:
    p, w = _gated(exe, n)
    backend = make() if make else None
    out: Dict[str, float] = {}
    try:
        if backend is not None:
            backend.start(TargetSet([p.pid]), lambda e: None)
            out["attach"] = getattr(backend, "attach_s", None) or float("nan")
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


# ------------------------------------------------------------------ through hangtrace attach
def _drain(fd: int) -> None:
    try:
        while os.read(fd, 65536):
            pass
    except OSError:
        pass


def _python(tree: str) -> str:
    """The interpreter that runs ``tree``'s hangtrace: its .venv's, else this one."""
    exe = os.path.join(tree, ".venv", "bin", "python")
    return exe if tree != ROOT and os.access(exe, os.X_OK) else sys.executable


def _hangtrace(pid: int, trace: str, loader: str, tty: bool, tree: str = ROOT) -> tuple:
    """``hangtrace attach PID`` of checkout ``tree`` started (process, pty master or None)."""
    cmd = [_python(tree), "-m", "tracer", "attach", str(pid), "--backend", "ebpf",
           "-d", "600", "-o", trace]
    env = dict(os.environ, COLUMNS="120", LINES="40", HANGTRACE_EBPF_LOADER=loader)
    env.pop("PYTHONPATH", None)
    if tty:
        master, slave = pty.openpty()
        h = subprocess.Popen(cmd, cwd=tree, stdout=slave, stderr=subprocess.DEVNULL, env=env)
        os.close(slave)
        threading.Thread(target=_drain, args=(master,), daemon=True).start()
        return h, master
    h = subprocess.Popen(cmd + ["--json"], cwd=tree, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env)
    return h, None


def _threads_run(pid: int) -> tuple:
    """(seconds on a CPU, times put on a CPU) of all of ``pid``'s threads (schedstat)."""
    ns = runs = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0, 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                fields = f.read().split()
            ns, runs = ns + int(fields[0]), runs + int(fields[2])
        except (OSError, IndexError, ValueError):
            pass
    return ns / 1e9, runs


def _wait_recording(h: subprocess.Popen, trace: str) -> float:
    """Seconds until the trace has its header (the backends are attached)."""
    t0 = time.monotonic()
    while not (os.path.exists(trace) and os.path.getsize(trace) > 0):
        if h.poll() is not None:
            raise RuntimeError(f"hangtrace exited with {h.returncode} before recording")
        if time.monotonic() - t0 > 120:
            raise RuntimeError("hangtrace did not start recording within 120 s")
        time.sleep(0.01)
    return time.monotonic() - t0


def run_attach(exe: str, n: int, loader: str, tty: bool, tmp: str,
               bystander: bool = False, tree: str = ROOT) -> Dict[str, float]:
    """One loop with ``hangtrace attach`` (of checkout ``tree``) recording it (or,
    ``bystander``, recording a sleeping process while the loop runs untraced)."""
    p, w = _gated(exe, n)
    other = subprocess.Popen(["sleep", "600"]) if bystander else None
    target = other.pid if other is not None else p.pid
    trace = os.path.join(tmp, f"attach-{p.pid}.htrace.gz")
    h, master = _hangtrace(target, trace, loader, tty, tree)
    out: Dict[str, float] = {}
    try:
        out["start"] = _wait_recording(h, trace)
        time.sleep(0.2)
        cpu0, runs0 = _threads_run(h.pid)
        out["wall"], out["cpu"] = _release_and_wait(p, w)
        cpu1, runs1 = _threads_run(h.pid)
        out["tool_ms_s"] = 1000 * (cpu1 - cpu0) / out["wall"]
        out["wakes_s"] = (runs1 - runs0) / out["wall"]
        if other is not None:
            h.terminate()
        _, _, ru = os.wait4(h.pid, 0)
        out["tool_cpu"] = ru.ru_utime + ru.ru_stime
    finally:
        os.close(w)
        for proc in (p, h, other):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        if master is not None:
            os.close(master)
    if other is None:
        out.update(_errors(trace, p.pid, n, tree))
    os.unlink(trace)
    return out


def _errors(trace: str, pid: int, n: int, tree: str = ROOT) -> Dict[str, float]:
    """Relative error of the loop's report counters (the analysis of the saved trace)."""
    r = subprocess.run([_python(tree), "-m", "tracer", "analyze", trace, "--json"], cwd=tree,
                       capture_output=True, text=True)
    try:
        procs = [q for q in json.loads(r.stdout)["processes"] if q["pid"] == pid]
    except (ValueError, KeyError):
        print(f"analyze of {trace} failed ({r.returncode}): "
              f"{(r.stderr.strip().splitlines() or [''])[-1]}", file=sys.stderr)
        return {"analyze_failed": 1.0}
    c = procs[0]["counters"] if procs else {}
    truth = {"syscalls": n + 2 * (n // 16), "bytes_written": n + 8 * (n // 16),
             "eventfd_writes": n // 16}
    return {f"err_{k}": (c.get(k, 0) - v) / v for k, v in truth.items()}


def run_mode(mode: str, exe: str, n: int, tty: bool, tmp: str,
             trees: Optional[Dict[str, str]] = None) -> Dict[str, float]:
    if mode.startswith("attach@"):
        return run_attach(exe, n, "libbpf", tty, tmp, tree=(trees or {})[mode])
    if mode in ("attach", "attach-bcc", "bystander"):
        loader = "bcc" if mode == "attach-bcc" else "libbpf"
        return run_attach(exe, n, loader, tty, tmp, bystander=mode == "bystander")
    return run_backend(exe, n, _backend_makers()[mode])


def mode_problem(mode: str) -> Optional[str]:
    if mode.startswith("attach@"):
        mode = "attach"
    if mode not in MODES:
        return f"unknown mode (one of {', '.join(MODES)})"
    if mode in ("attach", "bystander"):
        mode = "ebpf"
    elif mode == "attach-bcc":
        mode = "ebpf-bcc"
    return _backend_makers()[mode]().check()


# ------------------------------------------------------------------ report
def _med(rows: List[Dict[str, float]], key: str) -> Optional[float]:
    vals = [r[key] for r in rows if key in r and r[key] == r[key]]
    return statistics.median(vals) if vals else None


def _fmt(v: Optional[float], spec: str, width: int) -> str:
    return f"{'-' if v is None else format(v, spec):>{width}}"


def _pair_ratio(rs: List[Dict[str, float]], key: str) -> Optional[float]:
    """Median over the runs of (this run / the untraced run just before it)."""
    vals = [r[key] / r["base_" + key] for r in rs if r.get("base_" + key)]
    return statistics.median(vals) if vals else None


def report(rows: Dict[str, List[Dict[str, float]]], head: str) -> List[str]:
    floor = _pair_ratio(rows["floor"], "cpu") if rows.get("floor") else None
    lines = [head, f"{'':<16}{'wall s':>8}{'ratio':>8}{'cpu s':>8}{'ratio':>8}{'/floor':>8}"
                   f"{'attach s':>10}{'start s':>9}{'tool cpu':>10}{'tool ms/s':>10}"
                   f"{'wakes/s':>9}  counter errors"]
    for name, rs in rows.items():
        wall, cpu = _med(rs, "wall"), _med(rs, "cpu")
        wr = _pair_ratio(rs, "wall") if name != "untraced" else 1.0
        cr = _pair_ratio(rs, "cpu") if name != "untraced" else 1.0
        errs = ", ".join(f"{k[4:]} {_med(rs, k):+.2%}" for k in sorted(rs[0])
                         if k.startswith("err_"))
        lines.append(
            f"{name:<16}{_fmt(wall, '.3f', 8)}{_fmt(wr, '.2f', 7)}x"
            f"{_fmt(cpu, '.3f', 8)}{_fmt(cr, '.2f', 7)}x"
            f"{_fmt(cr / floor if floor and cr and name != 'untraced' else None, '.3f', 8)}"
            f"{_fmt(_med(rs, 'attach'), '.3f', 10)}{_fmt(_med(rs, 'start'), '.2f', 9)}"
            f"{_fmt(_med(rs, 'tool_cpu'), '.2f', 10)}{_fmt(_med(rs, 'tool_ms_s'), '.1f', 10)}"
            f"{_fmt(_med(rs, 'wakes_s'), '.0f', 9)}  {errs}")
    return lines


def _rev(tree: str) -> str:
    """A checkout's short commit (+ when it has changes), or its directory's name."""
    r = subprocess.run(["git", "-C", tree, "describe", "--always", "--dirty=+"],
                       capture_output=True, text=True)
    return r.stdout.strip() or os.path.basename(os.path.abspath(tree))


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", nargs="*", default=None, help=" ".join(MODES))
    ap.add_argument("--iterations", type=int, default=3_000_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-tty", action="store_true", help="attach modes: --json, no live view")
    ap.add_argument("--json", metavar="FILE", help="also write every run's numbers here")
    ap.add_argument("--exe", help="a sysloop binary built elsewhere (where gcc is missing)")
    ap.add_argument("--tree", action="append", default=[], metavar="DIR",
                    help="also attach@REV: another checkout's whole tool (repeatable)")
    a = ap.parse_args(argv)
    modes = list(a.modes or DEFAULT)
    trees = {f"attach@{_rev(t)}": os.path.abspath(t) for t in a.tree}
    modes += [m for m in trees if m not in modes]
    for mode in modes:
        why = mode_problem(mode)
        if why:
            print(f"{mode}: cannot run ({why})", file=sys.stderr)
            return 1
    rows: Dict[str, List[Dict[str, float]]] = {"untraced": []}
    with tempfile.TemporaryDirectory() as d:
        exe = a.exe or build(d)
        load0 = os.getloadavg()
        for _ in range(a.reps):
            for mode in modes:
                base = run_backend(exe, a.iterations, None)
                rows["untraced"].append(base)
                run = run_mode(mode, exe, a.iterations, not a.no_tty, d, trees)
                run.update(base_cpu=base["cpu"], base_wall=base["wall"])
                rows.setdefault(mode, []).append(run)
        load1 = os.getloadavg()
    head = (f"sysloop {a.iterations:,} iterations, median of {a.reps} runs alternating with "
            f"untraced ones; {os.cpu_count()} CPUs, load average {load0[0]:.2f} before, "
            f"{load1[0]:.2f} after; {time.strftime('%Y-%m-%d %H:%M')}; this tree "
            f"{_rev(ROOT)}")
    print("\n".join(report(rows, head)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"head": head, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
