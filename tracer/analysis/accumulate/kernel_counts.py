"""Merge the kernel's counts (``events.ThreadCounts``, eBPF backend) into the accumulator's
per-thread statistics, without double counting the calls that were also streamed. Contract:
- ``KernelCounts.feed(e, t, is_internal)`` applies to ``t`` (accumulate.ThreadStats) what
  ``e`` adds to what the same thread's previous ThreadCounts said: a ThreadCounts is
  cumulative and replaces the one before, so only the difference is added (negative if a
  read of the kernel maps came out lower than the one before). The calls also streamed one
  by one are left out by the backend (``calls - streamed``; writes and reads are never
  streamed), so the streamed events and this merge add up to the kernel's totals.
- ``contribution(e, is_internal)``: what ``e`` adds to each ThreadStats field (the mapping,
  one line each, in its docstring); ``traffic(pid, tid)``: a thread's latest per-fd numbers as
  ``KernelFd``. Pure: no I/O.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ...events.counts import FD_KEYS, ThreadCounts
from ...linux.fdtarget import SOCKET_KINDS
from .io_class import MAX_OUTPUT_TARGETS, MAX_SOCKETS, WAKEUP_MAX_BYTES, IoClass, read_class, \
    write_class
from .stats import MAX_FAILURE_KINDS, NOT_FAILURES, ThreadStats
from .traffic import FdTraffic, from_counters

__all__ = ["KernelFd", "KernelCounts", "contribution", "socket_traffic"]

_SLEEPS = ("nanosleep", "clock_nanosleep")
_LIMITS = {"plain_targets": MAX_OUTPUT_TARGETS, "failures": MAX_FAILURE_KINDS}
# what a write of each group counts as (the groups the kernel keeps apart: small, larger)
_WRITE_FIELD = {IoClass.EVENTFD: "eventfd_writes", IoClass.WAKEUP: "wakeup_writes",
                IoClass.UNKNOWN: "unjudged_writes", IoClass.DISCARDED: "null_writes"}


@dataclass(frozen=True)
class KernelFd:
    """One fd's writes/sends and reads/recvs of one thread, from the start of the recording
    (the ``per_fd`` dicts of events.ThreadCounts; the same names)."""
    fd: int
    kind: Optional[str] = None
    target: str = ""
    writes: int = 0
    wbytes: int = 0
    wmin: int = 0
    wmax: int = 0
    wsmall: int = 0
    wsbytes: int = 0
    reads: int = 0
    rbytes: int = 0
    first: Optional[float] = None
    last: Optional[float] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "KernelFd":
        return cls(**{k: d[k] for k in FD_KEYS if k in d})

    @property
    def label(self) -> str:
        """As Accumulator._output names an output target."""
        return f"fd {self.fd} ({self.target})" if self.target else f"fd {self.fd}"


Contribution = Dict[str, Any]   # ThreadStats field -> number, Counter, or a timestamp


def contribution(e: ThreadCounts,
                 is_internal: Callable[[int, Optional[str]], bool]) -> Contribution:
    """What ``e`` adds to a ThreadStats, field by field, one line each:
    calls - streamed, by name    -> syscalls[name]; nanosleep/clock_nanosleep also -> sleeps,
                                    sched_yield also -> yields
    blocked_s                    -> syscall_time
    futex waits / waits_timeout / timeouts / wakes -> futex_waits / futex_waits_timeout /
                                    futex_timeouts / futex_wakes
    polls calls / timeouts / infinite -> polls / poll_timeouts / poll_infinite
    ioctls (fd kind, request)    -> ioctls[(kind or "?", request, "")]
    accepts                      -> accepts
    failures ("name:ERRNO")      -> failures[(name, ERRNO)], but NOT_FAILURES (stats.py), at
                                    most MAX_FAILURE_KINDS kinds a thread
    per_fd, per fd (KernelFd)    -> what Accumulator._write/_read decide call by call:
      every fd:                     wbytes -> written_bytes (all bytes written or sent); its
                                    small writes (at most io_class.WAKEUP_MAX_BYTES: the
                                    kernel counts them apart) and its larger ones are each
                                    classed by io_class.write_class, as the accumulator classes
                                    a single call:
      eventfd:                      writes -> eventfd_writes (reads: nothing)
      kind unknown (fd closed):     writes of more than WAKEUP_MAX_BYTES -> plain output;
                                    the small ones -> unjudged_writes
      a pipe/unix/socket/fifo with both ends in the process: small writes -> wakeup_writes,
                                    larger ones -> plain output; reads -> nothing
      /dev/null:                    writes -> null_writes (not output)
      a socket (tcp, udp, unix, socket): ThreadStats.sockets[fd], the traffic.FdTraffic that
                                    finish() judges (keep-alive or output), set from the
                                    latest counts (they are cumulative): sends = writes,
                                    receives = reads, each at its average size (a message
                                    sent in pieces is several writes), first and last send.
                                    The kernel keeps no intervals: the keep-alive rule then
                                    decides on sizes and rate alone.
      other fdtarget.OUTPUT_KINDS:  writes -> plain output (plain_bytes, plain_writes,
                                    plain_targets["fd N (target)"], plain_last_ts)
      reads (not eventfd, not internal) -> input_bytes; on a "file" -> file_reads too; the
                                    latest fd's last call -> input_ts (its place among the
                                    calls unknown: input_at None)
    """
    c: Contribution = {"syscalls": Counter(), "plain_targets": Counter(), "ioctls": Counter(),
                       "failures": Counter()}

    def add(name: str, n: float) -> None:
        if n:
            c[name] = c.get(name, 0) + n

    for name, n in e.calls.items():
        own = n - e.streamed.get(name, 0)
        if own:
            c["syscalls"][name] += own
            if name in _SLEEPS:
                add("sleeps", own)
            elif name == "sched_yield":
                add("yields", own)
    add("syscall_time", e.blocked_s)
    for key, field_name in (("waits", "futex_waits"), ("waits_timeout", "futex_waits_timeout"),
                            ("timeouts", "futex_timeouts"), ("wakes", "futex_wakes")):
        add(field_name, e.futex.get(key, 0))
    for key, field_name in (("calls", "polls"), ("timeouts", "poll_timeouts"),
                            ("infinite", "poll_infinite")):
        add(field_name, e.polls.get(key, 0))
    for io in e.ioctls:
        c["ioctls"][(io.get("kind") or "?", io.get("request", 0), "")] += io.get("calls", 0)
    add("accepts", e.accepts)
    for key, n in e.failures.items():
        name, _, err = key.partition(":")
        if err and err not in NOT_FAILURES:
            c["failures"][(name, err)] += n
    for d in e.per_fd:
        _fd(c, KernelFd.from_dict(d), is_internal(e.pid, d.get("target") or None), add)
    return c


def _fd(c: Contribution, f: KernelFd, internal: bool, add: Callable[[str, float], None]) -> None:
    add("written_bytes", f.wbytes)
    small = (f.wsmall, f.wsbytes, 1)
    large = (f.writes - f.wsmall, f.wbytes - f.wsbytes, WAKEUP_MAX_BYTES + 1)
    for writes, nbytes, size in (small, large):
        if writes <= 0:
            continue
        cls = write_class(f.kind, size, lambda: internal)
        if cls is IoClass.OUTPUT:
            _output(c, f, writes, nbytes, add)
        elif cls in _WRITE_FIELD:
            add(_WRITE_FIELD[cls], writes)
        # SOCKET: ThreadStats.sockets (socket_traffic); OTHER: neither output nor a wake-up
    if f.reads and f.rbytes and not read_class(f.kind, lambda: internal).is_wakeup:
        add("input_bytes", f.rbytes)
        if f.kind == "file":
            add("file_reads", f.reads)
        if f.last is not None and (c.get("input_last_ts") or 0) < f.last:
            c["input_last_ts"] = f.last     # the fd's last call, read or write: no earlier


def _output(c: Contribution, f: KernelFd, writes: int, nbytes: int,
            add: Callable[[str, float], None]) -> None:
    if writes <= 0:
        return
    add("plain_writes", writes)
    add("plain_bytes", nbytes)
    c["plain_targets"][f.label] += nbytes
    if f.last is not None and (c.get("plain_last_ts") or 0) < f.last:
        c["plain_last_ts"] = f.last


class KernelCounts:
    """Applies ThreadCounts to ThreadStats as differences (module doc)."""

    def __init__(self) -> None:
        self._last: Dict[Tuple[int, int], Contribution] = {}
        self._traffic: Dict[Tuple[int, int], List[KernelFd]] = {}

    def feed(self, e: ThreadCounts, t: ThreadStats,
             is_internal: Callable[[int, Optional[str]], bool]) -> None:
        key = (e.pid, e.tid)
        new = contribution(e, is_internal)
        old = self._last.get(key, {})
        self._last[key] = new
        self._traffic[key] = fds = [KernelFd.from_dict(d) for d in e.per_fd]
        for f in fds:
            if f.kind in SOCKET_KINDS and f.writes + f.reads > 0 \
                    and (f.fd in t.sockets or len(t.sockets) < MAX_SOCKETS) \
                    and not is_internal(e.pid, f.target or None):
                t.sockets[f.fd] = socket_traffic(f)
        for name in set(new) | set(old):
            a, b = new.get(name), old.get(name)
            if name == "plain_last_ts":
                if a is not None and (t.plain_last_ts is None or a > t.plain_last_ts):
                    t.plain_last_ts = a
            elif name == "input_last_ts":
                if a is not None and (t.input_ts is None or a > t.input_ts):
                    t.input_at, t.input_ts = None, a
            elif isinstance(a if a is not None else b, Counter):
                _apply_counter(getattr(t, name), a or Counter(), b or Counter(),
                               limit=_LIMITS.get(name, 0))
            else:
                setattr(t, name, getattr(t, name) + (a or 0) - (b or 0))

    def traffic(self, pid: int, tid: int) -> List[KernelFd]:
        return list(self._traffic.get((pid, tid), ()))


def socket_traffic(f: KernelFd) -> FdTraffic:
    """A socket fd's kernel counts as the traffic the keep-alive rule judges (module doc).
    Every send is taken at the average size, as the proc backend's TCP counters are
    (traffic.from_counters): the kernel cannot tell a message sent in pieces (NCCL's RAS
    keep-alive is a 4-byte length, then 56 bytes) from messages of two sizes, and it keeps no
    intervals. The keep-alive rule then rests on the average size and the rate."""
    tr = from_counters(f.fd, f.target, f.writes, f.wbytes, f.reads, f.rbytes, f.kind)
    if f.writes:
        tr.first_send, tr.last_send = f.first, f.last
    return tr


def _apply_counter(target: Counter, new: Counter, old: Counter, limit: int = 0) -> None:
    for k in set(new) | set(old):
        d = new.get(k, 0) - old.get(k, 0)
        if not d:
            continue
        if limit and k not in target and len(target) >= limit:
            continue
        target[k] += d
        if target[k] <= 0:
            del target[k]
