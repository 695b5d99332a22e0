"""What the end-of-recording probes found, for the wait-for graph.

Contract: ``WaitFacts.feed`` takes ``FutexOwner``, ``SocketPeers`` and ``FileLock`` events
(probes/ in record/); ``owner(pid, addr)`` is the holder read for one futex, ``unix_peers`` maps a
unix socket inode to its peer's, ``outside`` a peer inode to the pids outside the tree that hold
it, ``lock_holders(pid, inode)`` the pids holding a file lock on a file (on the node of ``pid``)
that something waits for; ``mount(pid, tid, fd)`` the file, device and mount a blocked call on
fd ``fd`` waits on (``FileMount``: record/probes/storage_waits.py), ``fuse_waiters(conn)`` the
threads blocked on a file of FUSE connection ``conn``. Inodes are node-scoped (nodes.scoped_inode: the inode itself in a
single trace). ``stacks`` holds what the stack probes found (stack_facts.py: kernel stacks,
native frames, the GIL holder), fed the events of events/stacks.py and ``PyStack``. Empty facts
are fine (replays of old traces): waits then resolve without them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ... import events as ev
from ...events.stacks import KernelStack, NativeStack, PythonRuntime
from ...linux.mounts import FUSE_DEVICE
from .nodes import scoped_inode
from .stack_facts import StackFacts

STACK_EVENTS = (KernelStack, NativeStack, PythonRuntime, ev.PyStack)


@dataclass
class WaitFacts:
    futex: Dict[Tuple[int, int], ev.FutexOwner] = field(default_factory=dict)
    unix_peers: Dict[int, int] = field(default_factory=dict)
    outside: Dict[int, List[int]] = field(default_factory=dict)
    locks: Dict[int, List[ev.FileLock]] = field(default_factory=dict)   # scoped inode -> lines
    mounts: Dict[Tuple[int, int, int], ev.FileMount] = field(default_factory=dict)
    stacks: StackFacts = field(default_factory=StackFacts)

    def feed(self, e: ev.Event) -> None:
        if isinstance(e, STACK_EVENTS):
            self.stacks.feed(e)
        elif isinstance(e, ev.FutexOwner):
            self.futex[(e.pid, e.addr)] = e
        elif isinstance(e, ev.SocketPeers):
            # A trace file turns the int keys into strings (JSON objects): convert back.
            pid = e.pid
            self.unix_peers.update({scoped_inode(pid, int(k)): scoped_inode(pid, int(v))
                                    for k, v in (e.peers or {}).items()})
            self.outside.update({scoped_inode(pid, int(k)): list(v)
                                 for k, v in (e.outside or {}).items()})
        elif isinstance(e, ev.FileMount) and len(self.mounts) < 4096:
            self.mounts[(e.pid, e.tid, e.fd)] = e
        elif isinstance(e, ev.FileLock) and len(self.locks) < 4096:
            got = self.locks.setdefault(scoped_inode(e.pid if e.pid > 0 else 0, e.inode), [])
            if len(got) < 64:
                got.append(e)

    def lock_holders(self, pid: int, inode: int) -> List[int]:
        """Pids holding a lock (not waiting) on file ``inode`` as /proc/locks showed it; -1 for an
        OFD lock, whose holder /proc/locks does not name."""
        lines = self.locks.get(scoped_inode(pid, inode), []) + self.locks.get(inode, [])
        return sorted({ln.pid for ln in lines if not ln.waiting})

    def mount(self, pid: int, tid: int, fd: Optional[int]) -> Optional[ev.FileMount]:
        return None if fd is None else self.mounts.get((pid, tid, fd))

    def fuse_waiters(self, conn: Optional[int]) -> List[ev.FileMount]:
        """The blocked calls on files of FUSE connection ``conn`` (not on /dev/fuse itself)."""
        return [m for m in self.mounts.values() if conn is not None and m.fuse_conn == conn
                and m.path != FUSE_DEVICE]

    def owner(self, pid: int, addr: Optional[int]) -> Optional[ev.FutexOwner]:
        if addr is None:
            return None
        return self.futex.get((pid, addr))
