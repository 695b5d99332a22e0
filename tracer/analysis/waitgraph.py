"""The wait-for graph of the traced tree and the proof of a deadlock (a cycle or a dead end).

Contract (pure functions of the recording, the process verdicts and the probes' facts):
- ``WaitFacts`` collects what the end-of-recording probes found (``FutexOwner``, ``SocketPeers``
  events); empty facts are fine (replays of old traces): waits then resolve as before.
- ``build_wait_graph(rec, pvs, facts)`` gives a ``WaitGraph``: one node per thread of the tree,
  one per process (meaning "some thread of it": a pipe's writer, a child in wait4, the holder of
  a lock that records no owner), plus the GPU, the outside world and things that are gone. Every
  thread blocked without timeout gets edges to what could end its wait (alternatives: the wait
  ends when any of them acts), each labelled with the object (mutex/futex address, pipe or
  socket inode, wait4) and a sentence naming tids and pids.
- A fixpoint marks what can still act: a thread that is not blocked, a blocked thread with an
  edge to something that can act, a process with such a thread, the GPU, the outside. Blocked
  threads left over are ``stuck``: nothing running can ever end their waits.
- ``WaitGraph.prove(start_tids)`` walks from a stuck thread along stuck edges to the first node
  seen twice (``cycle``: "T1 waits for mutex 0x.. held by T2; T2 waits for mutex 0x.. held by
  T1"), to something dead (``dead-end``: an exited or killed process, a zombie, a thread that no
  longer exists), or around a process whose every thread waits on locks with no recorded holder
  (``closed``: no thread of it runs to wake the others).
- ``to_json()`` is the report's ``wait_graph``: {"nodes", "edges", "cycle", "proof"}.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Set, Tuple

from .. import events as ev
from .accumulate import Recording
from .process_rules import ProcessVerdict, exit_text
from .verdict import BLOCKED, EXITED, ThreadVerdict
from .waits import Wait

GPU, OUTSIDE = "gpu", "outside"


# --------------------------------------------------------------------------- facts
@dataclass
class WaitFacts:
    """What the end-of-recording probes found; ``feed`` takes their events."""
    futex: Dict[Tuple[int, int], ev.FutexOwner] = field(default_factory=dict)
    unix_peers: Dict[int, int] = field(default_factory=dict)
    outside: Dict[int, List[int]] = field(default_factory=dict)

    def feed(self, e: ev.Event) -> None:
        if isinstance(e, ev.FutexOwner):
            self.futex[(e.pid, e.addr)] = e
        elif isinstance(e, ev.SocketPeers):
            # A trace file turns the int keys into strings (JSON objects): convert back.
            self.unix_peers.update({int(k): int(v) for k, v in (e.peers or {}).items()})
            self.outside.update({int(k): list(v) for k, v in (e.outside or {}).items()})

    def owner(self, pid: int, addr: Optional[int]) -> Optional[ev.FutexOwner]:
        if addr is None:
            return None
        return self.futex.get((pid, addr))


def socket_inode(target: str, fds: Iterable[ev.FdInfo], fd: Optional[int]) -> Optional[int]:
    """The inode of a socket from its fd (the fd table) or its target text "UNIX-STREAM:[12]",
    "UNIX-STREAM:[12,/path]", "UNIX-STREAM:[12->13]"."""
    for f in fds:
        if f.fd == fd and f.inode:
            return f.inode
    if "[" in target:
        inside = target[target.find("[") + 1:target.rfind("]")]
        first = inside.split("->")[0].split(",")[0]
        if first.isdigit():
            return int(first)
    return None


def strace_peer(target: str) -> Optional[int]:
    """The peer inode strace -yy prints for a connected unix socket: UNIX-STREAM:[a->b]."""
    if "->" not in target or not target.startswith("UNIX"):
        return None
    peer = target[target.find("->") + 2:target.rfind("]")].split(",")[0]
    return int(peer) if peer.isdigit() else None


def tcp_reverse(target: str) -> Optional[str]:
    """"TCP:[a->b]" -> "TCP:[b->a]": the target the peer's fd shows, when both ends are ours."""
    for proto in ("TCP:[", "TCPv6:["):
        if target.startswith(proto) and "->" in target:
            a, _, b = target[len(proto):-1].partition("->")
            return f"{proto}{b}->{a}]"
    return None


