"""The file locks the traced tree holds or waits for (/proc/locks), for the wait-for graph.

Contract: ``file_locks_probe(pids, analyzer)`` is an ``EndProbe``: it reads /proc/locks once
(linux/file_locks.py) and returns a ``FileLock`` event for every lock line of a process of
``pids``, and for every holder (whoever it is, OFD locks included) of a lock that one of them
waits for: a thread blocked in flock() or fcntl(F_SETLKW) then waits for that holder. Nothing
readable: no events.
"""
from __future__ import annotations

import time
from typing import List, Optional

from ... import events as ev
from ...linux.file_locks import read_locks


def file_locks_probe(pids: List[int], analyzer: Optional[object] = None,
                     root: str = "/proc") -> List[ev.Event]:
    lines = read_locks(root)
    mine = set(pids)
    wanted = {(ln.lock_id, ln.inode) for ln in lines if ln.waiting and ln.pid in mine}
    ts = time.time()
    return [ev.FileLock(ts=ts, pid=ln.pid, inode=ln.inode, dev=ln.dev, kind=ln.kind,
                        access=ln.access, waiting=ln.waiting, lock_id=ln.lock_id)
            for ln in lines if ln.pid in mine or (ln.lock_id, ln.inode) in wanted]
