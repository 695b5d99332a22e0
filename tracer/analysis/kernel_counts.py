"""Merge the kernel's counts (``events.ThreadCounts``, eBPF backend) into the accumulator's
per-thread statistics, without double counting the calls that were also streamed.

Contract:
- ``KernelCounts.feed(e, t, is_internal)`` applies to ``t`` (accumulate.ThreadStats) what
  ``e`` adds to what the same thread's previous ThreadCounts said: a ThreadCounts is
  cumulative and replaces the one before, so only the difference is added (negative if a
  read of the kernel maps came out lower than the one before). The calls also streamed one
  by one are left out by the backend (``calls - streamed``; writes and reads are never
  streamed), so the streamed events and this merge add up to the kernel's totals.
- The mapping onto ThreadStats (``contribution``), one line each:
    calls - streamed, by name    -> syscalls[name]; nanosleep/clock_nanosleep also -> sleeps,
                                    sched_yield also -> yields
    blocked_s                    -> syscall_time
    futex waits / waits_timeout / timeouts / wakes -> futex_waits / futex_waits_timeout /
                                    futex_timeouts / futex_wakes
    polls calls / timeouts / infinite -> polls / poll_timeouts / poll_infinite
    ioctls (fd kind, request)    -> ioctls[(kind or "?", request, "")]
    accepts                      -> accepts
    per_fd, per fd (FdTraffic)   -> what Accumulator._write/_read decide call by call:
      eventfd:                      writes -> eventfd_writes (reads: nothing)
      kind unknown (fd closed):     writes of > 8 bytes -> output; the small ones -> unjudged_writes
      a pipe/unix/socket/fifo with both ends in the process: small writes -> wakeup_writes,
                                    larger ones -> output; reads -> nothing
      other OUTPUT_FD_KINDS:        writes -> output (output_bytes, output_writes,
                                    output_targets["fd N (target)"], last_output_ts)
      reads (not eventfd, not internal) -> input_bytes; on a "file" -> file_reads too
- ``traffic(pid, tid)``: the latest per-fd numbers of a thread as ``FdTraffic`` (for analyses
  of keep-alives and per-fd output).
Pure: no I/O.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

from .. import events as ev

if TYPE_CHECKING:  # pragma: no cover
    from .accumulate import ThreadStats

__all__ = ["FdTraffic", "KernelCounts", "contribution", "SMALL_WRITE"]

SMALL_WRITE = 8          # as accumulate.WAKEUP_MAX_BYTES and the kernel's HT_SMALL_WRITE
_WAKEUP_KINDS = ("pipe", "unix", "socket", "fifo")
_SLEEPS = ("nanosleep", "clock_nanosleep")
_TARGETS_MAX = 32        # as Accumulator._output


@dataclass(frozen=True)
class FdTraffic:
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
    def from_dict(cls, d: Mapping[str, Any]) -> "FdTraffic":
        return cls(**{k: d[k] for k in ev.FD_KEYS if k in d})

    @property
    def label(self) -> str:
        """As Accumulator._output names an output target."""
        return f"fd {self.fd} ({self.target})" if self.target else f"fd {self.fd}"


Contribution = Dict[str, Any]   # ThreadStats field -> number, Counter, or a timestamp


def contribution(e: ev.ThreadCounts,
                 is_internal: Callable[[int, Optional[str]], bool]) -> Contribution:
    """What ``e`` adds to a ThreadStats, field by field (module doc)."""
    c: Contribution = {"syscalls": Counter(), "output_targets": Counter(), "ioctls": Counter()}

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
    for d in e.per_fd:
        _fd(c, FdTraffic.from_dict(d), is_internal(e.pid, d.get("target") or None), add)
    return c


def _fd(c: Contribution, f: FdTraffic, internal: bool, add: Callable[[str, float], None]) -> None:
    kind = f.kind
    large, lbytes = f.writes - f.wsmall, f.wbytes - f.wsbytes
    if kind == "eventfd":
        add("eventfd_writes", f.writes)
        return
    if kind is None:
        _output(c, f, large, lbytes, add)
        add("unjudged_writes", f.wsmall)
    elif internal and kind in _WAKEUP_KINDS:
        add("wakeup_writes", f.wsmall)
        _output(c, f, large, lbytes, add)
        return                                   # reads of its own pipe are not input
    elif kind in ev.OUTPUT_FD_KINDS:
        _output(c, f, f.writes, f.wbytes, add)
    if f.reads and f.rbytes:
        add("input_bytes", f.rbytes)
        if kind == "file":
            add("file_reads", f.reads)


def _output(c: Contribution, f: FdTraffic, writes: int, nbytes: int,
            add: Callable[[str, float], None]) -> None:
    if writes <= 0:
        return
    add("output_writes", writes)
    add("output_bytes", nbytes)
    c["output_targets"][f.label] += nbytes
    if f.last is not None and (c.get("last_output_ts") or 0) < f.last:
        c["last_output_ts"] = f.last


class KernelCounts:
    """Applies ThreadCounts to ThreadStats as differences (module doc)."""

    def __init__(self) -> None:
        self._last: Dict[Tuple[int, int], Contribution] = {}
        self._traffic: Dict[Tuple[int, int], List[FdTraffic]] = {}

    def feed(self, e: ev.ThreadCounts, t: "ThreadStats",
             is_internal: Callable[[int, Optional[str]], bool]) -> None:
        key = (e.pid, e.tid)
        new = contribution(e, is_internal)
        old = self._last.get(key, {})
        self._last[key] = new
        self._traffic[key] = [FdTraffic.from_dict(d) for d in e.per_fd]
        for name in set(new) | set(old):
            a, b = new.get(name), old.get(name)
            if name == "last_output_ts":
                if a is not None and (t.last_output_ts is None or a > t.last_output_ts):
                    t.last_output_ts = a
            elif isinstance(a if a is not None else b, Counter):
                _apply_counter(getattr(t, name), a or Counter(), b or Counter(),
                               limit=_TARGETS_MAX if name == "output_targets" else 0)
            else:
                setattr(t, name, getattr(t, name) + (a or 0) - (b or 0))

    def traffic(self, pid: int, tid: int) -> List[FdTraffic]:
        return list(self._traffic.get((pid, tid), ()))


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