# --------------------------------------------------------------------------- graph
@dataclass
class Node:
    id: str
    kind: str                  # thread, process, gpu, outside, gone
    label: str
    pid: Optional[int] = None
    tid: Optional[int] = None
    state: str = ""            # thread verdict, "exited", "zombie", "gone", ...
    dead: bool = False         # can never act again (exited, killed, zombie, gone)
    dead_text: str = ""        # "was killed by SIGKILL (zombie, not reaped)"
    decides: bool = True       # a thread that may decide its process's verdict


@dataclass
class Edge:
    src: str
    dst: str
    kind: str                  # mutex, join, futex, pipe, socket, child, gpu, collective, outside
    obj: str                   # "mutex 0x7f..", "pipe:[123]", "wait4", ...
    text: str                  # a sentence naming both ends

    def to_json(self) -> Dict[str, str]:
        return {"src": self.src, "dst": self.dst, "kind": self.kind, "object": self.obj,
                "text": self.text}


@dataclass
class Proof:
    kind: str                  # cycle, dead-end, closed
    path: List[Edge]           # from the start thread on
    cycle: List[str]           # node ids of the cycle (cycle, closed); [] for a dead end
    text: str

    def to_json(self) -> Dict[str, object]:
        return {"kind": self.kind, "text": self.text, "cycle": self.cycle,
                "path": [e.to_json() for e in self.path]}


def tnode(tid: int) -> str:
    return f"T{tid}"


def pnode(pid: int) -> str:
    return f"P{pid}"


