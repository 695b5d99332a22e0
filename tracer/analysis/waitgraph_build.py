"""Building the wait-for graph: one edge per way a blocked thread's wait could end.

Contract: ``GraphBuilder(rec, pvs, facts).build()`` returns the ``WaitGraph`` that
``waitgraph.build_wait_graph`` documents; it is pure (reads the recording, the process verdicts
and the probes' facts) and resolves each wait the way process_rules.resolve_wait does, plus what
the probes found: mutex owners from glibc's owner field, pthread_join targets, unix socket peers
from sock_diag, TCP peers by reversed addresses.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from .. import events as ev
from .accumulate import Recording
from .process_rules import ProcessVerdict, exit_text
from .verdict import BLOCKED, EXITED, ThreadVerdict
from .waitgraph import (GPU, OUTSIDE, Edge, Node, WaitFacts, WaitGraph, pnode, socket_inode,
                        strace_peer, tcp_reverse, tnode)
from .waits import Wait, eventfd_object

class GraphBuilder:
    def __init__(self, rec: Recording, pvs: Dict[int, ProcessVerdict], facts: WaitFacts):
        self.rec, self.pvs, self.facts = rec, pvs, facts
        self.g = WaitGraph()

    # nodes
    def plabel(self, pid: int) -> str:
        pv = self.pvs.get(pid)
        return pv.label if pv is not None else f"pid {pid}"

    def tlabel(self, pid: int, tid: int) -> str:
        return self.plabel(pid) if tid == pid else f"thread {tid} of {self.plabel(pid)}"

    def process(self, pid: int) -> str:
        nid = pnode(pid)
        if nid not in self.g.nodes:
            p = self.rec.processes.get(pid)
            gone = exit_text(p) if p is not None else None
            inside = pid in self.pvs
            self.g.nodes[nid] = Node(
                nid, "process" if inside else OUTSIDE,
                self.plabel(pid) if inside else f"pid {pid} (outside the traced tree)",
                pid=pid, state="exited" if gone else "", dead=gone is not None,
                dead_text=_dead_text(gone))
        return nid

    def thread(self, pid: int, tid: int, tv: Optional[ThreadVerdict] = None) -> str:
        nid = tnode(tid)
        if nid in self.g.nodes:
            return nid
        p = self.rec.processes.get(pid)
        gone = exit_text(p) if p is not None else None
        t = self.rec.threads.get((pid, tid))
        n = Node(nid, "thread", self.tlabel(pid, tid), pid=pid, tid=tid,
                 state=tv.verdict if tv else ("exited" if gone else "unknown"),
                 decides=tv.decides if tv else True)
        if gone is not None:
            n.dead, n.state, n.dead_text = True, "exited", _dead_text(gone)
        elif t is not None and t.exited_at is not None:
            n.dead, n.state, n.dead_text = True, "exited", "has exited"
        self.g.nodes[nid] = n
        self.process(pid)
        return nid

    def special(self, nid: str, kind: str, label: str, dead: bool = False,
                dead_text: str = "") -> str:
        if nid not in self.g.nodes:
            self.g.nodes[nid] = Node(nid, kind, label, state=kind, dead=dead,
                                     dead_text=dead_text)
        return nid

    def edge(self, src: str, dst: str, kind: str, obj: str, text: str) -> None:
        self.g.edges.append(Edge(src, dst, kind, obj, text))

    # edges
    def build(self) -> WaitGraph:
        for pid, pv in sorted(self.pvs.items()):
            for tid, tv in sorted(pv.threads.items()):
                self.thread(pid, tid, tv)
        for pid, pv in sorted(self.pvs.items()):
            if pv.verdict == EXITED:
                continue
            pedges = {e.tid: e for e in pv.waits_on}
            for tid, tv in sorted(pv.threads.items()):
                if tv.verdict == BLOCKED and tv.wait is not None:
                    self.wait_edges(pid, tid, tv.wait, pedges.get(tid))
        self.g.settle()
        return self.g

    def wait_edges(self, pid: int, tid: int, w: Wait, pedge: object) -> None:
        src = tnode(tid)
        who = self.g.nodes[src].label
        kind = getattr(pedge, "kind", None)
        if kind == "gpu":
            self.edge(src, self.special(GPU, GPU, "the GPU"), "gpu", "GPU",
                      f"{who} waits for the GPU ({getattr(pedge, 'what', '')})")
            return
        if kind == "collective":
            for q in getattr(pedge, "pids", []):
                self.edge(src, self.process(q), "collective", "collective",
                          f"{who} waits in a collective for {self.plabel(q)}")
            return
        if w.call == "futex":
            self.futex_edges(pid, src, who, w)
        elif w.call in ("wait4", "waitid"):
            kids = [w.child] if w.child is not None and w.child > 0 else sorted(
                c for c, p in self.rec.processes.items() if p.info and p.info.ppid == pid)
            for c in kids:
                self.edge(src, self.process(c), "child", w.call,
                          f"{who} waits for {self.plabel(c)} in {w.call}")
            if not kids:
                self.outside(src, who, w)
        elif w.fd_kind in ("pipe", "fifo") and w.fd_target:
            self.pipe_edges(pid, src, who, w)
        elif w.fd_kind == "eventfd" and self.eventfd_of(pid, w):
            self.eventfd_edges(pid, src, who, w, self.eventfd_of(pid, w) or "")
        elif w.fd_kind in ("unix", "socket", "tcp", "tcpv6") and w.fd_target:
            self.socket_edges(pid, src, who, w)
        else:
            self.outside(src, who, w)

    def outside(self, src: str, who: str, w: Wait, why: str = "") -> None:
        self.edge(src, self.special(OUTSIDE, OUTSIDE, "outside the traced tree"), "outside",
                  w.describe(), f"{who} waits in {w.describe()}{why}")

    def futex_edges(self, pid: int, src: str, who: str, w: Wait) -> None:
        addr = w.futex_addr or 0
        fo = self.facts.owner(pid, w.futex_addr)
        if fo is not None and fo.owner_tid and fo.kind in ("mutex", "pi-mutex", "join"):
            dst = self.owner_node(fo)
            holder = self.g.nodes[dst].label
            if fo.kind == "join":
                self.edge(src, dst, "join", f"futex 0x{addr:x}",
                          f"{who} waits for {holder} to exit (pthread_join, futex 0x{addr:x})")
            else:
                shared = "process-shared " if fo.shared else ""
                pi = "PI " if fo.kind == "pi-mutex" else ""
                self.edge(src, dst, "mutex", f"mutex 0x{addr:x}",
                          f"{who} waits for {shared}{pi}mutex 0x{addr:x} held by {holder}")
            return
        waker = self.rec.futex_wakers.get(addr)
        if waker is not None and waker[1] != int(src[1:]):
            dst = self.thread(*waker)
            self.edge(src, dst, "futex", f"futex 0x{addr:x}",
                      f"{who} waits on futex 0x{addr:x}, last woken by {self.g.nodes[dst].label}")
            return
        why = f" ({fo.why})" if fo is not None and fo.why else ""
        self.edge(src, self.process(pid), "futex", f"futex 0x{addr:x}",
                  f"{who} waits on futex 0x{addr:x} with unknown holder{why}")

    def owner_node(self, fo: ev.FutexOwner) -> str:
        tid = fo.owner_tid or 0
        pid = fo.owner_pid
        if pid is None:        # not found at probe time: was it a thread of the recording?
            pid = next((p for (p, t) in self.rec.threads if t == tid), None)
            if pid is None and tid in self.rec.processes:
                pid = tid
        if pid is None:
            return self.special(tnode(tid), "gone", f"thread {tid}", dead=True,
                                dead_text="no longer exists (it exited holding the lock)")
        if pid not in self.pvs:
            return self.special(tnode(tid), OUTSIDE,
                                f"thread {tid} of pid {pid} (outside the traced tree)")
        return self.thread(pid, tid, self.pvs[pid].threads.get(tid))

    def holders(self, target: str, mode: str) -> List[int]:
        out = []
        for pid, p in self.rec.processes.items():
            if p.info is None or exit_text(p) is not None:
                continue
            if any(f.target == target and mode in (f.mode or "rw") for f in p.info.fds):
                out.append(pid)
        return sorted(out)

    def pipe_edges(self, pid: int, src: str, who: str, w: Wait) -> None:
        target = w.fd_target or ""
        writers = self.holders(target, "w")
        if not writers:
            self.outside(src, who, w, f"; no traced process holds the write end of {target}")
            return
        only = "only writer is" if len(writers) == 1 else "writers include"
        for q in writers:
            name = "this process" if q == pid else self.plabel(q)
            self.edge(src, self.process(q), "pipe", target,
                      f"{who} reads {target} whose {only} {name}")

    def eventfd_of(self, pid: int, w: Wait) -> Optional[str]:
        p = self.rec.processes.get(pid)
        return eventfd_object(p.info.fds if p is not None and p.info else [], w)

    def eventfd_edges(self, pid: int, src: str, who: str, w: Wait, obj: str) -> None:
        """Any holder of the eventfd can write it: an edge to each other process holding it, and
        to this process when it holds it and has another thread (alive when that one runs).
        Held by no other traced process, it is an outside wait: the kernel (io_uring, aio, KVM)
        may signal an eventfd too."""
        holders = self.holders(obj, "")
        others = [q for q in holders if q != pid]
        if not others:
            why = (f"; no other traced process holds {obj} (another thread or the kernel may "
                   "signal it)" if holders else f"; no traced process holds {obj}")
            self.outside(src, who, w, why)
            return
        tid = self.g.nodes[src].tid
        if pid in holders and any(n.tid != tid for n in self.g.threads_of(pid)):
            others.append(pid)      # last: a proof walks the other processes first
        for q in others:
            name = "this process" if q == pid else self.plabel(q)
            self.edge(src, self.process(q), "eventfd", obj,
                      f"{who} waits in {w.call} on {obj}, which {name} holds and could write")

    def socket_edges(self, pid: int, src: str, who: str, w: Wait) -> None:
        target = w.fd_target or ""
        info = self.rec.processes[pid].info
        fds = info.fds if info else []
        rev = tcp_reverse(target)
        if rev is not None:
            peers = sorted(q for q, p in self.rec.processes.items() if p.info is not None
                           and exit_text(p) is None and any(f.target == rev for f in p.info.fds))
            for q in peers:
                self.edge(src, self.process(q), "socket", target,
                          f"{who} reads {target} whose peer is {self.plabel(q)}")
            if not peers:
                self.outside(src, who, w, " (the peer is outside the traced tree)")
            return
        inode = socket_inode(target, fds, w.fd)
        peer = strace_peer(target) or (self.facts.unix_peers.get(inode) if inode else None)
        if peer is None:
            self.outside(src, who, w, " (peer unknown)")
            return
        peers = sorted(q for q, p in self.rec.processes.items() if p.info is not None
                       and exit_text(p) is None and any(f.inode == peer for f in p.info.fds))
        for q in peers:
            self.edge(src, self.process(q), "socket", target,
                      f"{who} reads {target} whose peer socket {peer} is held by {self.plabel(q)}")
        for q in self.facts.outside.get(peer, []):
            self.edge(src, self.process(q), "socket", target,
                      f"{who} reads {target} whose peer socket {peer} is held by pid {q} "
                      "(outside the traced tree)")
        if not peers and peer not in self.facts.outside:
            gone = self.special(f"S{peer}", "gone", f"socket {peer}", dead=True,
                                dead_text="no process holds any more")
            self.edge(src, gone, "socket", target,
                      f"{who} reads {target} whose peer is socket {peer}")


def _dead_text(gone: Optional[str]) -> str:
    if not gone:
        return ""
    return ("was " + gone) if gone.startswith("killed") else gone


