"""A recording session: attach backends to process trees, stream events to a trace and to the
analyzer, detach on every exit path, and return the report.

Contract:
- ``resolve_targets`` and ``choose_backends(name)`` (which picks backends for
  auto|proc|strace|ebpf and says why in one line) raise errors.py's classes with one-line
  messages for bad input (missing pid, no permission, tool not installed, pid 1 or a kernel
  thread without --force).
- ``refuse_untraceable(roots, backends)``: ``attach`` of processes none of which this user may
  trace (linux/access.may_trace) with a ptrace-based backend is AccessDenied (exit 1, one line,
  as strace), not a recording of nothing (exit 7); some traceable root is enough to record.
- ``refuse_own_ancestors(pids)``: ``watch`` refuses a pid that is hangtrace's own ancestor
  (UsageError saying why): the watched tree leaves hangtrace's family out, so what would be
  watched is not that process at all (``watch $$`` from a shell). ``attach`` records an
  ancestor root's other descendants instead (below).
- Never recorded: hangtrace itself, its children (strace, py-spy) and its ancestors
  (``OwnFamily``); a root that is an ancestor is left out (said in the trace) and its other
  descendants are recorded.
- ``record(...)`` is the live mode: backends put events on a queue; this thread takes them off,
  writes each to the trace (flushed at least once a second) and feeds the same ``Analyzer`` that
  replays a trace file. It ends at ``duration``, on Ctrl-C, SIGTERM or SIGHUP (``StopFlag``:
  the handler sets a flag the loop reads), or when every target is gone; in every case the
  backends are stopped (strace detached, no child left), the trace is closed with its end
  record, and the report is built from what was recorded. The queue is bounded and so is its
  last drain (record/inbox.py: what was dropped or left is a ``Lost`` event); a signal that
  comes once the window has closed (during that drain or the end probes) cuts both short: the
  probes not yet run are skipped (said in the trace), the trace is saved. The start and end
  probes run under a time budget each (record/probe_run.py): those a big tree left no time
  for are named in the trace and the report. The output file is created before
  any backend attaches (an unwritable path fails without touching the target); trouble the
  backends met is saved in the trace as ``ObserveError`` events.
"""
from __future__ import annotations

import os
import queue
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence, Tuple

from .. import events as ev
from ..errors import AccessDenied, HangtraceError, TargetGone, ToolMissing, UsageError, shown
from ..linux import access, processes, procfs
from ..linux.netns import node_identity
from .backends.base import Backend, TargetSet
from .inbox import Inbox
from .probe_run import START_PROBES_S, end_budget_s, run_probes
from ..tracefile.format import TraceWriter, create_output, make_header

if TYPE_CHECKING:  # pragma: no cover
    from ..analysis.analyzer import Analyzer
    from ..report import Report


# Bad input or environment: errors.py's classes (the CLI maps them to exit statuses).
SessionError = HangtraceError


def resolve_targets(pids: List[int], name: Optional[str], *, force: bool = False) -> List[int]:
    """The root pids to record: each given pid (it must exist and be readable) and every
    process ``name`` matches (linux/processes.py). pid 1 and kernel threads are refused unless
    ``force`` (their trees are the whole machine): a given pid with a message, a match left
    out; hangtrace itself is refused always, and its ancestors are never matches (``--name``
    in a shell wrapper would match the wrapper)."""
    out: List[int] = []
    for pid in pids:
        why = processes.pid_access(pid)
        if why == access.GONE:
            raise TargetGone(f"no process with pid {pid}")
        if why is not None:
            raise AccessDenied(f"cannot read /proc/{pid}: permission denied")
        if pid == os.getpid():
            raise UsageError(f"pid {pid} is hangtrace itself")
        if not force and pid == 1:
            raise UsageError("pid 1 is init: its tree is every process on the machine; "
                             "give --force to record it anyway (hangtrace and its ancestors "
                             "are left out)")
        if not force and access.is_kernel_thread(pid):
            raise UsageError(f"pid {pid} is a kernel thread: it cannot be traced like a "
                             "process; give --force to try anyway")
        out.append(pid)
    if name:
        found, left_out = processes.select_by_name(name, force=force)
        if not found:
            raise TargetGone(f"no process matches --name {shown(name)}"
                             + (f" (left out: {'; '.join(left_out)})" if left_out else ""))
        out.extend(p for p in found if p not in out)
    if not out:
        raise UsageError("give at least one pid (-p PID) or --name PATTERN")
    return out


