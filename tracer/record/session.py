"""A recording session: attach backends to process trees, stream events to a trace and to the
analyzer, detach on every exit path, and return the report.

Contract:
- ``resolve_targets`` and ``choose_backends(name)`` (backend_choice.py) raise errors.py's
  classes with one-line messages for bad input; ``refuse_untraceable(roots, backends)``
  (``attach``) and ``refuse_own_ancestors(pids)`` (``watch``) refuse what would record nothing.
- Never recorded: hangtrace itself, its children (strace, py-spy) and its ancestors
  (``OwnFamily``); a root that is an ancestor is left out (said in the trace) and its other
  descendants are recorded.
- ``record(...)`` is the live mode, a ``Session`` in three steps: ``attach``, ``loop`` and
  ``close`` on every exit path; what each does and what the report is built from: ``record``.
"""
from __future__ import annotations

import contextlib
import os
import queue
import signal
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence, Tuple

from .. import events as ev
from ..errors import AccessDenied, HangtraceError, TargetGone, UsageError, shown
from ..linux import access, processes, procfs
from ..linux.cancel import Cancelled
from ..linux.netns import node_identity
from .backends.base import Backend, TargetSet
from .backend_choice import choose_backends
from .ending import Ending, lead_for
from .inbox import Inbox
from .own_cpu import cpu_note, own_cpu
from .own_family import OwnFamily, refuse_own_ancestors  # noqa: F401 (``watch`` imports it here)
from .priority import EndPriority
from .probe_run import START_PROBES_S, run_probes
from .stopflag import StopFlag
from ..tracefile.format import TraceWriter, create_output, make_header
from ..tracefile.unreadable import drop_unreadable

if TYPE_CHECKING:  # pragma: no cover
    from ..analysis.analyzer import Analyzer
    from ..report import Report


# Bad input or environment: errors.py's classes (the CLI maps them to exit statuses).
SessionError = HangtraceError


def resolve_targets(pids: List[int], name: Optional[str], *, force: bool = False,
                    cgroup: Optional[str] = None, container: Optional[str] = None) -> List[int]:
    """The root pids to record: each given pid (it must exist and be readable), every
    process ``name`` matches (linux/processes.py) and every process of ``cgroup`` (and the
    cgroups below it) or of the one ``container`` whose id starts so (linux/containers.py).
    pid 1 and kernel threads are refused unless ``force`` (their trees are the whole machine): a given pid with a message, a match left
    out; hangtrace itself is refused always, and its ancestors are never matches (``--name``
    in a shell wrapper would match the wrapper). Bad input raises errors.py's classes, with
    one-line messages (a missing pid, no permission, pid 1 or a kernel thread without
    --force)."""
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
    if cgroup or container:
        from ..linux.containers import select_targets
        out.extend(p for p in select_targets(cgroup, container, force=force) if p not in out)
    if not out:
        raise UsageError("give at least one pid (-p PID), --name PATTERN, --cgroup PATH or "
                         "--container ID")
    return out


def refuse_untraceable(roots: List[int], backends: List[Backend]) -> None:
    """AccessDenied, as strace's one line, when no root may be traced (linux/access.may_trace)
    by a ptrace-based recording (strace, /proc sampling; eBPF needs no ptrace access): ``attach``
    of processes none of which this user may trace exits 1, one line as strace, not a recording
    of nothing (exit 7). Some traceable root is enough: a tree of which some root may be traced
    is recorded, the others said not observed."""
    if any(b.name == "ebpf" for b in backends) or any(access.may_trace(p) for p in roots):
        return
    raise AccessDenied(f"cannot trace pid {roots[0]}: operation not permitted (another user's "
                       "process: run as root, or with CAP_SYS_PTRACE)")


@dataclass
class Recorded:
    report: Report
    trace_path: str
    reason: str
    errors: List[str] = field(default_factory=list)


def _running(pid: int) -> bool:
    """Alive and not a zombie (a zombie exists in /proc until its parent reaps it)."""
    st = procfs.read_stat(pid)
    return st is not None and st.state not in ("Z", "X")


