"""Streaming accumulation of events into per-thread and per-process statistics.

Contract: ``Accumulator.feed(event)`` takes events in time order, one at a time, from a trace
being read or from a live queue (the same code path for both); memory is bounded by the number of
threads, fds and distinct syscall names, never by the number of events. ``finish(end_ts)`` closes
the recording window and returns a ``Recording``: everything the rules need, nothing classified.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional, Tuple

from ... import events as ev
from ...events.counts import ThreadCounts
from ...events.states import ThreadStopped
from ...events.evidence import LogLines, MemoryProgress
from ...events.stacks import StackSamples
from ...linux.fdtarget import FdTarget
from .io_class import (MAX_OUTPUT_TARGETS, MAX_SOCKETS, IoClass, fd_label, internal_targets,
                       judge_output, read_class, write_class)
from .fd_lifetimes import ENDS_FD, fd_ended, traffic_of
from .kernel_counts import KernelCounts
from .program_clock import CLOCK_CALLS, ProgramClock
from .stats import (ProcessStats, Recording, TcpTrack, ThreadStats, count_failure,
                    count_poll, strip_sp_pc)

__all__ = ["Accumulator", "ThreadStats", "ProcessStats", "Recording"]

MAX_FUTEX_ADDRS = 4096
_OUTPUT, _WAKEUP, _EVENTFD, _DISCARDED, _SOCKET, _UNKNOWN = (
    IoClass.OUTPUT, IoClass.WAKEUP, IoClass.EVENTFD, IoClass.DISCARDED, IoClass.SOCKET,
    IoClass.UNKNOWN)
# The event classes _syscall tells apart, as module globals (one dict lookup, not two).
_SYSCALL, _WRITE, _FUTEX, _POLL, _IOCTL, _READ = (ev.Syscall, ev.WriteCall, ev.FutexCall,
                                                  ev.PollCall, ev.IoctlCall, ev.ReadCall)
_PLAIN_NAMES = frozenset({"nanosleep", "clock_nanosleep", "sched_yield", "connect", "flock",
                          "fcntl"}) | ENDS_FD | CLOCK_CALLS      # the plain calls _syscall reads
_SYSCALLS = frozenset({ev.Syscall, ev.FutexCall, ev.PollCall, ev.IoctlCall, ev.WriteCall,
                       ev.ReadCall, ev.WaitChild})     # what the dispatch sends to _syscall


class Accumulator:
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

    def _syscall(self, e: ev.Syscall, t: Optional[ThreadStats] = None) -> None:
        """``t``: the event's ThreadStats when the caller has it (feed_many), else looked up."""
        if t is None:
            t = self.threads.get((e.pid, e.tid)) or self._thread(e.pid, e.tid)
        ts = e.ts
        if t.first_ts is None:
            t.first_ts = ts
        t.last_ts = ts
        if e.ongoing:
            t.ongoing = e
            return
        t.last_call = e
        t.ncalls += 1
        name = e.name
        t.syscalls[name] += 1
        if e.err is not None:
            count_failure(t, name, e.err)
        if name == t.tail_name and e.ret == t.tail_ret:   # the run of one call at the end
            t.tail_run += 1
        else:
            t.tail_name, t.tail_ret, t.tail_run, t.tail_since = name, e.ret, 1, ts
        dur = e.dur
        if dur is None:
            t.durations_known = False
        else:
            t.syscall_time += dur
        kind = type(e)
        if kind is _SYSCALL:
            if name not in _PLAIN_NAMES:     # (most plain calls: one set lookup)
                pass
            elif name == "nanosleep" or name == "clock_nanosleep":
                t.sleeps += 1
            elif name == "sched_yield":
                t.yields += 1
            elif name == "connect":
                self._connect(t, e)
            elif name == "flock" or name == "fcntl":
                self._lock(t, e)
            elif name in ENDS_FD:
                fd_ended(self._threads_by_pid.get(e.pid, ()), e, self._followed(e.pid))
            elif self._clock is not None and name in CLOCK_CALLS:
                self._clock.feed(name, e.args or "")
        elif kind is _WRITE:
            self._write(t, e)  # type: ignore[arg-type]
        elif kind is _FUTEX:
            self._futex(t, e)  # type: ignore[arg-type]
        elif kind is _POLL:
            count_poll(t, e)  # type: ignore[arg-type]
        elif kind is _IOCTL:
            t.ioctls[(e.fd_kind or "?", e.request, e.request_name or "")] += 1  # type: ignore
        elif kind is _READ:
            self._read(t, e)  # type: ignore[arg-type]

    def _read(self, t: ThreadStats, e: ev.ReadCall) -> None:
        if e.name.startswith("accept"):
            if e.ret is not None and e.ret >= 0:
                t.accepts += 1
                t.connection_at, t.connection_ts = t.ncalls, e.ts
            return
        if not e.ret or e.ret <= 0:
            return
        cls = read_class(e.fd_kind, lambda: self.is_internal(e.pid, e.fd_target))
        if cls.is_wakeup:
            return
        if cls is _SOCKET and e.fd is not None:
            tr = traffic_of(t, e, self._followed(e.pid))
            if tr is not None:
                tr.receive(e.ret, e.ts)
        t.input_bytes += e.ret
        t.input_at, t.input_ts = t.ncalls, e.ts
        if e.fd_kind == "file":
            t.file_reads += 1

    def _lock(self, t: ThreadStats, e: ev.Syscall) -> None:
        """File locks taken and released in the log (flock, fcntl F_SETLK*): who holds which
        file, for a waiter the log shows blocked on it (imports have no /proc/locks)."""
        if e.err is not None or e.ret != 0 or not e.fd_target:
            return
        args = e.args or ""
        if "LOCK_UN" in args or "F_UNLCK" in args:
            if self.lock_holders.get(e.fd_target, (None,))[0] == t.pid:
                del self.lock_holders[e.fd_target]
        elif ("LOCK_EX" in args or "LOCK_SH" in args or "F_WRLCK" in args
              or "F_RDLCK" in args) and len(self.lock_holders) < MAX_FUTEX_ADDRS:
            self.lock_holders[e.fd_target] = (t.pid, t.tid)

    def _connect(self, t: ThreadStats, e: ev.Syscall) -> None:
        """A connection made counts as doing something outside. A non-blocking connect that
        returned EINPROGRESS is not counted: it may well be refused (NCCL's RAS thread retries
        a dead peer once a second that way); what it later sends counts as output anyway."""
        if e.err is None and e.ret == 0:
            t.connects += 1
            t.connection_at, t.connection_ts = t.ncalls, e.ts
            if len(t.connect_targets) < MAX_OUTPUT_TARGETS:
                t.connect_targets[e.fd_target or f"fd {e.fd}"] += 1

    def _write(self, t: ThreadStats, e: ev.WriteCall) -> None:
        n = max(e.nbytes, 0)
        if e.err is not None:
            return
        t.written_bytes += n
        cls = write_class(e.fd_kind, n, lambda: self.is_internal(e.pid, e.fd_target))
        if cls is _OUTPUT:
            self._output(t, e, n)
        elif cls is _EVENTFD:
            t.eventfd_writes += 1
        elif cls is _WAKEUP:
            t.wakeup_writes += 1
        elif cls is _UNKNOWN:
            t.unjudged_writes += 1
        elif cls is _DISCARDED:
            t.null_writes += 1
        elif cls is _SOCKET:
            tr = traffic_of(t, e, self._followed(e.pid)) if e.fd is not None else None
            if tr is not None:
                tr.send(e.ts, n)
                tr.calls_at_send = t.ncalls
            else:                       # a socket not followed (too many): count it as output
                self._output(t, e, n)

    @staticmethod
    def _output(t: ThreadStats, e: ev.WriteCall, n: int) -> None:
        t.plain_bytes += n
        t.plain_writes += 1
        if t.plain_first_ts is None:
            t.plain_first_ts = e.ts
        t.plain_last_ts = e.ts
        t.calls_at_output = t.ncalls
        label = fd_label(e.fd, e.fd_target)
        if len(t.plain_targets) < MAX_OUTPUT_TARGETS or label in t.plain_targets:
            t.plain_targets[label] += n

    def _futex(self, t: ThreadStats, e: ev.FutexCall) -> None:
        op = e.op
        if op.startswith("WAIT") or op in ("LOCK_PI", "LOCK_PI2", "WAIT_REQUEUE_PI"):
            t.futex_waits += 1
            if e.timeout is not None:
                t.futex_waits_timeout += 1
            if e.err == "ETIMEDOUT":
                t.futex_timeouts += 1
        elif op.startswith("WAKE") or op in ("UNLOCK_PI", "REQUEUE", "CMP_REQUEUE"):
            t.futex_wakes += 1
            if e.ret and e.ret > 0 and (e.addr in self.futex_wakers
                                        or len(self.futex_wakers) < MAX_FUTEX_ADDRS):
                self.futex_wakers[e.addr] = (t.pid, t.tid)

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