def refuse_own_ancestors(pids: Sequence[int]) -> None:
    """UsageError for the first of ``pids`` that is this process's ancestor (module doc)."""
    mine = set(access.ancestors(os.getpid()))
    for pid in pids:
        if pid in mine:
            raise UsageError(f"pid {pid} is hangtrace's own ancestor (a shell or program it "
                             "runs under): watch leaves hangtrace and its ancestors out of "
                             "the tree it watches (their activity is its own output), so "
                             "nothing of that process would be watched; give the pid of the "
                             "process to watch")


class OwnFamily:
    """What must never be recorded: hangtrace itself, its ancestors, and its own helper
    children (strace, py-spy). Tracing an ancestor (the shell, sshd, a terminal) would trace
    hangtrace's own output: each line it prints makes the traced ancestor run syscalls, which
    strace reports to hangtrace, which prints them... and ptrace-stopping the terminal freezes
    it. A descendant of hangtrace is recorded only under a root that is itself one (``hangtrace
    demo`` attaches to the scenario it started; a test records the programs it started)."""

    def __init__(self, roots: Sequence[int] = ()) -> None:
        self.me = os.getpid()
        self.ancestors = set(access.ancestors(self.me))
        self.own_roots = [r for r in roots if r != self.me and access.descends_from(r, self.me)]

    def __call__(self, pid: int) -> bool:
        if pid == self.me or pid in self.ancestors:
            return True
        if pid in self.own_roots:
            return False
        chain = access.ancestors(pid)
        return self.me in chain and not any(r in chain for r in self.own_roots)


def refuse_untraceable(roots: List[int], backends: List[Backend]) -> None:
    """AccessDenied, as strace's one line, when no root may be traced by a ptrace-based
    recording (strace, /proc sampling; eBPF needs no ptrace access); a tree of which some root
    may be traced is recorded, the others said not observed."""
    if any(b.name == "ebpf" for b in backends) or any(access.may_trace(p) for p in roots):
        return
    raise AccessDenied(f"cannot trace pid {roots[0]}: operation not permitted (another user's "
                       "process: run as root, or with CAP_SYS_PTRACE)")


def choose_backends(name: str, rate_hz: float = 10.0) -> Tuple[List[Backend], str]:
    """Backends for auto|proc|strace|ebpf, and one line saying which and why."""
    from .backends.proc_backend import ProcBackend
    proc = ProcBackend(rate_hz=rate_hz)
    if name == "proc":
        why = proc.check()
        if why:
            raise ToolMissing(f"proc backend unavailable: {why}")
        return _with_nvml([proc], "proc (/proc sampling only, never stops the target)")
    if name not in ("auto", "strace", "ebpf"):
        raise UsageError(f"unknown backend {shown(name)} (auto, proc, strace, ebpf)")
    from .backends.ebpf.backend import EbpfBackend
    ebpf_why = EbpfBackend().check() if name in ("auto", "ebpf") else None
    if name == "ebpf":
        if ebpf_why:
            raise ToolMissing(f"ebpf backend unavailable: {ebpf_why}")
        ebpf = EbpfBackend()
        return _with_nvml([ebpf, proc], f"ebpf+proc ({ebpf.describe()}; /proc for states)")
    from .backends.strace_backend import StraceBackend     # the strace importer: 60 ms
    strace = StraceBackend()
    strace_why = strace.check()
    if name == "strace":
        if strace_why:
            raise ToolMissing(f"strace backend unavailable: {strace_why}")
        return _with_nvml([strace], "strace (ptrace: the target runs slower while traced)")
    if ebpf_why is None:
        ebpf = EbpfBackend()
        chosen, why = [ebpf, proc], f"ebpf+proc ({ebpf.describe()}; /proc for states)"
    elif strace_why is None:
        chosen, why = [strace, proc], f"strace+proc (ebpf not usable: {ebpf_why})"
    else:
        chosen, why = [proc], f"proc (ebpf not usable: {ebpf_why}; strace not usable: {strace_why})"
    return _with_nvml(chosen, why)


