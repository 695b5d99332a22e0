"""Waits on fds between processes, resolved into wait-for edges (build.py's resolution's part
that follows fds). Contract: ``FdWaits`` is a mixin of build.py's builder (its node and edge
helpers); each method resolves one kind of wait of thread ``tid`` of ``pid`` into the
``ResolvedWait`` a process's ``waits_on`` shows:
- ``file_lock``: flock/fcntl(F_SETLKW), the processes holding a lock on the file;
- ``pipe``: a read waits for the pipe's writers, a write (the pipe is full) for its readers;
- ``eventfd``: every other holder, and the process itself when another of its threads could
  write it;
- ``socket``: the process at the other end (TCP by reversed addresses, unix by peer inode);
- ``storage``: a call on a file or device on a FUSE, network or device file system (or in D
  state), as the storage-waits probe found it: the FUSE daemon, else owed from outside; and
  ``fuse_server``: a daemon in read(/dev/fuse) while a reader waits on its mount owes the reply.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ... import events as ev
from ...linux.kstack import frame_function
from ...linux.mounts import FUSE_DEVICE, PAGE_FAULT_FD, fs_kind
from ..vocab.nodes import real_inode, real_id, scoped_inode
from ..vocab.verdict import D_RULE
from ..vocab.waits import Wait, eventfd_id_target
from .graph import OUTSIDE, EdgeKind, NodeKind


@dataclass
class ResolvedWait:
    """One waiting thread's wait, as its process's evidence shows it (module doc)."""
    tid: int
    kind: EdgeKind
    what: str
    pids: List[int] = field(default_factory=list)
    inside: bool = False          # every edge stays inside the process
    ended: bool = False           # the wait returns: what it waits for has happened (a child
                                  # that exited), no edge

    def to_json(self) -> Dict[str, object]:
        return {"tid": self.tid, "kind": str(self.kind), "what": self.what, "pids": self.pids}



WRITE_CALLS = frozenset({"write", "writev", "pwrite64", "pwritev", "pwritev2", "splice",
                          "sendfile"})



class FdWaits:
    """The fd-following resolutions of build.py's builder (module doc)."""

    def file_lock(self, pid: int, tid: int, src: str, who: str, w: Wait) -> ResolvedWait:
        """flock/fcntl(F_SETLKW): the processes holding a lock on the file, from /proc/locks
        (live: the probe's FileLock lines, matched by the file's inode) or from the lock calls
        the log showed (imports). The process's own lock (another fd of it) is any of its
        threads' to release."""
        path = w.fd_target or f"fd {w.fd}"
        inode = w.target.inode
        p = self.rec.processes.get(pid)
        for f in (p.info.fds if p is not None and p.info else []):
            if f.fd == w.fd and f.inode:
                inode = f.inode
        holders = self.inp.facts.lock_holders(pid, inode) if inode else []
        if not holders and w.fd_target in self.rec.lock_holders:
            holders = [self.rec.lock_holders[w.fd_target][0]]
        known = [q for q in holders if q > 0]
        if not known:
            why = " (an OFD lock: /proc/locks does not name its holder)" if holders else \
                " (no holder in /proc/locks or in the log)"
            return self.outside(tid, src, who, w, f"waits for a lock on {path}; its holder is "
                                "unknown" + why, why)
        for q in known:
            name = "this process (another fd of it)" if q == pid else self.plabel(q)
            self.edge(src, self.process(q, any_thread=q == pid), EdgeKind.LOCK, path,
                      f"{who} waits for the lock on {path} held by {name}")
        others = [q for q in known if q != pid]
        return ResolvedWait(tid, EdgeKind.LOCK, f"waits for the lock on {path} held by "
                            + (self.refs(others) if others else "this process"), others,
                            inside=not others)

    def pipe(self, pid: int, tid: int, src: str, who: str, w: Wait) -> ResolvedWait:
        """A read waits for the pipe's writers; a write, blocked because the pipe is full, for
        its readers."""
        target = w.fd_target
        writes = w.call in WRITE_CALLS
        end, does, role = ("r", "writes", "reader") if writes else ("w", "reads", "writer")
        ends = self.fdx.holders(target, end, near=pid)
        if not ends:
            return self.outside(tid, src, who, w,
                                f"{does} {target}; no traced process holds its "
                                f"{'read' if writes else 'write'} end",
                                f"; no traced process holds the {'read' if writes else 'write'}"
                                f" end of {target}")
        only = f"only {role} is" if len(ends) == 1 else f"{role}s include"
        for q in ends:
            name = "this process" if q == pid else self.plabel(q)
            full = " (the pipe is full)" if writes else ""
            self.edge(src, self.process(q, any_thread=q == pid), EdgeKind.PIPE, target,
                      f"{who} {does} {target}{full} whose {only} {name}")
        others = [q for q in ends if q != pid]
        if others:
            return ResolvedWait(tid, EdgeKind.PIPE, f"{does} {target}; {role}s: "
                                + self.refs(others), others)
        return ResolvedWait(tid, EdgeKind.PIPE,
                            f"{does} {target} whose only {role} is this process", inside=True)

    def eventfd_of(self, pid: int, w: Wait) -> Optional[str]:
        p = self.rec.processes.get(pid)
        return eventfd_id_target(p.info.fds if p is not None and p.info else [], w)

    def eventfd(self, pid: int, tid: int, src: str, who: str, w: Wait,
                obj: str) -> ResolvedWait:
        """Any holder of the eventfd can write it: each other process holding it, and this
        process when it holds it and has another thread. Held by no other traced process, it is
        an outside wait: the kernel (io_uring, aio, KVM) may signal an eventfd too."""
        holders = self.fdx.holders(obj, near=pid)
        others = [q for q in holders if q != pid]
        mine = pid in holders
        if not others:
            why = ("only this process holds it (another thread of it or a kernel producer such "
                   "as io_uring or aio could signal it)" if mine else "no traced process holds it")
            edge_why = (f"; no other traced process holds {obj} (another thread or the kernel "
                        "may signal it)" if mine else f"; no traced process holds {obj}")
            return self.outside(tid, src, who, w, f"waits in {w.call} on {obj}; {why}", edge_why)
        ends = list(others)
        if mine and any(n.tid != tid for n in self.g.threads_of(pid)):
            ends.append(pid)        # last: a proof walks the other processes first
        for q in ends:
            name = "this process" if q == pid else self.plabel(q)
            self.edge(src, self.process(q, any_thread=q == pid), EdgeKind.EVENTFD, obj,
                      f"{who} waits in {w.call} on {obj}, which {name} holds and could write")
        return ResolvedWait(tid, EdgeKind.EVENTFD, f"waits in {w.call} on {obj}; other holders: "
                            + self.refs(others)
                            + ("; this process holds it too" if mine else ""), others)

    def socket(self, pid: int, tid: int, src: str, who: str, w: Wait) -> ResolvedWait:
        target = w.target
        rev = target.reversed()
        if rev is not None:
            peers = [q for q in self.fdx.holders(rev, near=pid) if q != pid]
            for q in peers:
                self.edge(src, self.process(q), EdgeKind.SOCKET, target.text,
                          f"{who} reads {target.text} whose peer is {self.plabel(q)}")
            if not peers:
                return self.outside(tid, src, who, w, f"waits on {target.text} (peer outside "
                                    "the traced tree or unknown)",
                                    " (the peer is outside the traced tree)")
            return ResolvedWait(tid, EdgeKind.SOCKET, f"reads {target.text}; peer: "
                                + self.refs(peers), peers)
        inode = target.inode
        p = self.rec.processes.get(pid)
        for f in (p.info.fds if p is not None and p.info else []):
            if f.fd == w.fd and f.inode:
                inode = f.inode
        inode = scoped_inode(pid, inode) if inode else None
        peer = (scoped_inode(pid, target.peer_inode) if target.peer_inode
                else self.inp.facts.unix_peers.get(inode) if inode else None)
        if peer is None:
            return self.outside(tid, src, who, w, f"waits on {target.text} (peer outside the "
                                "traced tree or unknown)", " (peer unknown)")
        peers = [q for q in self.fdx.inode_holders(peer) if q != pid]
        for q in peers:
            self.edge(src, self.process(q), EdgeKind.SOCKET, target.text,
                      f"{who} reads {target.text} whose peer socket {real_inode(peer)} is held "
                      f"by {self.plabel(q)}")
        outside = self.inp.facts.outside.get(peer, [])
        for q in outside:
            self.edge(src, self.process(q), EdgeKind.SOCKET, target.text,
                      f"{who} reads {target.text} whose peer socket {real_inode(peer)} is held "
                      f"by {self.ref(q)} (outside the traced tree)")
        if not peers and not outside:
            gone = self.special(f"G{peer}", NodeKind.GONE, f"socket {real_inode(peer)}",
                                dead=True, dead_text="no process holds any more")
            self.edge(src, gone, EdgeKind.SOCKET, target.text,
                      f"{who} reads {target.text} whose peer is socket {real_inode(peer)}")
        if peers:
            return ResolvedWait(tid, EdgeKind.SOCKET, f"reads {target.text}; peer: "
                                + self.refs(peers), peers)
        return ResolvedWait(tid, EdgeKind.SOCKET if not outside else EdgeKind.OUTSIDE,
                            f"waits on {target.text} (peer outside the traced tree or unknown)")

    # ------------------------------------------------------------------ storage and devices
    def storage(self, pid: int, tid: int, src: str, who: str, w: Wait) -> Optional[ResolvedWait]:
        """A call on a file or device blocked on its file system or device (module doc), or None
        when the probe found nothing that says so (a FIFO, a local file in S state: resolved as
        before)."""
        m = self.inp.facts.mount(pid, tid, w.fd)
        tv = self.inp.threads.get(pid, {}).get(tid)
        if m is None and w.fd is None and tv is not None and tv.rule == D_RULE:
            m = self.inp.facts.mount(pid, tid, PAGE_FAULT_FD)    # a fault on a mapped file
        if m is None:
            return self.uninterruptible(pid, tid, src, who, w) or self.device_path(
                tid, src, who, w)
        if m.path == FUSE_DEVICE:
            return self.fuse_server(tid, src, who, w, m)
        kind = fs_kind(m.fstype)
        if kind == "local" and m.state != "D":
            return None
        self.g.nodes[src].owed = True
        where = _mount_text(m)
        how = f"{w.call}({w.fd}<{m.path}>)" if m.fd != PAGE_FAULT_FD else \
            f"a page fault on {m.path} ({m.call})"
        long = self.waited(w)
        servers = [q for q in m.servers if q > 0 and q != pid]
        if kind == "fuse" and servers:
            for q, state in zip(m.servers, m.server_states or [""] * len(m.servers)):
                if q <= 0 or q == pid:
                    continue
                now = f"; it is {_state_words(state)}" if q not in self.procs and state else ""
                self.edge(src, self.process(q), EdgeKind.STORAGE, m.path,
                          f"{who} is blocked in {how} on {where}{long}: its FUSE daemon "
                          f"{self.plabel(q)} owes the reply (it holds /dev/fuse connection "
                          f"{m.fuse_conn}){now}")
            return ResolvedWait(tid, EdgeKind.STORAGE, f"blocked in {how} on {where}{long}; "
                                f"its FUSE daemon: {self.refs(servers)}", servers)
        owner = {"fuse": "its FUSE daemon (not found on this host)",
                 "network": f"the server {m.source}" if m.source else "the file server",
                 "device": "the driver behind it"}.get(kind, "the disk or its driver")
        what = (f"{'device wait: ' if kind == 'device' else ''}blocked in {how} on {where}"
                f"{long}; {owner} has not answered")
        self.edge(src, self.special(OUTSIDE, NodeKind.OUTSIDE, "outside the traced tree"),
                  EdgeKind.STORAGE, m.path, f"{who} {what}")
        return ResolvedWait(tid, EdgeKind.OUTSIDE, what)

    def uninterruptible(self, pid: int, tid: int, src: str, who: str,
                        w: Wait) -> Optional[ResolvedWait]:
        """A thread in D state all the window (threads/stacks.py's rule; no fd the probe could
        follow: a path call, a page fault on a mapped file) waits for the kernel to complete
        I/O or a driver's work: owed, never input. None for any other thread."""
        tv = self.inp.threads.get(pid, {}).get(tid)
        if tv is None or tv.rule != D_RULE:
            return None
        self.g.nodes[src].owed = True
        frames = self.inp.facts.stacks.kernel.get((pid, tid))
        fault = frames is not None and any(frame_function(f) in _FAULT_FRAMES
                                           for f in frames.frames)
        where = "a page fault on a mapped file" if fault else w.call
        what = (f"in uninterruptible sleep (D) in {where}{self.waited(w)}: the kernel has not "
                "completed the I/O or driver work it waits for (a storage or device wait)")
        self.edge(src, self.special(OUTSIDE, NodeKind.OUTSIDE, "outside the traced tree"),
                  EdgeKind.STORAGE, w.call, f"{who} is {what}")
        return ResolvedWait(tid, EdgeKind.OUTSIDE, what)

    def device_path(self, tid: int, src: str, who: str, w: Wait) -> Optional[ResolvedWait]:
        """Without the probe's facts (an imported strace log), a read or write that blocks on
        a device or a kernel file by its path (/dev/*, /sys/*, debugfs, /proc/*) is a device
        wait, owed by the driver; never a terminal, an input device, a tun device, /dev/fuse
        (a daemon's wait for requests) or /dev/shm (tmpfs). None for anything else."""
        path = w.target.path or ""
        if not path.startswith(_DEVICE_PATHS) or path.startswith(_NOT_DEVICES) \
                or w.fd_kind in ("tty", "null", "fuse"):
            return None
        self.g.nodes[src].owed = True
        what = (f"device wait: blocked in {w.call}({w.fd}<{path}>){self.waited(w)}; the driver "
                "behind it has not answered")
        self.edge(src, self.special(OUTSIDE, NodeKind.OUTSIDE, "outside the traced tree"),
                  EdgeKind.STORAGE, path, f"{who} {what}")
        return ResolvedWait(tid, EdgeKind.OUTSIDE, what)

    def fuse_server(self, tid: int, src: str, who: str, w: Wait,
                    m: ev.FileMount) -> Optional[ResolvedWait]:
        """A FUSE daemon in read(/dev/fuse) waits for its next request: idle, unless threads
        wait on its mount (the probe found them blocked on a file of its connection): then it
        owes them their reply and does not work on it. None when nothing is owed."""
        owed = [x for x in self.inp.facts.fuse_waiters(m.fuse_conn) if x.pid != m.pid]
        if not owed or w.call not in ("read", "readv"):
            return None
        self.g.nodes[src].owed = True
        them = ", ".join(f"thread {real_id(x.tid)} of {self.ref(x.pid)} in "
                         + (f"{x.call}({x.path})" if x.fd != PAGE_FAULT_FD
                            else f"a page fault on {x.path}") for x in owed[:3])
        if len(owed) > 3:
            them += f" and {len(owed) - 3} more"
        what = (f"waits in {w.call}(/dev/fuse) for its next request of FUSE connection "
                f"{m.fuse_conn}, while {them} waits for its reply: the request it was given is "
                "not being answered")
        self.edge(src, self.special(OUTSIDE, NodeKind.OUTSIDE, "outside the traced tree"),
                  EdgeKind.STORAGE, FUSE_DEVICE, f"{who} {what}")
        return ResolvedWait(tid, EdgeKind.OUTSIDE, what)

    def waited(self, w: Wait) -> str:
        """" for 12.3 s" (since the call began, where known), or " for at least 5.0 s (since
        before the recording began)" for a call it was in at the attach."""
        rec = self.rec
        if w.since is not None and rec.end > w.since > rec.start + 0.05:
            return f" for {rec.end - w.since:.1f} s"
        if w.whole_window or w.since is not None:
            return f" for at least {rec.window:.1f} s (since before the recording began)"
        return ""


