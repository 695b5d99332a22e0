"""A recording session: attach backends to process trees, stream events to a trace and to the
analyzer, detach on every exit path, and return the report.

Contract:
- ``choose_backends(name)`` picks backends for auto|proc|strace and says why in one line;
  ``SessionError`` carries one-line messages for bad input (missing pid, no permission, tool not
  installed).
- ``record(...)`` is the live mode: backends put events on a queue; this thread takes them off,
  writes each to the trace (flushed at least once a second) and feeds the same ``Analyzer`` that
  replays a trace file. It ends at ``duration``, on Ctrl-C or SIGTERM, or when every target is
  gone; in every case the backends are stopped (strace detached, no child left), the trace is
  closed with its end record, and the report is built from what was recorded.
"""
from __future__ import annotations

import os
import queue
import signal
import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Tuple

from .. import events as ev
from ..linux import procfs
from ..analysis.analyzer import Analyzer
from .backends.base import Backend, TargetSet
from ..report import Report
from ..tracefile.format import TraceWriter, make_header


class SessionError(Exception):
    """Bad input or environment; the message is one line for the user."""


def resolve_targets(pids: List[int], name: Optional[str]) -> List[int]:
    out: List[int] = []
    for pid in pids:
        if not procfs.pid_exists(pid):
            raise SessionError(f"no process with pid {pid}")
        if procfs.read_stat(pid) is None:
            raise SessionError(f"cannot read /proc/{pid}: permission denied")
        out.append(pid)
    if name:
        found = procfs.find_by_name(name)
        if not found:
            raise SessionError(f"no process matches --name {name!r}")
        out.extend(p for p in found if p not in out)
    if not out:
        raise SessionError("give at least one pid or --name PATTERN")
    return out


def choose_backends(name: str, rate_hz: float = 10.0) -> Tuple[List[Backend], str]:
    """Backends for auto|proc|strace|ebpf, and one line saying which and why."""
    from .backends.proc_backend import ProcBackend
    proc = ProcBackend(rate_hz=rate_hz)
    if name == "proc":
        why = proc.check()
        if why:
            raise SessionError(f"proc backend unavailable: {why}")
        return [proc], "proc (/proc sampling only, never stops the target)"
    if name not in ("auto", "strace", "ebpf"):
        raise SessionError(f"unknown backend {name!r} (auto, proc, strace, ebpf)")
    from .backends.ebpf_backend import EbpfBackend
    from .backends.strace_backend import StraceBackend
    ebpf_why = EbpfBackend().check() if name in ("auto", "ebpf") else None
    if name == "ebpf":
        if ebpf_why:
            raise SessionError(f"ebpf backend unavailable: {ebpf_why}")
        return _with_nvml([EbpfBackend(), proc], "ebpf+proc (kernel tracepoints; /proc for states)")
    strace = StraceBackend()
    strace_why = strace.check()
    if name == "strace":
        if strace_why:
            raise SessionError(f"strace backend unavailable: {strace_why}")
        return _with_nvml([strace], "strace (ptrace: the target runs slower while traced)")
    if ebpf_why is None:
        chosen, why = [EbpfBackend(), proc], "ebpf+proc (BPF tracepoints load here; /proc for states)"
    elif strace_why is None:
        chosen, why = [strace, proc], f"strace+proc (ebpf not usable: {ebpf_why})"
    else:
        chosen, why = [proc], f"proc (ebpf not usable: {ebpf_why}; strace not usable: {strace_why})"
    return _with_nvml(chosen, why)


def _with_nvml(backends: List[Backend], why: str) -> Tuple[List[Backend], str]:
    """Add GPU sampling through NVML where the machine has it (never a reason to fail)."""
    from .backends.nvml_backend import NvmlBackend
    nvml = NvmlBackend()
    if nvml.check() is None:
        return backends + [nvml], why + "; nvml for GPU utilization"
    return backends, why


@dataclass
class Recorded:
    report: Report
    trace_path: str
    reason: str
    errors: List[str] = field(default_factory=list)


class _Stop(Exception):
    pass


def _roles(infos: List[ev.ProcessInfo], roots: List[int]) -> dict:
    from ..analysis.roles import role_of
    parents = {i.ppid for i in infos}
    return {str(i.pid): role_of(i.cmdline, i.comm, has_children=i.pid in parents,
                                is_root=i.pid in roots, environ_rank=i.environ_rank).label
            for i in infos}


def _running(pid: int) -> bool:
    """Alive and not a zombie (a zombie exists in /proc until its parent reaps it)."""
    st = procfs.read_stat(pid)
    return st is not None and st.state not in ("Z", "X")


def _final_infos(pids: List[int]) -> List[ev.ProcessInfo]:
    out = []
    for pid in pids:
        info = procfs.read_process_info(pid)
        if info is not None:
            out.append(info)
    return out


# What may run at the end of a recording, after the backends detached and while the target is
# still in the state it was recorded in: it reads what it needs (memory, stacks) and returns
# events for the trace. ``probe(pids, analyzer)``; a probe that fails is reported, not fatal.
EndProbe = Callable[[List[int], Analyzer], List[ev.Event]]