def _with_nvml(backends: List[Backend], why: str) -> Tuple[List[Backend], str]:
    """Add GPU sampling through NVML where the machine has it (never a reason to fail), and
    with eBPF, uprobes on libcuda's CUDA graph calls (ebpf/cuda_uprobes.py)."""
    from .backends.ebpf.cuda_uprobes import with_cuda_uprobes
    from .backends.nvml_backend import NvmlBackend
    nvml = NvmlBackend()
    if nvml.check() is None:
        backends, why = backends + [nvml], why + "; nvml for GPU utilization"
    return with_cuda_uprobes(backends, why)


@dataclass
class Recorded:
    report: Report
    trace_path: str
    reason: str
    errors: List[str] = field(default_factory=list)


def _roles(infos: List[ev.ProcessInfo], roots: List[int]) -> dict:
    from ..analysis.job.roles import role_of
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
    tables = procfs.SocketTables()      # one read of each namespace's sockets, not two a pid
    for pid in pids:
        info = procfs.read_process_info(pid, tables=tables)
        if info is not None:
            out.append(info)
    return out


# What may run at the end of a recording, after the backends detached and while the target is
# still in the state it was recorded in: it reads what it needs (memory, stacks) and returns
# events for the trace. ``probe(pids, analyzer)``; a probe that fails is reported, not fatal.
EndProbe = Callable[[List[int], "Analyzer"], List[ev.Event]]


