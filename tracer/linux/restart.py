"""Which call a ``restart_syscall`` resumes (pure).

Contract: ``resumed_call(strace_args, wchan)`` is the name of the call a thread seen in
``restart_syscall`` is really in, or "" when nothing tells. The kernel restarts through
``restart_syscall`` only calls that keep their state in a restart block: sleeps (nanosleep,
clock_nanosleep), a futex wait with a time limit, poll/ppoll and select with their remaining
time. An attach (strace, a signal) interrupts them and the thread resumes there, so a thread
that waited in ``poll`` before the attach shows ``restart_syscall`` all along after it.
Sources, best first: the kernel's wait channel, then strace's own text (``resumed_call``).
"""
from __future__ import annotations

import re

__all__ = ["resumed_call", "TIMED_RESTARTS"]

# wchan symbol (or its prefix) -> the call sleeping there
_WCHAN_CALLS = (
    ("poll_schedule_timeout", "poll"),
    ("do_sys_poll", "poll"),
    ("do_select", "select"),
    ("core_sys_select", "select"),
    ("do_nanosleep", "clock_nanosleep"),
    ("hrtimer_nanosleep", "clock_nanosleep"),
    ("common_nsleep", "clock_nanosleep"),
    ("futex", "futex"),
    ("ep_poll", "epoll_wait"),
)
_STRACE = re.compile(r"resuming interrupted (\w+)")
# the calls restart_syscall resumes that always had a time limit (a futex restarts this way
# only when it had one; a sleep always has one)
TIMED_RESTARTS = frozenset({"nanosleep", "clock_nanosleep", "futex"})


def _from_wchan(wchan: str) -> str:
    w = wchan.strip()
    for prefix, call in _WCHAN_CALLS:
        if w.startswith(prefix):
            return call
    return ""


def resumed_call(strace_args: str, wchan: str = "") -> str:
    """The call ``restart_syscall`` resumes (module doc), or "". Sources, best first: the kernel's
    wait channel (``/proc/TID/wchan``: where the thread sleeps now; ``poll_schedule_timeout`` is a
    poll, ``do_nanosleep`` a sleep, ``futex_*`` a futex), then strace's own text, ``<... resuming
    interrupted NAME ...>`` (strace names the last call it saw the thread enter, which for a thread
    it has just attached to may be another one)."""
    call = _from_wchan(wchan or "")
    if call:
        return call
    m = _STRACE.search(strace_args or "")
    return m.group(1) if m else ""