_DEVICE_PATHS = ("/dev/", "/sys/", "/proc/")
_NOT_DEVICES = ("/dev/input/", "/dev/net/tun", "/dev/pts/", "/dev/tty", "/dev/console",
                "/dev/ptmx", "/dev/null", "/dev/fuse", "/dev/shm/", "/dev/mqueue/")
# kernel frames of a page fault that reads a mapped file in (mmap'd weights on NFS or FUSE)
_FAULT_FRAMES = frozenset({"filemap_fault", "handle_mm_fault", "exc_page_fault",
                           "do_user_addr_fault", "fuse_readahead", "nfs_read_folio"})


def _mount_text(m: ev.FileMount) -> str:
    """"the fuse mount /mnt/w (hangtrace-fusefs)"; "an unknown mount" without one."""
    if not m.fstype:
        return "an unknown mount"
    src = f" ({m.source})" if m.source and m.source != m.fstype else ""
    return f"the {m.fstype} mount {m.mountpoint}{src}"


def _state_words(state: str) -> str:
    """"S in read(/dev/fuse)" -> "asleep (S) in read(/dev/fuse)"."""
    head, _, rest = state.partition(" ")
    words = {"S": "asleep (S)", "D": "in uninterruptible sleep (D)", "R": "running (R)",
             "T": "stopped (T)", "Z": "a zombie (Z)", "gone": "gone"}.get(head, head)
    return f"{words} {rest}".strip()
