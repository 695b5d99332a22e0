"""Socket traffic per fd lifetime: an fd number is reused, and what one object behind it sent
says nothing of the next one's.

Contract (accumulate's, pure over ThreadStats):
- ``traffic_of(t, e, followed)``: the ``FdTraffic`` of the object behind ``e.fd`` now (a new
  one when another object is behind the number), or None past ``MAX_SOCKETS`` sockets.
- ``fd_ended(threads, e, followed)``: a ``close`` or a ``dup2``/``dup3`` onto the fd
  (``ENDS_FD``) ends that fd's lifetime in every thread of the process.
- A retired lifetime with traffic goes to ``ThreadStats.closed_sockets`` (the newest
  ``MAX_SOCKETS``): its sends are output or a keep-alive like any other (io_class.judge_output).
"""
from __future__ import annotations

from typing import Iterable, Optional, Set

from ... import events as ev
from .io_class import MAX_SOCKETS
from .stats import ThreadStats
from .traffic import FdTraffic

__all__ = ["traffic_of", "fd_ended", "ENDS_FD"]

ENDS_FD = frozenset({"close", "dup2", "dup3"})


def traffic_of(t: ThreadStats, e: ev.Syscall, followed: Set[int]) -> Optional[FdTraffic]:
    """The ``FdTraffic`` of the object behind ``e.fd`` now: the one being followed when its target
    and kind are the event's, else a new one (the old one retired: the number is reused by a close,
    a dup2/dup3 onto it, or a socket, accept or open that gets the number again); None when the
    thread follows ``MAX_SOCKETS`` sockets already. ``followed``: the fds of the process some
    thread follows traffic on (the caller's set, per process)."""
    tr = t.sockets.get(e.fd)  # type: ignore[arg-type]
    if tr is not None and (tr.target != (e.fd_target or "") or tr.kind != e.fd_kind):
        _retire(t, e.fd)  # type: ignore[arg-type]     # another object behind the number
        tr = None
    if tr is None:
        if len(t.sockets) >= MAX_SOCKETS:
            return None
        tr = t.sockets[e.fd] = FdTraffic(e.fd, e.fd_target or "", e.fd_kind)  # type: ignore
        followed.add(e.fd)  # type: ignore[arg-type]
    return tr


def fd_ended(threads: Iterable[ThreadStats], e: ev.Syscall, followed: Set[int]) -> None:
    """A ``close(fd)`` (whatever it returned: Linux closes the fd even on EINTR) or a
    ``dup2``/``dup3`` onto ``fd`` that succeeded ends that fd's lifetime in every thread of the
    process (``threads``: the process's ThreadStats); an fd no thread follows costs one set lookup
    (a process closes files all the time)."""
    fd = e.fd if e.name == "close" else e.ret
    if fd not in followed or (e.name != "close" and e.err is not None):
        return
    followed.discard(fd)
    for t in threads:
        if fd in t.sockets:
            _retire(t, fd)


def _retire(t: ThreadStats, fd: int) -> None:
    """End ``fd``'s lifetime in ``t``: with traffic, it goes to ``ThreadStats.closed_sockets``,
    which keeps the newest ``MAX_SOCKETS``."""
    tr = t.sockets.pop(fd)
    if tr.sends or tr.receives:
        if len(t.closed_sockets) >= MAX_SOCKETS:
            del t.closed_sockets[0]
        t.closed_sockets.append(tr)