def record(roots: List[int], backends: List[Backend], *, duration: float, output: str,
           on_tick: Optional[Callable[[float, Analyzer], None]] = None,
           end_probes: Sequence[EndProbe] = ()) -> Recorded:
    """Record (module doc). ``on_tick(elapsed_s, analyzer)`` runs about 4 times a second in
    this thread (a live view asks the analyzer for a provisional report there)."""
    from .backends.proc_backend import initial_process_infos
    all_pids = sorted(set(roots) | set(procfs.descendants(roots)))
    targets = TargetSet(roots)
    for pid in all_pids:
        targets.add(pid)
    infos = initial_process_infos(all_pids)
    names = [b.name for b in backends]
    q: "queue.Queue[ev.Event]" = queue.Queue()
    reason = "complete"
    started: List[Backend] = []
    writer: Optional[TraceWriter] = None
    analyzer: Optional[Analyzer] = None
    pending: List[ev.Event] = []

    def take(e: ev.Event) -> None:
        if writer is None or analyzer is None:
            pending.append(e)
            return
        writer.write(e)
        analyzer.feed(e)

    def on_term(signum: int, frame: object) -> None:
        raise _Stop()

    old_term = signal.signal(signal.SIGTERM, on_term)
    cpu = [_own_cpu()]
    try:
        for b in backends:
            b.start(targets, q.put)
            started.append(b)
        # The window opens once every backend is in place (BCC compiles for about a second).
        start = time.time()
        cpu.append(_own_cpu())
        header = make_header(backends=names, source="attach", targets=roots, start=start,
                             processes=infos, options={"duration": duration},
                             roles=_roles(infos, roots))
        writer = TraceWriter(output, header)
        analyzer = Analyzer(start=start, backends=names, processes=infos, roots=roots)
        for e in pending:
            take(e)
        pending.clear()
        deadline = time.monotonic() + duration
        next_alive_check = 0.0
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            try:
                take(q.get(timeout=min(0.1, max(0.0, deadline - now))))
            except queue.Empty:
                pass
            if now >= next_alive_check:
                next_alive_check = now + 0.25
                if on_tick is not None and analyzer is not None:
                    on_tick(now - (deadline - duration), analyzer)
                if not any(_running(p) for p in targets.pids()):
                    reason = "targets-exited"
                    break
    except (KeyboardInterrupt, _Stop):
        reason = "interrupted"
    except BaseException:
        reason = "error"
        raise
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)   # a second SIGTERM must not cut cleanup
        try:
            errors = _stop_all(started)
            while True:
                try:
                    take(q.get_nowait())
                except queue.Empty:
                    break
            for info in _final_infos(targets.pids()):
                take(info)
            errors.extend(_run_probes(end_probes, targets.pids(), analyzer, take))
        finally:
            end = time.time()
            if writer is None:      # a backend failed to start: still leave a readable trace
                start = end
                writer = TraceWriter(output, make_header(
                    backends=names, source="attach", targets=roots, start=start,
                    processes=infos, options={"duration": duration}))
                analyzer = Analyzer(start=start, backends=names, processes=infos, roots=roots)
                for e in pending:
                    take(e)
            writer.close(reason, end_ts=end)
            signal.signal(signal.SIGTERM, old_term if old_term is not None else signal.SIG_DFL)
    notes = [f"recording ended early: {reason}"] if reason != "complete" else []
    notes.append(_cpu_note(cpu + [_own_cpu()], end - start))
    assert analyzer is not None
    report = analyzer.report(end=end, trace_path=output, extra_notes=notes + errors)
    return Recorded(report=report, trace_path=output, reason=reason, errors=errors)


def _own_cpu() -> float:
    """CPU seconds (user+sys) of this process, all threads, and of its reaped children
    (strace)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _cpu_note(cpu: List[float], window: float) -> str:
    """hangtrace's own CPU use; BPF programs run in the traced threads and are not in it."""
    if len(cpu) < 3:
        return f"hangtrace's own CPU: {cpu[-1] - cpu[0]:.2f} s (the recording did not start)"
    during = cpu[2] - cpu[1]
    pct = 100.0 * during / window if window > 0 else 0.0
    return (f"hangtrace's own CPU: {during:.2f} s while recording {window:.1f} s "
            f"({pct:.0f}% of one CPU), {cpu[1] - cpu[0]:.2f} s to attach")


def _run_probes(probes: Sequence[EndProbe], pids: List[int], analyzer: Optional[Analyzer],
                take: Callable[[ev.Event], None]) -> List[str]:
    errors: List[str] = []
    if analyzer is None:
        return errors
    for probe in probes:
        try:
            for e in probe(pids, analyzer):
                take(e)
        except Exception as exc:  # a probe is extra evidence; never lose the recording for it
            errors.append(f"{getattr(probe, '__name__', 'probe')}: {exc}")
    return errors


def _stop_all(backends: List[Backend]) -> List[str]:
    errors: List[str] = []
    for b in reversed(backends):
        try:
            b.stop()
        except Exception as exc:  # stopping must go on for the others
            errors.append(f"{b.name}: stop failed: {exc}")
        errors.extend(f"{b.name}: {e}" for e in b.errors)
    return errors