# What may run at the end of a recording, after the backends detached and while the target is
# still in the state it was recorded in: it reads what it needs (memory, stacks) and returns
# events for the trace. ``probe(pids, analyzer)``; a probe that fails is reported, not fatal.
EndProbe = Callable[[List[int], "Analyzer"], List[ev.Event]]


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
           on_attach: Optional[Callable[[], None]] = None,
           keep_priority: bool = False) -> Recorded:
    """The live mode: a ``Session`` set up, attached, looped and closed, whatever ends it.
    ``attach``: the output is created before it, so an unwritable path fails without touching the
    target. ``loop``: events off the bounded inbox (record/inbox.py), written to the trace (flushed
    at least once a second) and fed to the same ``Analyzer`` that replays a trace file, until
    ``duration``, Ctrl-C, SIGTERM or SIGHUP (``StopFlag``), or every target gone. ``close``, on
    every exit path: the backends stopped (strace detached, no child left), the trace closed with
    its end record, trouble the backends met saved in it as ``ObserveError`` events. The start and
    end probes run under a time budget each (record/probe_run.py); the report is built from what
    was recorded. A trace that could not be written (a full disk) is removed where it does not
    read as one (tracefile/unreadable.py), and the OSError goes on to the caller.

    ``on_tick(elapsed_s, analyzer)`` runs about 4 times a second in this thread (a live view asks
    the analyzer for a provisional report there); ``on_attach()`` runs once the targets and the
    output are known good, just before the backends attach. ``start_probes`` run once before the
    backends start (their analyzer argument is None).

    The end's part runs at a higher CPU priority (``Session.end_priority``), put back once the
    report is built, or never with ``keep_priority`` (a command that prints the report and
    exits: its printing is the end's too)."""
    session = Session(roots, backends, duration=duration, output=output,
                      start_probes=start_probes, end_probes=end_probes)
    if on_attach is not None:
        on_attach()
    session.stop.install()
    try:
        try:
            session.attach()
            session.loop(on_tick)
        except Cancelled:       # a signal inside attach's reads (a library's symbols)
            session.interrupted()
        except BaseException:
            session.reason = "error"
            raise
        finally:
            session.close()
    except OSError:             # the trace could not be written (a full disk)
        session.priority.restore()
        with contextlib.suppress(OSError):
            session.raw.close()     # what is still buffered is lost
        drop_unreadable(session.output)
        raise
    except BaseException:
        session.priority.restore()
        raise
    try:
        return session.recorded()
    finally:
        if not keep_priority:
            session.priority.restore()


