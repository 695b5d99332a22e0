"""How far strace has got attaching: it seizes its ``-p`` pids in the order given, then
handles each task's attach stop (state ``t``), printing the call a task sits in; only then does
it see the task. On a busy 2-core VM, 5,001 processes were seized in 0.5 s and the last one
handled 8 s later: what came before its first line counted as time outside syscalls, and a tree
of processes in pause() looked busy (issue 46 item 9).

Contract: ``wait_attached(tracer, pids, deadline)`` waits (polling /proc/PID/status every 5 ms,
never past ``deadline``, a ``time.monotonic()`` value) until each of ``pids`` is traced by
``tracer`` and out of its attach stop, or gone; it returns the pids not there yet (``[]``: all
are). ``not_attached(tracer, pids)`` reads them once; ``never_attached`` makes the ObserveError
of each still not attached at the end. Reads /proc only.
"""
from __future__ import annotations

import time
from typing import Collection, List, Optional, Tuple

from ... import events as ev
from ...linux import procfs

__all__ = ["wait_attached", "not_attached", "never_attached"]

POLL_S = 0.005


def tracer_of(pid: int) -> Tuple[Optional[int], str]:
    """(the TracerPid of ``pid``, 0 for none, and its state letter); (None, "") when the
    process is gone or unreadable."""
    status = procfs.read_text(f"/proc/{pid}/status")
    if status is None:
        return None, ""
    tracer, state = None, ""
    for line in status.splitlines():
        if line.startswith("State:"):
            state = line.split(":", 1)[1].strip()[:1]
        elif line.startswith("TracerPid:"):
            value = line.split(":", 1)[1].strip()
            tracer = int(value) if value.isdigit() else None
            break
    return tracer, state


def _attached(tracer: int, pid: int, failed: Collection[int] = ()) -> bool:
    """Gone, or traced by ``tracer`` and past its attach stop ("t": strace has not handled
    it yet, and will print nothing of it until it has); or never to be: a zombie or a dead
    task (no attach), one another tracer holds, one strace said it could not attach
    (``failed``)."""
    if pid in failed:
        return True
    who, state = tracer_of(pid)
    return who is None or state in ("Z", "X") or (who == tracer and state != "t") \
        or who not in (0, tracer)


def wait_attached(tracer: int, pids: List[int], deadline: float,
                  running: Optional[object] = None, failed: Collection[int] = ()) -> List[int]:
    """The module doc's wait; ``running`` (a ``Popen``) ends it when strace has exited;
    ``failed``: the pids and tids strace said it could not attach (read as it runs)."""
    at = 0
    while at < len(pids):
        if _attached(tracer, pids[at], failed):
            at += 1
            continue
        if time.monotonic() >= deadline or (running is not None
                                            and running.poll() is not None):  # type: ignore
            break
        time.sleep(POLL_S)
    return [pid for pid in pids[at:] if not _attached(tracer, pid, failed)]


def not_attached(tracer: int, pids: List[int]) -> List[int]:
    """The pids of ``pids`` alive and not traced by ``tracer`` now."""
    return [pid for pid in pids if not _attached(tracer, pid)]


def never_attached(tracer: int, unattached: List[int]) -> List[ev.ObserveError]:
    """An ObserveError for each target strace had still not attached at the end: it was
    never observed (analysis/threads/observed.py: unknown, not 100% outside syscalls)."""
    left = not_attached(tracer, unattached)
    return [ev.ObserveError(ts=time.time(), source="strace", what="attach", pid=pid, why=(
        f"strace had not attached to it when the recording ended ({len(left)} of the "
        "processes still to attach)")) for pid in left]
