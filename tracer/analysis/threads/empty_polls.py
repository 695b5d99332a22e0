"""Busy loops without a wait (issue 44 item 1): a thread that asks again and again, with calls
that return at once and bring nothing, for something that never comes.

Contract: ``rule_empty_polls(ctx)`` (a thread rule, threads/thread.py) says busy-waiting when,
since the thread's last output, input or connection, at least 90% of its calls (and at least
``EMPTY_MIN_CALLS``) brought nothing without waiting (``empty_call_counts``: a query ioctl, a
read of 0 bytes or EAGAIN, a zero-timeout poll, sched_yield, the clock), its last call is one
of them, it is in no wait now (state.running_at_cut), it has no timed wait to speak of, and,
with times, makes ``EMPTY_MIN_RATE`` of them a second. Without times: the count and the order.
The counters cover the thread's whole life, so the calls since its last sign of life are
bounded from below (rule_empty_polls says how).
"""
from __future__ import annotations

from collections import Counter
from typing import Optional

from ... import events as ev
from ...linux.blocking import QUERY_IOCTLS
from ..accumulate.stats import ThreadStats
from ..vocab.verdict import BUSY, ThreadVerdict
from .context import ThreadContext
from .state import running_at_cut, timed_wakeups

__all__ = ["rule_empty_polls", "empty_call_counts", "is_empty_call", "EMPTY_MIN_CALLS",
           "EMPTY_MIN_RATE"]

EMPTY_MIN_CALLS = 100          # empty calls since the last sign of life, at least
EMPTY_MIN_RATE = 100.0         # ... and, with times, this many a second (a poller that sleeps
#                                between its looks makes far fewer: the periodic rules)
EMPTY_SHARE = 0.9
READ_CALLS = frozenset({"read", "readv", "pread64", "preadv", "preadv2", "recvfrom", "recvmsg",
                        "recvmmsg", "recv"})
# Calls that return at once and do nothing a loop could be waiting for (thread.py's spin set)
NO_WAIT_CALLS = frozenset({"clock_gettime", "gettimeofday", "time", "clock_getres", "getpid",
                           "gettid", "getppid", "sched_yield", "getcpu"})


def is_empty_call(e: Optional[ev.Syscall]) -> bool:
    """A completed call that returned at once with nothing (module doc)."""
    if e is None:
        return False
    if e.name in NO_WAIT_CALLS or e.err in ("EAGAIN", "EWOULDBLOCK"):
        return True
    if isinstance(e, ev.PollCall):
        return e.timeout == 0
    if isinstance(e, ev.IoctlCall):
        return (e.request_name or "") in QUERY_IOCTLS
    return e.name in READ_CALLS and e.ret == 0


def empty_call_counts(t: ThreadStats) -> Counter:
    """Per kind, the thread's calls that may have returned at once with nothing: its query
    ioctls, zero-timeout polls, no-wait calls, and its reads after its last input (each read
    after ``input_at`` brought nothing: no bytes, or an error such as EAGAIN)."""
    out: Counter = Counter()
    for (_, _, name), n in t.ioctls.items():
        if name in QUERY_IOCTLS:
            out[f"ioctl({name})"] += n
    zero = sum(n for v, n in t.poll_timeout_values.items() if v == 0)
    if zero:
        out["poll with timeout 0"] = zero
    for name in NO_WAIT_CALLS:
        if t.syscalls.get(name):
            out[name] = t.syscalls[name]
    if t.input_at is not None:         # (the reads up to it are among the calls before the
        for name in READ_CALLS:         # last sign of life, which the rule subtracts)
            if t.syscalls.get(name):
                out[f"{name} (nothing read)"] = t.syscalls[name]
    return out


def _sign_of_life(t: ThreadStats) -> int:
    """ncalls at the thread's last output, input or connection."""
    return max(t.calls_at_output, t.output_at, t.input_at or 0, t.connection_at)


def rule_empty_polls(c: ThreadContext) -> Optional[ThreadVerdict]:
    """The module doc's rule. The calls before the last sign of life number ``since``: at most
    that many of the empty calls came before it, the rest after."""
    t = c.t
    if t.output_bytes and not t.output_stale:
        return None
    if c.wait is not None and c.wait.timeout != 0:
        return None
    if not (is_empty_call(t.last_call) or running_at_cut(t)):
        return None
    since = _sign_of_life(t)
    after = t.ncalls - since
    kinds = empty_call_counts(t)
    empty = sum(kinds.values()) - since          # at least this many came after it
    if empty < EMPTY_MIN_CALLS or empty < EMPTY_SHARE * after:
        return None
    zero = kinds.get("poll with timeout 0", 0)
    if (timed_wakeups(t) - zero) * 100 > empty:  # it sleeps between its looks: a poller
        return None
    if c.timed and empty / c.rec.window < EMPTY_MIN_RATE:
        return None
    top = ", ".join(f"{name} x{n}" for name, n in kinds.most_common(3))
    how = f" ({c.rate(empty)})" if c.timed else " (the log has no times: by their count " \
        "and order)"
    return ThreadVerdict(BUSY, "empty-polls", [
        f"polls without waiting: at least {empty} of its last {after} calls returned at once "
        f"with nothing{how}: {top}; no timeout, no wait", "no output"], cpu=c.cpu)