class Session:
    """One recording, in the steps ``record`` takes: set up (the constructor), ``attach``,
    ``loop``, ``close``, then ``recorded``. Events that come before the trace and the analyzer
    exist wait in ``pending``; ``take`` writes each event to the trace and feeds it to the
    analyzer (or keeps it there). ``close`` stops every backend ``attach`` started, half-started
    ones too, and always leaves a readable trace with its end record."""

    def __init__(self, roots: List[int], backends: List[Backend], *, duration: float,
                 output: str, start_probes: Sequence[EndProbe] = (),
                 end_probes: Sequence[EndProbe] = ()) -> None:
        """Everything before the first attach: the targets found once, the output created (an
        unwritable path fails here, before any backend touches a target), the roots left out
        said, the start probes run."""
        self.roots, self.backends, self.duration = roots, backends, duration
        began = time.monotonic()
        self.targets, left_out = plan_targets(roots, OwnFamily(roots))
        self.infos = self.targets.initial_infos()
        self.raw = create_output(output)
        # a made-up name (FreshName) may have become NAME-2
        self.output = self.raw.name if isinstance(self.raw.name, str) else output
        self.names = [b.name for b in backends]
        self.inbox = Inbox()
        self.stop = StopFlag()
        self.reason = "complete"
        self.stopped_by = ""              # the signal that ended it early, if one did
        self.started: List[Backend] = []
        self.writer: Optional[TraceWriter] = None
        self.analyzer: Optional[Analyzer] = None
        self.pending: List[ev.Event] = [
            ev.ObserveError(ts=time.time(), source="session", what="excluded", pid=pid,
                            why="hangtrace's own ancestor: never traced (it would trace "
                            "hangtrace's own output); its other descendants are")
            for pid in left_out]
        pids = self.targets.pids()
        self.start_errors, cut = run_probes(start_probes, pids, None, self.pending.append,
                                            budget_s=START_PROBES_S, phase="start")
        cost = time.monotonic() - began
        self.ending = Ending(end_probes, roots, counts=self.targets.run_counts, cut_before=cut,
                             lead_s=lead_for(len(pids), cost, duration), start_cost_s=cost,
                             ptraced="strace" in self.names)
        self.errors: List[Tuple[str, str]] = []
        self.errors_early: List[Tuple[str, str]] = []     # of the end's part in the window
        self.cpu: List[float] = []
        self.start = self.end = 0.0
        # time.time() when the window closed (close: its deadline, or earlier when it ended
        # early), before the backends' stop and the end probes: the window's end in the trace's
        # end record and the report (None: no window was opened)
        self.window_end: Optional[float] = None
        self.began = 0.0                  # time.monotonic() at the window's start
        self.priority = EndPriority()     # the end's (priority.py): end_priority

    def end_priority(self) -> None:
        """The end's part begins (the window's last part, the early part or the stop): this
        process's threads, and the helpers they start, to ``end_nice()`` (priority.py), once.
        On a busy machine the end waits for a CPU far longer than it computes; the target's
        threads are never touched. ``priority.restore()`` puts them back."""
        self.priority.raise_once([p for b in self.started for p in b.helpers()])

    def take(self, e: ev.Event) -> None:
        """One event into the trace and the analyzer, or into ``pending`` before they are."""
        if self.writer is None or self.analyzer is None:
            self.pending.append(e)
            return
        self.writer.write(e)
        self.analyzer.feed(e)

    def attach(self) -> None:
        """Start every backend (each is in ``started`` before its start, so a half-started one
        is stopped too); the window opens once all are in place (BCC compiles for about a
        second), and the trace and the analyzer begin with it. The end's thread for the
        window's last part starts then (ending.py's ``start_window``: stacks, stack samples,
        memory), and the backends are told when the window ends (``window_ends_at``)."""
        self.cpu.append(own_cpu())
        self._drop_reused()
        for b in self.backends:
            self.started.append(b)
            b.start(self.targets, self.inbox.put)
        self.start, self.began = time.time(), time.monotonic()
        # stacks, memory: read in the window's last part, beside this thread (ending.py);
        # started before the trace opens (its analysis's imports: seconds on a busy machine)
        self.stop.window_opened()
        self.ending.start_window(self._alive, self.began + self.duration,
                                 interrupted=self.stop.cut,
                                 at_begin=self.end_priority)
        for b in self.started:
            b.window_ends_at(self.began + self.duration)
        self.cpu.append(own_cpu())
        self._open_trace(self.start)

    def _drop_reused(self) -> None:
        """Leave out every pid another process took since discovery (record/targets.py): said in
        the trace; when none of the targets is left, TargetGone with the first line."""
        dropped = dict(self.targets.drop_reused())
        self.infos = [i for i in self.infos if i.pid not in dropped]  # it exited: not in the tree
        self.pending += [ev.ObserveError(ts=time.time(), source="session", what="reused",
                                         pid=pid, why=line) for pid, line in dropped.items()]
        if dropped and not self.targets.pids():
            raise TargetGone(next(iter(dropped.values())))

    def _open_trace(self, start: float) -> None:
        """The trace's header and writer, then the analyzer, from ``start``; what is pending
        goes to both. The analysis rules load after the trace's first byte (0.2 s of
        imports); the backends' events wait in the inbox meanwhile."""
        from ..analysis.job.roles import role_labels      # the analysis's rule, for labels
        roles = {str(pid): label for pid, label in role_labels(self.infos, self.roots).items()}
        header = make_header(backends=self.names, source="attach", targets=self.roots,
                             start=start, processes=self.infos,
                             options={"duration": self.duration}, roles=roles,
                             node=node_identity())
        self.writer = TraceWriter(self.output, header, raw=self.raw)
        from ..analysis.analyzer import Analyzer
        self.analyzer = Analyzer(start=start, backends=self.names, processes=self.infos,
                                 roots=self.roots)
        pending, self.pending = self.pending, []
        for e in pending:
            self.take(e)

    def loop(self, on_tick: Optional[Callable[[float, Analyzer], None]] = None) -> None:
        """Take events off the inbox until ``duration`` has passed, a stop signal came
        (``StopFlag``, looked at every 0.1 s at most) or no target runs any more (looked at,
        with ``on_tick``, every 0.25 s); ``reason`` says which. The window counts from its
        start (``attach``); a large tree's end begins ``Ending.lead_s`` before its end."""
        deadline = self.began + self.duration
        early = deadline - self.ending.lead_s if self.ending.lead_s > 0 else None
        next_alive_check = 0.0
        while self.stop.signum is None:
            now = time.monotonic()
            if now >= deadline:
                break
            if early is not None and now >= early:
                early = self._end_step(deadline)
                continue
            try:
                until = deadline if early is None else min(deadline, early)
                self.take(self.inbox.get(timeout=min(0.1, max(0.0, until - now))))
            except queue.Empty:
                pass
            if now >= next_alive_check:
                next_alive_check = now + 0.25
                if on_tick is not None and self.analyzer is not None:
                    on_tick(now - (deadline - self.duration), self.analyzer)
                if not any(_running(p) for p in self.targets.pids()):
                    self.reason = "targets-exited"
                    break
        self.ending.window_over()
        if self.stop.signum is not None:
            self.interrupted()

    def interrupted(self) -> None:
        """A stop signal ended the recording: ``reason`` and ``stopped_by`` say so."""
        self.reason = "interrupted"
        if self.stop.signum is not None:
            self.stopped_by = signal.Signals(self.stop.signum).name

    def _end_step(self, deadline: float) -> Optional[float]:
        """One of the end's parts that run in the window (record/ending.py), after what is
        queued: the survey, which says when the early part runs (returned), then that. A
        first signal ends the window and leaves the end ``STOP_GRACE_S``; a second cuts it."""
        self.end_priority()
        self.inbox.drain(self.take, interrupted=self.stop.cut)
        assert self.analyzer is not None
        args = (self._alive(), self.analyzer, self.take, self.stop.cut)
        if self.ending.still is None:
            need, trouble = self.ending.survey(*args)
            self.errors_early.extend(trouble)
            return deadline - need
        self.errors_early.extend(self.ending.early(*args))
        return None

    def _alive(self) -> List[int]:
        """The live targets (after a fork storm, thousands of the pids seen have exited), never
        a pid another process took since (the end probes read its memory and stacks)."""
        return self.targets.alive()

    def close(self) -> None:
        """Stop every backend started, drain the inbox (bounded; a signal cuts it and the end
        probes short, inside their loops: ``StopFlag.cut``), record the live processes' last
        state, run the end probes (what of them did not run in the window: ``Ending.late``);
        then, whatever happened, the losses, the trouble met and the end record are written (a
        trace begun here when ``attach`` never got to it) and the signal handlers restored."""
        left = 0                          # events still queued after the last drain
        # The window as asked: an end step in the loop that ran past the deadline, the
        # backends' stop and the end probes are the end's time, not observation of the targets
        self.window_end = min(time.time(), self.start + self.duration) if self.start else None
        try:
            self.stop.window_closed()     # a signal from now on cuts the end at once
            self.end_priority()
            self.ending.window_over()     # (an error ended it: the window thread begins now)
            self.errors = self.start_errors + _stop_all(self.started)
            left = self.inbox.drain(self.take, interrupted=self.stop.cut)
            self.errors.extend(self.errors_early)
            if self.analyzer is not None:
                try:
                    self.errors.extend(self.ending.late(
                        self._alive(), self.analyzer, self.take, interrupted=self.stop.cut))
                except Cancelled as exc:  # the last look cut by a signal (linux/cancel.py)
                    self.errors.append(("session", f"the end's last look {exc}"))
        finally:
            self.end = end = time.time()
            for e in self.inbox.lost(end, left):
                self.take(e)
            if self.writer is None:       # a backend failed to start: still a readable trace
                self.start, self.window_end = end, None
                self._open_trace(end)
            assert self.writer is not None
            # Trouble is saved in the trace (analyze of it says the same) and reported once.
            for source, msg in self.errors:
                self.take(ev.ObserveError(ts=end, source=source, what="backend", why=msg))
            self.writer.close(self.reason, end_ts=end, window_end=self.window_end)
            self.stop.restore()

    def recorded(self) -> Recorded:
        """The report of what was recorded, with the notes on how the recording went."""
        from ..load.trace import ended_early_note
        notes = ended_early_note(self.reason, self.stopped_by)
        notes.append(cpu_note(self.cpu + [own_cpu()], self.end - self.start))
        notes.extend(n for b in self.backends for n in getattr(b, "notes", ()))
        notes.extend(self.ending.notes)
        assert self.analyzer is not None
        report = self.analyzer.report(end=self.window_end or self.end, trace_path=self.output,
                                      extra_notes=notes)
        return Recorded(report=report, trace_path=self.output, reason=self.reason,
                        errors=[f"{source}: {msg}" for source, msg in self.errors])


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
