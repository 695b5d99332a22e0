"""Streaming accumulation of events into per-thread and per-process statistics.

Contract: ``Accumulator.feed(event)`` takes events in time order, one at a time, from a trace
being read or from a live queue (the same code path for both); memory is bounded by the number of
threads, fds and distinct syscall names, never by the number of events. ``finish(end_ts)`` closes
the recording window and returns a ``Recording``: everything the rules need, nothing classified.
``feed_many`` and ``feed_batches`` feed many events at once (a trace's replay), the latter
through the compiled helpers where given (calls.py says what C does).
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ... import events as ev
from ...events.counts import ThreadCounts
from ...events.states import ThreadStopped
from ...events.evidence import LogLines, MemoryProgress
from ...events.stacks import StackSamples
from ...linux.fdtarget import FdTarget
from .io_class import MAX_SOCKETS, internal_targets, judge_output
from .calls import MAX_FUTEX_ADDRS, CallFeed
from .kernel_counts import KernelCounts
from .program_clock import ProgramClock
from .stats import ProcessStats, Recording, TcpTrack, ThreadStats, strip_sp_pc

__all__ = ["Accumulator", "ThreadStats", "ProcessStats", "Recording"]

_SYSCALLS = frozenset({ev.Syscall, ev.FutexCall, ev.PollCall, ev.IoctlCall, ev.WriteCall,
                       ev.ReadCall, ev.WaitChild})     # what the dispatch sends to _syscall


class Accumulator(CallFeed):
    """Feeds events into stats (module doc)."""

    def __init__(self, *, start: Optional[float] = None, backends: Optional[List[str]] = None,
                 capabilities: Optional[Dict[str, bool]] = None,
                 processes: Optional[List[ev.ProcessInfo]] = None,
                 roots: Optional[List[int]] = None) -> None:
        self.start = start
        self.last_ts: Optional[float] = start
        self.backends = list(backends or [])
        self.capabilities = dict(capabilities or {})
        self.threads: Dict[Tuple[int, int], ThreadStats] = {}
        self._threads_by_pid: Dict[int, List[ThreadStats]] = {}    # pid -> its threads, as seen
        self.processes: Dict[int, ProcessStats] = {}
        self.lost = 0
        self.lost_reasons: List[str] = []
        self.futex_wakers: Dict[int, Tuple[int, int]] = {}
        self.lock_holders: Dict[str, Tuple[int, int]] = {}   # locked file -> (pid, tid)
        self._exits = 0                       # processes seen exit, in order (logs lack times)
        self.roots = list(roots or [])
        self._internal: Dict[int, set] = {}   # pid -> targets of fds internal to the process
        self._inodes: Dict[int, set] = {}     # pid -> inodes of its fds (cache)
        self._traffic_fds: Dict[int, set] = {}   # pid -> fds with traffic followed
        self._clock = ProgramClock() if self.capabilities.get("timestamps") is False else None
        self.kernel = KernelCounts()          # eBPF ThreadCounts, merged (accumulate/kernel_counts.py)
        syscall = self._syscall
        self._dispatch = {
            ev.Syscall: syscall, ev.FutexCall: syscall, ev.PollCall: syscall,
            ev.IoctlCall: syscall, ev.WriteCall: syscall, ev.ReadCall: syscall,
            ev.WaitChild: syscall, ev.ThreadSample: self._sample, ev.ProcessIO: self._on_io,
            ev.ProcessInfo: self._on_info, ev.ProcessExit: self._on_exit,
            ev.ThreadExit: self._on_thread_exit, ev.ThreadStart: self._on_thread_start,
            ev.ProcessExec: self._on_exec, ev.SignalDelivered: self._on_signal,
            ev.Lost: self._on_lost, ev.ThreadCpu: self._on_cpu,
            ev.SocketCounters: self._on_socket_counters,
            ev.ObserveError: self._on_observe_error,
            ThreadStopped: self._on_stopped,
            ev.ServedConnections: self._on_served,
            LogLines: lambda e: self._process(e.pid).log_lines.__setitem__(e.fd, e),
            MemoryProgress: lambda e: self._process(e.pid).memory.setdefault(e.phase, e),
            StackSamples: lambda e: self._process(e.pid).stack_samples.__setitem__(e.tid, e),
            ThreadCounts: lambda e: self.kernel.feed(e, self._thread(e.pid, e.tid),
                                                        self.is_internal),
        }
        self.observe_errors: Dict[tuple, ev.ObserveError] = {}
        for info in processes or []:
            self._process_info(info)

    # ------------------------------------------------------------------ helpers
    def _thread(self, pid: int, tid: int) -> ThreadStats:
        key = (pid, tid)
        t = self.threads.get(key)
        if t is None:
            t = ThreadStats(pid=pid, tid=tid)
            p = self.processes.get(pid)
            if p is not None and p.info is not None:
                t.comm = p.info.threads.get(tid, "")
            self.threads[key] = t
            self._threads_by_pid.setdefault(pid, []).append(t)
            self._process(pid)
        return t

    def _process(self, pid: int) -> ProcessStats:
        p = self.processes.get(pid)
        if p is None:
            p = self.processes[pid] = ProcessStats(pid=pid)
        return p

    def _followed(self, pid: int) -> set:
        """The fds of ``pid`` whose traffic some thread follows (fd_lifetimes.py)."""
        return self._traffic_fds.setdefault(pid, set())

    def _process_info(self, info: ev.ProcessInfo) -> None:
        p = self._process(info.pid)
        if p.first_info is None:
            p.first_info = info
        # A later ProcessInfo may come from a process that already exited (no fds): keep the
        # richest table seen so far for pipe/socket resolution.
        if p.info is not None:
            keep = {}
            if not info.fds and p.info.fds:
                keep["fds"] = p.info.fds
            if not info.cmdline and p.info.cmdline:   # a zombie's cmdline reads empty
                keep["cmdline"] = p.info.cmdline
            if not info.threads and p.info.threads:
                keep["threads"] = p.info.threads
            if keep:
                info = ev.ProcessInfo(**{**_as_dict(info), **keep})
        p.info = info
        for tid, comm in info.threads.items():
            t = self._thread(info.pid, tid)
            if comm:
                t.comm = comm
        self._internal[info.pid] = internal_targets(info.fds)

    def is_internal(self, pid: int, target: Optional[str]) -> bool:
        """True when both ends of the pipe/socketpair behind ``target`` are in process ``pid``."""
        if not target:
            return False
        internal = self._internal.get(pid)
        if internal and target in internal:
            return True
        # strace -yy prints socketpairs as UNIX-STREAM:[a->b]: internal if both inodes are ours.
        t = FdTarget.parse(target)
        if t.kind != "unix" or t.inode is None or t.peer_inode is None:
            return False
        inodes = self._inodes.get(pid)
        if inodes is None:
            info = self.processes.get(pid)
            inodes = {f.inode for f in info.info.fds} if info and info.info else set()
            self._inodes[pid] = inodes
        return t.inode in inodes and t.peer_inode in inodes

    # ------------------------------------------------------------------ feeding
    def feed(self, e: ev.Event) -> None:
        ts = e.ts
        if ts:
            last = self.last_ts
            if last is None or ts > last:
                self.last_ts = ts
                if self.start is None:      # set with last_ts: only ever None before it
                    self.start = ts
        handler = self._dispatch.get(type(e))
        if handler is not None:
            handler(e)

    def feed_many(self, events: Iterable[ev.Event],
                  route: Optional[Dict[type, Callable[[ev.Event], None]]] = None) -> None:
        """``feed`` for each event in one loop (replay's hot path): the first and last times
        stay in locals (no handler reads them), a call's thread is looked up only when it is
        not the previous call's; ``route`` hands some classes to other consumers instead."""
        dispatch, other = self._dispatch.get, (route or {}).get
        last, start, threads, syscall = self.last_ts, self.start, self.threads, self._syscall
        pid = tid = t = None
        try:
            for e in events:
                cls = type(e)
                call = cls in _SYSCALLS
                if not call:
                    handler = dispatch(cls)
                    if handler is None and other(cls) is not None:   # routed elsewhere
                        other(cls)(e)  # type: ignore[misc]
                        continue
                ts = e.ts
                if ts and (last is None or ts > last):
                    last = ts
                    if start is None:
                        start = ts
                if not call:
                    if handler is not None:
                        handler(e)
                    continue
                if t is None or e.tid != tid or e.pid != pid:  # type: ignore[attr-defined]
                    pid, tid = e.pid, e.tid                     # type: ignore[attr-defined]
                    t = threads.get((pid, tid))
                syscall(e, t)                                   # type: ignore[arg-type]
                if t is None:
                    t = threads.get((pid, tid))
        finally:
            self.last_ts, self.start = last, start

    def feed_batches(self, batches: Iterable[Sequence[ev.Event]],
                     route: Optional[Dict[type, Callable[[ev.Event], None]]] = None,
                     fast: Any = None) -> None:
        """``feed_many`` over lists of events (a trace read block by block). ``fast``: the
        compiled helpers, whose twin of the loop over calls (csrc/feed.c feed_calls, calls.py)
        takes each run of calls, of a list or of a RowBlock (a block read in place: feed_rows);
        the other events go through ``feed_many``."""
        if fast is None:
            self.feed_many(itertools.chain.from_iterable(batches), route)
            return
        ctx = self.call_context()
        cur: list = [self.last_ts, self.start, None, None, None]   # feed_calls's (its doc)
        feed_calls, feed_rows = fast.feed_calls, fast.feed_rows
        for batch in batches:
            feed = feed_calls if type(batch) is list else feed_rows
            i, n = 0, len(batch)
            while i < n:
                i = feed(batch, i, ctx, cur)
                if i < n:
                    self.last_ts, self.start = cur[0], cur[1]
                    self.feed_many((batch[i],), route)
                    cur[0], cur[1] = self.last_ts, self.start
                    i += 1
        self.last_ts, self.start = cur[0], cur[1]

    def _on_io(self, e: ev.ProcessIO) -> None:
        p = self._process(e.pid)
        if p.first_io is None:
            p.first_io = e
        p.last_io = e

    def _on_info(self, e: ev.ProcessInfo) -> None:
        self._inodes.pop(e.pid, None)
        self._process_info(e)

    def _on_exit(self, e: ev.ProcessExit) -> None:
        p = self._process(e.pid)
        p.exited = e
        self._exits += 1
        p.exit_order = self._exits
        for t in self.threads_of(e.pid):
            if t.exited_at is None:
                t.exited_at = e.ts

    def _on_thread_exit(self, e: ev.ThreadExit) -> None:
        self._thread(e.pid, e.tid).exited_at = e.ts

    def _on_thread_start(self, e: ev.ThreadStart) -> None:
        self._thread(e.pid, e.tid).started_at = e.ts

    def _on_exec(self, e: ev.ProcessExec) -> None:
        self._process(e.pid).exec_seen = True

    def _on_signal(self, e: ev.SignalDelivered) -> None:
        self._process(e.pid).signals[e.signal] += 1
        if e.is_fault:
            t = self._thread(e.pid, e.tid)
            t.fault = (e.signal, e.code, t.syscalls.get("rt_sigreturn", 0))
        if e.signal == "SIGCONT":
            for t in self.threads_of(e.pid):
                t.stopped_by = None

    def _on_served(self, e: ev.ServedConnections) -> None:
        self._process(e.pid).served[e.port] += max(0, e.count)

    def _on_stopped(self, e: ThreadStopped) -> None:
        t = self._thread(e.pid, e.tid)
        t.stopped_by, t.stopped_calls = e.signal or "a signal", t.ncalls

    def _on_cpu(self, e: ev.ThreadCpu) -> None:
        t = self._thread(e.pid, e.tid)
        if t.cpu is None or e.ts - e.since >= t.cpu.ts - t.cpu.since:
            t.cpu = e

    def _on_socket_counters(self, e: ev.SocketCounters) -> None:
        p = self._process(e.pid)
        tr = p.tcp.get(e.fd)
        if tr is None or tr.target != e.target:       # a new socket behind the fd number
            if tr is None and len(p.tcp) >= MAX_SOCKETS:
                return
            p.tcp[e.fd] = TcpTrack(e.fd, e.target, e, e)
            return
        if (e.segs_out or 0) > (tr.last.segs_out or 0):
            tr.send_readings += 1
        tr.last = e

    def _on_observe_error(self, e: ev.ObserveError) -> None:
        if len(self.observe_errors) < MAX_FUTEX_ADDRS:    # bounded like the futex table
            self.observe_errors.setdefault((e.pid, e.tid, e.what), e)

    def _on_lost(self, e: ev.Lost) -> None:
        self.lost += e.count
        if e.reason and e.reason not in self.lost_reasons:
            self.lost_reasons.append(e.reason)

    def threads_of(self, pid: int) -> List[ThreadStats]:
        """The threads of ``pid`` in the order they were first seen (an index kept by
        ``_thread``: a process exit or a SIGCONT costs its own threads, not every thread)."""
        return list(self._threads_by_pid.get(pid, ()))

    def _sample(self, s: ev.ThreadSample) -> None:
        t = self.threads.get((s.pid, s.tid)) or self._thread(s.pid, s.tid)
        if s.comm:
            t.comm = s.comm
        t.samples += 1
        if t.first_sample is None:
            t.first_sample = s
        t.last_sample = s
        t.states[s.state] += 1
        if len(t.sample_calls) < 64:
            t.sample_calls[strip_sp_pc(s.syscall)] += 1

    # ------------------------------------------------------------------ finish
    def finish(self, end: Optional[float] = None, *, truncated: bool = False) -> Recording:
        start = self.start if self.start is not None else 0.0
        stop = end if end is not None else (self.last_ts if self.last_ts is not None else start)
        window = max(stop - start, 1e-9)
        for t in self.threads.values():
            judge_output(t, window, stop, self.capabilities.get("timestamps", True))
        return Recording(start=start, end=max(stop, start), threads=self.threads,
                         processes=self.processes, backends=self.backends,
                         capabilities=self.capabilities, lost=self.lost,
                         lost_reasons=self.lost_reasons, truncated=truncated,
                         futex_wakers=self.futex_wakers, roots=self.roots,
                         lock_holders=self.lock_holders, observe_errors=self.observe_errors,
                         program_clock=self._clock.span() if self._clock else None)


def _as_dict(info: ev.ProcessInfo) -> dict:
    return {f: getattr(info, f) for f in ev.field_names(ev.ProcessInfo)}