# What ends a recording early, keeping everything (the trace closed with its end record, the
# report built): Ctrl-C, kill, and a hang-up (a terminal closed, an ssh session dropped).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class StopFlag:
    """Set by STOP_SIGNALS while a recording runs; the recording loop reads it.

    The handler only assigns an attribute: no exception is raised at an arbitrary point (say,
    between writing an event and feeding it to the analyzer, or inside a queue's lock) and no
    lock is taken in the handler (Event.set() could wait on a lock its own thread holds), so
    stopping cannot deadlock. The loop notices within 0.1 s (its queue timeout)."""

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self.count = 0                  # signals so far (one after the window cuts its end)
        self._old: dict = {}

    def _handler(self, signum: int, frame: object) -> None:
        self.signum = signum
        self.count += 1

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return      # signals reach the main thread only; its owner stops us there
        for sig in STOP_SIGNALS:
            self._old[sig] = signal.signal(sig, self._handler)

    def restore(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        self._old.clear()


def plan_targets(roots: List[int], family: Callable[[int], bool]) -> Tuple[TargetSet, List[int]]:
    """(the targets, roots left out): the roots and their descendants found once
    (``TargetSet.discover``), less hangtrace's own family (``OwnFamily``). Raises UsageError
    when nothing is left."""
    targets = TargetSet(roots, exclude=family)
    targets.discover()
    left_out = [r for r in roots if targets.excluded(r)]
    if not targets.pids():
        raise UsageError(f"nothing to record: pid {', '.join(map(str, left_out))} is hangtrace "
                         "itself or its ancestor (tracing it would trace hangtrace's output) "
                         "and has no other descendants")
    return targets, left_out


def record(roots: List[int], backends: List[Backend], *, duration: float, output: str,
           on_tick: Optional[Callable[[float, Analyzer], None]] = None,
           end_probes: Sequence[EndProbe] = (),
           start_probes: Sequence[EndProbe] = (),
           on_attach: Optional[Callable[[], None]] = None) -> Recorded:
    """Record (module doc). ``on_tick(elapsed_s, analyzer)`` runs about 4 times a second in
    this thread (a live view asks the analyzer for a provisional report there); ``on_attach()``
    runs once the targets and the output are known good, just before the backends attach.
    ``start_probes`` run once before the backends start (their analyzer argument is None)."""
    targets, left_out = plan_targets(roots, OwnFamily(roots))
    all_pids = targets.pids()
    infos = targets.initial_infos()
    raw = create_output(output)       # an unwritable path fails here, before any attach
    if isinstance(raw.name, str):     # a made-up name (FreshName) may have become NAME-2
        output = raw.name
    names = [b.name for b in backends]
    q = Inbox()
    reason = "complete"
    stopped_by = ""                   # the signal that ended it early, if one did
    started: List[Backend] = []
    writer: Optional[TraceWriter] = None
    analyzer: Optional[Analyzer] = None
    pending: List[ev.Event] = [
        ev.ObserveError(ts=time.time(), source="session", what="excluded", pid=pid,
                        why="hangtrace's own ancestor: never traced (it would trace "
                        "hangtrace's own output); its other descendants are")
        for pid in left_out]
    start_errors, cut = run_probes(start_probes, all_pids, None, pending.append,
                                   budget_s=START_PROBES_S, phase="start")
    left = 0                          # events still queued after the last drain

    def take(e: ev.Event) -> None:
        if writer is None or analyzer is None:
            pending.append(e)
            return
        writer.write(e)
        analyzer.feed(e)

    if on_attach is not None:
        on_attach()
    stop = StopFlag()
    stop.install()
    errors: List[Tuple[str, str]] = []
    cpu = [_own_cpu()]
    try:
        for b in backends:
            started.append(b)           # before start(): a half-started backend is stopped too
            b.start(targets, q.put)
        # The window opens once every backend is in place (BCC compiles for about a second).
        start = time.time()
        cpu.append(_own_cpu())
        header = make_header(backends=names, source="attach", targets=roots, start=start,
                             processes=infos, options={"duration": duration},
                             roles=_roles(infos, roots), node=node_identity())
        writer = TraceWriter(output, header, raw=raw)
        # The analysis rules load after the trace's first byte (0.2 s of imports); the
        # backends' events wait in the inbox meanwhile.
        from ..analysis.analyzer import Analyzer
        analyzer = Analyzer(start=start, backends=names, processes=infos, roots=roots)
        for e in pending:
            take(e)
        pending.clear()
        deadline = time.monotonic() + duration
        next_alive_check = 0.0
        while stop.signum is None:
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
        if stop.signum is not None:
            reason = "interrupted"
            stopped_by = signal.Signals(stop.signum).name
    except BaseException:
        reason = "error"
        raise
    finally:
        try:
            closed = stop.count           # signals until the window closed
            errors = start_errors + _stop_all(started)
            left = q.drain(take, interrupted=lambda: stop.count > closed)
            ending = time.monotonic()     # the end's budget (probe_run.end_budget_s) from here
            # the live ones only: after a fork storm, thousands of the pids seen have exited
            alive = [p for p in targets.pids() if procfs.pid_exists(p)]
            for info in _final_infos(alive):
                take(info)
            if analyzer is not None:
                errors.extend(run_probes(end_probes, alive, analyzer, take,
                                         budget_s=end_budget_s(duration), began=ending,
                                         cut_before=set(cut),
                                         interrupted=lambda: stop.count > closed)[0])
        finally:
            end = time.time()
            for e in q.lost(end, left):
                take(e)
            if writer is None:      # a backend failed to start: still leave a readable trace
                start = end
                writer = TraceWriter(output, make_header(
                    backends=names, source="attach", targets=roots, start=start,
                    processes=infos, options={"duration": duration},
                    node=node_identity()), raw=raw)
                from ..analysis.analyzer import Analyzer
                analyzer = Analyzer(start=start, backends=names, processes=infos, roots=roots)
                for e in pending:
                    take(e)
            # Trouble is saved in the trace (analyze of it says the same) and reported once.
            for source, msg in errors:
                take(ev.ObserveError(ts=end, source=source, what="backend", why=msg))
            writer.close(reason, end_ts=end)
            stop.restore()
    notes = [f"recording ended early: {reason}" + (f" ({stopped_by})" if stopped_by else "")
             ] if reason != "complete" else []
    notes.append(_cpu_note(cpu + [_own_cpu()], end - start))
    notes.extend(n for b in backends for n in getattr(b, "notes", ()))
    assert analyzer is not None
    report = analyzer.report(end=end, trace_path=output, extra_notes=notes)
    return Recorded(report=report, trace_path=output, reason=reason,
                    errors=[f"{source}: {msg}" for source, msg in errors])


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


def _stop_all(backends: List[Backend]) -> List[Tuple[str, str]]:
    """Stop every backend (latest first), whatever happens; (backend, message) of trouble."""
    errors: List[Tuple[str, str]] = []
    for b in reversed(backends):
        try:
            b.stop()
        except Exception as exc:  # stopping must go on for the others
            errors.append((b.name, f"stop failed: {exc}"))
        errors.extend((b.name, e) for e in b.errors)
    return errors
