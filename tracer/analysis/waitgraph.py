"""The wait-for graph of the traced tree and the proof of a deadlock (a cycle or a dead end).

Contract (pure functions of the recording, the process verdicts and the probes' facts):
- ``WaitFacts`` collects what the end-of-recording probes found (``FutexOwner``, ``SocketPeers``
  events); empty facts are fine (replays of old traces): waits then resolve as before.
- ``build_wait_graph(rec, pvs, facts)`` gives a ``WaitGraph``: one node per thread of the tree,
  one per process (meaning "some thread of it": a pipe's writer, a child in wait4, the holder of
  a lock that records no owner), plus the GPU, the outside world and things that are gone. Every
  thread blocked without timeout gets edges to what could end its wait (alternatives: the wait
  ends when any of them acts), each labelled with the object (mutex/futex address, pipe or
  socket inode, eventfd id, wait4) and a sentence naming tids and pids. A read of an eventfd
  leads to every other traced process holding it (any holder may write it), then to its own
  process when another thread of it could; held by no other one, it is an outside wait.
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
from .process_rules import ProcessVerdict

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
    kind: str                  # mutex, join, futex, pipe, eventfd, socket, child, gpu, collective,
    #                            outside
    obj: str                   # "mutex 0x7f..", "pipe:[123]", "eventfd:[3]", "wait4", ...
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
                # Dead ends first, then other processes before the thread's own (a pipe or an
                # eventfd it holds too), then what closes a cycle, then threads.
                own = pnode(node.pid) if node.pid is not None else None
                outs = sorted(outs, key=lambda e: (not self.nodes[e.dst].dead,
                                                   e.dst == own and len(outs) > 1,
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


def build_wait_graph(rec: Recording, pvs: Dict[int, ProcessVerdict],
                     facts: Optional[WaitFacts] = None) -> WaitGraph:
    """The wait-for graph of the tree (module doc); ``prove`` it for a proof."""
    from .waitgraph_build import GraphBuilder    # it needs the classes above
    return GraphBuilder(rec, pvs, facts or WaitFacts()).build()


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
