"""One system call into its thread's statistics: the reference the compiled twin follows.

Contract: ``CallFeed`` is a mixin of accumulator.Accumulator (it reads and updates the
accumulator's tables, which accumulator.py owns). ``_syscall(e, t)`` is every call's part
(times, counts, failures, the run of one call at the end, time inside calls), then
``_specific(t, e)``: what the call's class and name add, asked only for a class other than
``Syscall`` or a name in ``PLAIN_NAMES``. The compiled twin (csrc/feed.c, rowfeed.c, through
Accumulator.feed_batches) does ``_syscall``'s part itself, and of ``_specific``'s: an ioctl's
count, a read that returned nothing or input (io_class.READ_KINDS), a close or dup of an fd
no thread follows (fd_lifetimes.fd_ended's first test); it calls ``_specific`` for the rest.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Set, Tuple

from ... import events as ev
from .io_class import (MAX_OUTPUT_TARGETS, READ_KINDS, IoClass, fd_label, read_class,
                       write_class)
from .fd_lifetimes import ENDS_FD, fd_ended, traffic_of
from .program_clock import CLOCK_CALLS, ProgramClock
from .stats import (MAX_FAILURE_KINDS, NOT_FAILURES, ThreadStats, count_failure,
                    count_poll)

__all__ = ["CallFeed", "MAX_FUTEX_ADDRS", "PLAIN_NAMES", "CALL_CLASSES"]

MAX_FUTEX_ADDRS = 4096
_OUTPUT, _WAKEUP, _EVENTFD, _DISCARDED, _SOCKET, _UNKNOWN = (
    IoClass.OUTPUT, IoClass.WAKEUP, IoClass.EVENTFD, IoClass.DISCARDED, IoClass.SOCKET,
    IoClass.UNKNOWN)
# The event classes _specific tells apart, as module globals (one dict lookup, not two).
_SYSCALL, _WRITE, _FUTEX, _POLL, _IOCTL, _READ, _WAIT = (
    ev.Syscall, ev.WriteCall, ev.FutexCall, ev.PollCall, ev.IoctlCall, ev.ReadCall, ev.WaitChild)
PLAIN_NAMES = frozenset({"nanosleep", "clock_nanosleep", "sched_yield", "connect", "flock",
                         "fcntl"}) | ENDS_FD | CLOCK_CALLS      # the plain calls _specific reads
# The classes _syscall takes, in the order of feed.c's C_* (its twin reads them)
CALL_CLASSES = (ev.Syscall, ev.ReadCall, ev.IoctlCall, ev.FutexCall, ev.PollCall, ev.WriteCall,
                ev.WaitChild)
# What feed.c reads and writes of a ThreadStats and of a call, in the order of its M_* and E_*
_STATS_FIELDS = ("first_ts", "last_ts", "ongoing", "last_call", "ncalls", "syscalls", "failures",
                 "tail_name", "tail_ret", "tail_run", "tail_since", "durations_known",
                 "syscall_time", "ioctls", "input_bytes", "input_at", "input_ts", "file_reads")
_CALL_FIELDS = ((ev.Syscall, "ts"), (ev.Syscall, "pid"), (ev.Syscall, "tid"),
                (ev.Syscall, "name"), (ev.Syscall, "ret"), (ev.Syscall, "err"),
                (ev.Syscall, "dur"), (ev.Syscall, "ongoing"), (ev.Syscall, "fd_kind"),
                (ev.IoctlCall, "request"), (ev.IoctlCall, "request_name"), (ev.Syscall, "fd"))


class CallFeed:
    """The per-call part of Accumulator (module doc): what it reads of the accumulator."""
    threads: Dict[Tuple[int, int], ThreadStats]
    _threads_by_pid: Dict[int, List[ThreadStats]]
    lock_holders: Dict[str, Tuple[int, int]]
    futex_wakers: Dict[int, Tuple[int, int]]
    _clock: Optional[ProgramClock]
    _thread: Callable[[int, int], ThreadStats]
    _followed: Callable[[int], Set[int]]
    _traffic_fds: Dict[int, Set[int]]
    is_internal: Callable[[int, Optional[str]], bool]

    def call_context(self) -> tuple:
        """What the compiled twin (feed.c feed_calls) is given of this accumulator: its tables,
        the methods it calls back, the slot members of the fields it reads and writes, and
        the sets and constants of the rules it follows (its C comment gives the order)."""
        return (self.threads, self._thread, self._specific, ThreadStats,
                tuple(_member(ThreadStats, f) for f in _STATS_FIELDS), CALL_CLASSES,
                tuple(_member(cls, f) for cls, f in _CALL_FIELDS), PLAIN_NAMES, NOT_FAILURES,
                MAX_FAILURE_KINDS, self._traffic_fds, ENDS_FD, READ_KINDS)

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
        if type(e) is not _SYSCALL or name in PLAIN_NAMES:    # (most calls: one set lookup)
            self._specific(t, e)

    def _specific(self, t: ThreadStats, e: ev.Syscall) -> None:
        """What the call's class (and a plain call's name) adds to ``t`` (module doc)."""
        kind = type(e)
        if kind is _SYSCALL:
            self._plain(t, e)
        elif kind is _READ:
            self._read(t, e)  # type: ignore[arg-type]
        elif kind is _IOCTL:
            t.ioctls[(e.fd_kind or "?", e.request, e.request_name or "")] += 1  # type: ignore
        elif kind is _WRITE:
            self._write(t, e)  # type: ignore[arg-type]
        elif kind is _FUTEX:
            self._futex(t, e)  # type: ignore[arg-type]
            _note_restart(t, e)
        elif kind is _POLL:
            count_poll(t, e)  # type: ignore[arg-type]
            _note_restart(t, e)
        elif kind is _WAIT:
            _note_restart(t, e)

    def _plain(self, t: ThreadStats, e: ev.Syscall) -> None:
        name = e.name
        if name == "nanosleep" or name == "clock_nanosleep":
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
        holders = self.lock_holders
        if "LOCK_UN" in args or "F_UNLCK" in args:
            if holders.get(e.fd_target, (None,))[0] == t.pid:
                del holders[e.fd_target]
        elif ("LOCK_EX" in args or "LOCK_SH" in args or "F_WRLCK" in args
              or "F_RDLCK" in args) and len(holders) < MAX_FUTEX_ADDRS:
            holders[e.fd_target] = (t.pid, t.tid)

    @staticmethod
    def _connect(t: ThreadStats, e: ev.Syscall) -> None:
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
            elif e.timeout is None and e.err is not None and (
                    e.err == "EINTR" or e.err.startswith("ERESTART")):
                t.interrupted = e
        elif op.startswith("WAKE") or op in ("UNLOCK_PI", "REQUEUE", "CMP_REQUEUE"):
            t.futex_wakes += 1
            wakers = self.futex_wakers
            if e.ret and e.ret > 0 and (e.addr in wakers or len(wakers) < MAX_FUTEX_ADDRS):
                wakers[e.addr] = (t.pid, t.tid)


def _untimed_wait(e: ev.Syscall) -> bool:
    """A futex wait, poll or child wait without a time limit (wait4 without WNOHANG)."""
    if isinstance(e, ev.FutexCall):
        return e.op.startswith("WAIT") and e.timeout is None
    if isinstance(e, ev.PollCall):
        return e.timeout is None
    return "WNOHANG" not in (e.args or "")


def _note_restart(t: ThreadStats, e: ev.Syscall) -> None:
    """A wait without a time limit that a signal cut (``= ? ERESTARTSYS``, EINTR) and the thread
    entered again after the handler (a timer signal every 100 ms: Ruby's SIGVTALRM, a
    profiler's SIGPROF) is still the one wait: counted here, read by threads/state.py. The
    same wait returning on its own ends the run."""
    if not _untimed_wait(e):
        return
    err = e.err
    if err is None:
        if t.restarted is not None and t.restarted.name == e.name:
            t.restarted, t.restarts = None, 0
        return
    if err != "EINTR" and not err.startswith("ERESTART"):
        return
    r = t.restarted
    if r is not None and r.name == e.name and r.fd == e.fd:
        t.restart_gap = max(t.restart_gap, t.ncalls - t.calls_at_restart)
        t.restarts += 1
    else:
        t.restarts, t.restart_gap = 1, 0
    t.restarted, t.calls_at_restart = e, t.ncalls


def _member(cls: type, name: str) -> object:
    """The slot member descriptor of field ``name`` of ``cls`` (its own or a base's)."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    raise AttributeError(name)
