"""The kernel's per-thread counts (eBPF backend): one event class, registered with the trace
format like every other (events.register), kept apart from events/__init__.py only for its size.

Contract: ``ThreadCounts`` (tag ``cnt``) as its docstring says; ``FD_KEYS`` the keys of each
``per_fd`` dict; ``WAKEUP_MAX_BYTES`` the size of a small (wake-up sized) write, which its
``wsmall`` field counts, the kernel's HT_SMALL_WRITE and the analyzer's wake-up rule
(analysis/accumulate/io_class.py) alike. Backends emit it, the analyzer merges it (analysis/accumulate/kernel_counts.py).
"""
from __future__ import annotations

from typing import Dict, List

from msgspec import field

from . import Event, register
from .shapes import FdCounts, Int, IoctlCounts, Time

__all__ = ["ThreadCounts", "FD_KEYS", "WAKEUP_MAX_BYTES"]

# Writes of at most this many bytes to an eventfd, a self-pipe or a socketpair are wake-ups:
# libzmq/libuv write 8 bytes to an eventfd, asyncio and signal wakeup fds write 1 byte.
WAKEUP_MAX_BYTES = 8


class ThreadCounts(Event, tag="cnt"):
    """What the kernel counted for one thread (eBPF backend), cumulative from ``since`` (the
    attach) to ``ts``: emitted about once a second while recording and once at the end, for
    threads that exited during the window too. A later one replaces an earlier one.

    Calls are counted in the kernel; some are also emitted one by one as syscall events
    (``streamed``), the rest only here. So that a reader adds both without double counting:
    - ``calls``: every completed call, by name (the truth); ``streamed``: of those, the ones
      that were also emitted as events. ``blocked_s``: seconds the calls NOT streamed spent
      asleep (a call that never left the CPU adds nothing).
    - ``per_fd``: writes/sends and reads/recvs per fd, none of which is streamed; one dict per fd
      (see ``FD_KEYS``): ``fd``, ``kind``/``target`` (events.FdInfo's, resolved from /proc
      when the counts were read; None/"" when the fd was already closed), ``writes`` (calls
      that returned >= 0), ``wbytes``, ``wmin``/``wmax`` (sizes), ``wsmall``/``wsbytes``
      (writes of at most ``WAKEUP_MAX_BYTES``, 8: wake-up sized, and their bytes), ``reads`` (calls that
      returned data), ``rbytes``, ``first``/``last`` (epoch seconds of the first and last of
      them, at most one scheduler tick early).
    - ``futex`` (keys: waits, waits_timeout, timeouts, wakes), ``polls`` (keys: calls,
      timeouts, infinite), ``ioctls`` (dicts: fd, kind, target, request, calls) and
      ``accepts``: the calls of those kinds that were NOT streamed (the streamed ones carry
      their own details).
    - ``failures``: calls NOT streamed that failed, by "name:ERRNO" (``connect:ECONNREFUSED``),
      but for EAGAIN, EINTR, ETIMEDOUT, EINPROGRESS and ERESTART* (the kernel skips them);
      empty in traces from before it was counted.
    """
    pid: Int
    tid: Int
    since: Time
    calls: Dict[str, Int] = field(default_factory=dict)
    streamed: Dict[str, Int] = field(default_factory=dict)
    blocked_s: float = 0.0
    per_fd: List[FdCounts] = field(default_factory=list)
    futex: Dict[str, Int] = field(default_factory=dict)
    polls: Dict[str, Int] = field(default_factory=dict)
    ioctls: List[IoctlCounts] = field(default_factory=list)
    accepts: Int = 0
    failures: Dict[str, Int] = field(default_factory=dict)


FD_KEYS = ("fd", "kind", "target", "writes", "wbytes", "wmin", "wmax", "wsmall", "wsbytes",
           "reads", "rbytes", "first", "last")


register(ThreadCounts)