@dataclass
class WaitGraph:
    nodes: Dict[str, Node] = field(default_factory=dict)
    edges: List[Edge] = field(default_factory=list)
    live: Set[str] = field(default_factory=set)
    proof: Optional[Proof] = None

    # ------------------------------------------------------------------ queries
    def out(self, nid: str) -> List[Edge]:
        return [e for e in self.edges if e.src == nid]

    def threads_of(self, pid: int) -> List[Node]:
        return sorted((n for n in self.nodes.values() if n.kind == "thread" and n.pid == pid),
                      key=lambda n: (n.tid != pid, n.tid))

    @property
    def stuck(self) -> List[str]:
        """Blocked threads that nothing running can ever unblock (module doc)."""
        srcs = {e.src for e in self.edges}
        return sorted((n for n in srcs if n not in self.live
                       and self.nodes[n].kind == "thread" and not self.nodes[n].dead),
                      key=lambda n: (self.nodes[n].pid or 0, self.nodes[n].tid or 0))

    # ------------------------------------------------------------------ fixpoint
    def settle(self) -> None:
        """Compute ``live`` (module doc): least fixpoint, so cycles stay stuck."""
        waiting = {e.src for e in self.edges}
        live = {nid for nid, n in self.nodes.items() if not n.dead and (
            n.kind in (GPU, OUTSIDE) or (n.kind == "thread" and nid not in waiting))}
        members: Dict[str, List[str]] = {}
        for nid, n in self.nodes.items():
            if n.kind == "thread" and n.pid is not None:
                members.setdefault(pnode(n.pid), []).append(nid)
        changed = True
        while changed:
            changed = False
            for nid, n in self.nodes.items():
                if nid in live or n.dead:
                    continue
                if n.kind == "process":
                    ok = any(m in live for m in members.get(nid, []))
                else:
                    ok = any(e.dst in live for e in self.out(nid))
                if ok:
                    live.add(nid)
                    changed = True
        self.live = live

    # ------------------------------------------------------------------ proofs
    def prove(self, start_tids: Iterable[int] = ()) -> Optional[Proof]:
        """A proof starting at the first stuck thread among ``start_tids`` (else any stuck
        deciding thread); also stored in ``proof``."""
        stuck = self.stuck
        if not stuck:
            return None
        order = [tnode(t) for t in start_tids if tnode(t) in stuck]
        order += [s for s in stuck if self.nodes[s].decides and s not in order]
        order += [s for s in stuck if s not in order]
        self.proof = self._walk(order[0])
        return self.proof

    def _next_thread(self, pid: int, path: List[str]) -> Optional[str]:
        """Step from a process node into one of its threads that cannot act: one already on
        the path closes a cycle; else the main thread, else a deciding one."""
        candidates = [n.id for n in self.threads_of(pid) if n.id not in self.live]
        on_path = [c for c in candidates if c in path and self.out(c)]
        if on_path:
            return on_path[-1]
        waiting = [c for c in candidates if self.out(c)]
        waiting.sort(key=lambda c: (not self.nodes[c].decides, self.nodes[c].tid != pid))
        return waiting[0] if waiting else None

    def _walk(self, start: str) -> Proof:
        path: List[str] = [start]
        edges: List[Edge] = []
        cur = start
        while True:
            node = self.nodes[cur]
            if node.dead:
                return self._dead_end(edges, node)
            if node.kind == "process":
                nxt = self._next_thread(node.pid or 0, path)
                if nxt is None:        # no thread left that waits: the process is gone
                    return self._dead_end(edges, node)
            else:
                outs = self.out(cur)
                if not outs:
                    return self._dead_end(edges, node)
                outs = sorted(outs, key=lambda e: (not self.nodes[e.dst].dead,
                                                   e.dst not in path,
                                                   self.nodes[e.dst].kind != "thread"))
                edges.append(outs[0])
                nxt = outs[0].dst
            if nxt in path:
                return self._cycle(edges, path, path.index(nxt))
            path.append(nxt)
            cur = nxt

    def _dead_end(self, edges: List[Edge], node: Node) -> Proof:
        parts = [e.text for e in edges]
        tail = f", which {node.dead_text}" if node.dead_text else ""
        if parts:
            parts[-1] += tail
        text = "; ".join(parts) or f"{node.label}{tail}"
        return Proof("dead-end", edges, [], "dead end: " + text)

    def _cycle(self, edges: List[Edge], path: List[str], at: int) -> Proof:
        cycle = path[at:]
        in_cycle = set(cycle)
        lead = [e for e in edges if e.src not in in_cycle]
        loop = [e for e in edges if e.src in in_cycle]
        # A loop through a process node by waits on locks without a recorded holder proves only
        # that no thread of that process runs: say so, listing every stuck thread's wait.
        closed = [self.nodes[c] for c in cycle if self.nodes[c].kind == "process"
                  and any(e.dst == c and e.kind == "futex" for e in loop)]
        if closed:
            p = closed[0]
            waits = [e for n in self.threads_of(p.pid or 0) for e in self.out(n.id)]
            text = (f"no thread of {p.label} runs to end these waits: "
                    + "; ".join(e.text for e in waits[:6])
                    + (f"; and {len(waits) - 6} more" if len(waits) > 6 else ""))
            return Proof("closed", lead + loop, cycle, text)
        text = "cycle: " + "; ".join(e.text for e in loop)
        if lead:
            text = "; ".join(e.text for e in lead) + ", which is in a " + text
        return Proof("cycle", lead + loop, cycle, text)

    # ------------------------------------------------------------------ output
    def to_json(self) -> Dict[str, object]:
        stuck = set(self.stuck)
        return {
            "nodes": [{"id": n.id, "kind": n.kind, "label": n.label, "pid": n.pid,
                       "tid": n.tid, "state": n.state, "dead": n.dead,
                       "stuck": n.id in stuck} for n in self.nodes.values()],
            "edges": [e.to_json() for e in self.edges],
            "cycle": list(self.proof.cycle) if self.proof else [],
            "proof": self.proof.to_json() if self.proof else None,
        }


# --------------------------------------------------------------------------- building
class _Builder:
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


def build_wait_graph(rec: Recording, pvs: Dict[int, ProcessVerdict],
                     facts: Optional[WaitFacts] = None) -> WaitGraph:
    """The wait-for graph of the tree (module doc); ``prove`` it for a proof."""
    return _Builder(rec, pvs, facts or WaitFacts()).build()


def definite_cycle(g: WaitGraph) -> Optional[Proof]:
    """A cycle made only of waits whose holder is known (mutex owners, pthread_join, pipes,
    children): a deadlock even while other threads of the process still run."""
    for s in g.stuck:
        p = g._walk(s)
        if p.kind == "cycle" and all(e.kind in ("mutex", "join") for e in p.path
                                     if e.src in p.cycle):
            return p
    return None


__all__ = ["WaitFacts", "WaitGraph", "Node", "Edge", "Proof", "build_wait_graph",
           "definite_cycle", "socket_inode", "strace_peer", "tcp_reverse"]
