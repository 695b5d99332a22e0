"""The wait-for graph: the one model that decides who is stuck, and the proof of a deadlock.

Contract: ``WaitGraph`` holds nodes (a thread ``T<tid>``; per process ``P<pid>``, the process as
others see it, and ``A<pid>``, any thread of it; the GPU, the outside world, things gone,
``G<...>``) and edges (``Edge``, kind from ``EdgeKind``) from a waiting thread to what could end
its wait: alternatives, the wait ends when any of them acts (waitgraph/build.py makes them).
``settle()`` decides who can still act (``live``, ``weak``) and who is ``stuck``; ``prove()``
and ``definite_cycle()`` give the proof of a deadlock; ``to_json()`` is the report's
``wait_graph``: {"nodes", "edges", "cycle", "proof"}. The class's and the methods' docstrings
say how.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Set, Tuple

from ..vocab.verdict import StrEnum

GPU, OUTSIDE = "gpu", "outside"


class EdgeKind(StrEnum):
    MUTEX = "mutex"            # a pthread mutex whose owner the probe read
    JOIN = "join"              # pthread_join: the joined thread, until it exits
    FUTEX = "futex"            # a futex whose holder is unknown (or its last waker)
    PIPE = "pipe"
    EVENTFD = "eventfd"
    SOCKET = "socket"
    CHILD = "child"            # wait4/waitid
    LOCK = "lock"              # flock/fcntl: the process holding the file lock
    GPU = "gpu"                # a blocking-sync wait the GPU ends
    COLLECTIVE = "collective"  # a collective that waits for another rank
    OUTSIDE = "outside"        # nothing in the tree can end it (or we cannot tell)
    STORAGE = "storage"        # a file's file system or a device: its FUSE daemon, or outside


class NodeKind(StrEnum):
    THREAD = "thread"
    PROCESS = "process"        # P<pid>
    ANY_THREAD = "any-thread"  # A<pid>
    GPU = "gpu"
    OUTSIDE = "outside"
    GONE = "gone"


@dataclass
class Node:
    id: str
    kind: NodeKind
    label: str
    pid: Optional[int] = None
    tid: Optional[int] = None
    state: str = ""            # thread verdict, "exited", "gone", ...
    dead: bool = False         # can never act again (exited, killed, zombie, gone)
    dead_text: str = ""        # "was killed by SIGKILL (zombie, not reaped)"
    decides: bool = True       # a thread that may decide its process's verdict
    active: bool = False       # a thread that does not wait (progressing, busy, idle, unknown)
    activity: str = ""         # a thread's: progress, spin, tick, stopped, idle, unknown, wait, dead
    call: str = ""             # a waiting thread's call ("write", "futex", ...)
    untraced: bool = False     # A<pid> of a process only some of whose threads were traced
    polls: bool = False        # a thread's: it ticks fast only to look again (a flag)
    lock_wait: bool = False    # a thread's: it waits for a lock's holder (Wait.waits_for_a_lock)
    owed: bool = False         # a thread's: it waits for something owed, never for input: a
                               # reply to what it sent (Wait.awaits_reply), or a file system's
                               # or a device's answer (fd_waits.storage)


@dataclass
class Edge:
    src: str
    dst: str
    kind: EdgeKind
    obj: str                   # "mutex 0x7f..", "pipe:[123]", "eventfd:[3]", "wait4", ...
    text: str                  # a sentence naming both ends

    def to_json(self) -> Dict[str, str]:
        return {"src": self.src, "dst": self.dst, "kind": str(self.kind), "object": self.obj,
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


def anode(pid: int) -> str:
    return f"A{pid}"


_PROCESS_KINDS = (NodeKind.PROCESS, NodeKind.ANY_THREAD)


@dataclass
class WaitGraph:
    """Nodes: one per thread (``T<tid>``); per process two: ``P<pid>``, the process as other
    processes see it (it can act when one of the threads that decide its verdict can: a pipe's
    writer, a child that wait4 waits to exit, a peer rank), and ``A<pid>``, any thread of it (a
    futex with no recorded holder, a pipe or eventfd only the process itself holds: any of its
    threads, library helpers included, could end the wait); plus the GPU, the outside world and
    things that are gone (``G<...>``). Nodes join through ``add_node``, which keeps an index of
    thread nodes by pid: ``threads_of(pid)`` costs that process's threads, not the graph's."""
    nodes: Dict[str, Node] = field(default_factory=dict)
    edges: List[Edge] = field(default_factory=list)
    live: Set[str] = field(default_factory=set)
    weak: Set[str] = field(default_factory=set)
    proof: Optional[Proof] = None
    _out: Dict[str, List[Edge]] = field(default_factory=dict)
    # thread nodes by pid (add_node keeps it; threads_of sorts a pid's list when it grew)
    _threads: Dict[int, List[Node]] = field(default_factory=dict, repr=False, compare=False)
    _unsorted: Set[int] = field(default_factory=set, repr=False, compare=False)

    # ------------------------------------------------------------------ building
    def add_node(self, n: Node) -> str:
        """Add ``n`` (the one way nodes join: it keeps the index of threads by pid)."""
        self.nodes[n.id] = n
        if n.kind == NodeKind.THREAD and n.pid is not None:
            self._threads.setdefault(n.pid, []).append(n)
            self._unsorted.add(n.pid)
        return n.id

    def add_edge(self, e: Edge) -> None:
        self.edges.append(e)
        self._out.setdefault(e.src, []).append(e)

    # ------------------------------------------------------------------ queries
    def out(self, nid: str) -> List[Edge]:
        return self._out.get(nid, [])

    def threads_of(self, pid: int) -> List[Node]:
        """The thread nodes of ``pid``, its main thread first, then by tid (from the index
        add_node keeps: a process's own threads, not every node)."""
        ts = self._threads.get(pid)
        if ts is None:
            return []
        if pid in self._unsorted:
            ts.sort(key=lambda n: (n.tid != pid, n.tid))
            self._unsorted.discard(pid)
        return list(ts)

    def can_act(self, nid: str) -> bool:
        return nid in self.live

    @property
    def stuck(self) -> List[str]:
        """Waiting threads that nothing running can ever unblock (module doc)."""
        return sorted((n for n in self._out if n not in self.live and n not in self.weak
                       and self.nodes[n].kind == NodeKind.THREAD and not self.nodes[n].dead),
                      key=lambda n: (self.nodes[n].pid or 0, self.nodes[n].tid or 0))

    def is_stuck(self, tid: int) -> bool:
        nid = tnode(tid)
        return nid in self._out and nid not in self.live and nid not in self.weak \
            and not self.nodes[nid].dead

    def is_weak(self, nid: str) -> bool:
        """Not stuck, but only a thread of unknown identity could end the wait (module doc)."""
        return nid in self.weak

    # ------------------------------------------------------------------ fixpoint
    def settle(self) -> None:
        """Compute ``live`` and ``weak``: least fixpoints (so cycles stay stuck), of two strengths.
        ``live``: a thread that does not wait and has not exited (progressing, busy, ticking,
        idle, unknown); a waiting thread with an edge to a live node other than an ``A`` node;
        ``P<pid>`` when one of its deciding threads is live, where a process that has threads at
        work or waiting is decided by those, not by its ticking or idle threads (a watchdog
        shows a process is alive, not that it can write your pipe), and a process of ticking or
        idle threads only by them (the loop is its work); ``A<pid>`` when any of its threads is,
        or always when only some of the process's threads were traced (``untraced``: ``strace -p
        TID`` without -f; a thread outside the recording may end the wait); the GPU and the
        outside always are. ``weak``: a waiting thread whose wait can end only if a thread of
        unknown identity acts (an edge to a live ``A`` node: a futex with no recorded holder
        while other threads of the process run), or that waits on a weak node; a ``P`` node
        whose deciding threads are weak at best. What is neither, among the waiting threads, is
        ``stuck``: nothing running can ever end their waits."""
        threads = {pid: self.threads_of(pid) for pid in self._threads}
        deciders = {pid: _deciders(ts, self._out) for pid, ts in threads.items()}
        live = {nid for nid, n in self.nodes.items() if not n.dead and (
            n.kind in (NodeKind.GPU, NodeKind.OUTSIDE)
            or (n.kind == NodeKind.ANY_THREAD and n.untraced)
            or (n.kind == NodeKind.THREAD and n.active and nid not in self._out)
            or (n.kind == NodeKind.PROCESS and not deciders.get(n.pid or 0)))}
        weak: Set[str] = set()
        # Propagated from the live nodes along who depends on whom, each node raised at most
        # twice (to weak, to live): linear in nodes and edges (a pass over every node until
        # none changed took one pass a hop: a chain of 10^4 processes, 10^8 steps).
        needs = self._dependents(threads, deciders)
        todo = list(live)
        while todo:
            src = todo.pop()
            up = src in live
            for nid, how in needs.get(src, ()):
                n = self.nodes[nid]
                if nid in live or n.dead:
                    continue
                if up and how != "weakly":          # a live decider, thread, or waited-on node
                    live.add(nid)
                    weak.discard(nid)
                    todo.append(nid)
                elif how != "if-live" and nid not in weak:
                    weak.add(nid)
                    todo.append(nid)
        self.live, self.weak = live, weak

    def _dependents(self, threads: Dict[int, List[Node]],
                    deciders: Dict[int, List[Node]]) -> Dict[str, List[Tuple[str, str]]]:
        """node -> the nodes settle() raises from it, and how: a ``P`` node from its deciding
        threads (live or weak), an ``A`` node from its threads ("if-live": only a live one), a
        waiting thread from what its edges lead to (an ``A`` node makes it "weakly" live)."""
        needs: Dict[str, List[Tuple[str, str]]] = {}
        for nid, n in self.nodes.items():
            if n.kind == NodeKind.PROCESS:
                for t in deciders.get(n.pid or 0, []):
                    needs.setdefault(t.id, []).append((nid, "as-is"))
            elif n.kind == NodeKind.ANY_THREAD:
                for t in threads.get(n.pid or 0, []):
                    needs.setdefault(t.id, []).append((nid, "if-live"))
            else:
                for e in self.out(nid):
                    weakly = self.nodes[e.dst].kind == NodeKind.ANY_THREAD
                    needs.setdefault(e.dst, []).append((nid, "weakly" if weakly else "as-is"))
        return needs

    def deciders(self, pid: int) -> List[Node]:
        """The threads that decide what ``P<pid>`` can do (module doc)."""
        return _deciders(self.threads_of(pid), self._out)

    # ------------------------------------------------------------------ proofs
    def prove(self, start_tids: Iterable[int] = ()) -> Optional[Proof]:
        """A proof starting at the first stuck thread among ``start_tids`` (else any stuck deciding
        thread; also stored in ``proof``): it walks from a stuck thread along edges to the first
        node seen twice (``cycle``), to something dead (``dead-end``: an exited or killed
        process, a zombie, a thread that no longer exists), or around a process whose every
        thread waits on locks with no recorded holder (``closed``)."""
        stuck = self.stuck
        if not stuck:
            return None
        among = set(stuck)             # (a set: list lookups per thread were quadratic)
        first = next((tnode(t) for t in start_tids if tnode(t) in among), None) or next(
            (s for s in stuck if self.nodes[s].decides), stuck[0])
        self.proof = self.walk(first)
        return self.proof

    def definite_cycle(self) -> Optional[Proof]:
        """A cycle of waits whose holders are all known (mutex owners, pthread_join): a deadlock
        even while other threads of the process still run."""
        for s in self.stuck:
            p = self.walk(s)
            if p.kind == "cycle" and all(e.kind in (EdgeKind.MUTEX, EdgeKind.JOIN)
                                         for e in p.path if e.src in p.cycle):
                return p
        return None

    def _next_thread(self, node: Node, path: List[str]) -> Optional[str]:
        """Step from a process node into one of its threads that cannot act: one already on
        the path closes a cycle; else the main thread, else a deciding one."""
        members = self.threads_of(node.pid or 0)
        if node.kind == NodeKind.PROCESS:
            members = _deciders(members, self._out) or members
        candidates = [n.id for n in members if n.id not in self.live]
        on_path = [c for c in candidates if c in path and self.out(c)]
        if on_path:
            return on_path[-1]
        waiting = [c for c in candidates if self.out(c)]
        waiting.sort(key=lambda c: (not self.nodes[c].decides, self.nodes[c].tid != node.pid))
        return waiting[0] if waiting else None

    def walk(self, start: str) -> Proof:
        path: List[str] = [start]
        edges: List[Edge] = []
        cur = start
        while True:
            node = self.nodes[cur]
            if node.dead:
                return self._dead_end(edges, node)
            if node.kind in _PROCESS_KINDS:
                nxt = self._next_thread(node, path)
                if nxt is None:        # no thread left that waits: the process is gone
                    return self._dead_end(edges, node)
            else:
                outs = self.out(cur)
                if not outs:
                    return self._dead_end(edges, node)
                # Dead ends first, then other processes before the thread's own (a pipe or an
                # eventfd it holds too), then what closes a cycle, then threads.
                own = (pnode(node.pid), anode(node.pid)) if node.pid is not None else ()
                outs = sorted(outs, key=lambda e: (not self.nodes[e.dst].dead,
                                                   e.dst in own and len(outs) > 1,
                                                   e.dst not in path,
                                                   self.nodes[e.dst].kind != NodeKind.THREAD))
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
        # A loop through a process by waits on locks without a recorded holder proves only that
        # no thread of that process runs: say so, listing every stuck thread's wait.
        closed = [self.nodes[c] for c in cycle if self.nodes[c].kind in _PROCESS_KINDS
                  and any(e.dst == c and e.kind == EdgeKind.FUTEX for e in loop)]
        if closed:
            p = closed[0]
            waits = [e for n in self.threads_of(p.pid or 0) for e in self.out(n.id)]
            label = self.nodes[pnode(p.pid)].label if pnode(p.pid or 0) in self.nodes \
                else p.label
            text = (f"no thread of {label} runs to end these waits: "
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
        kinds = {k: str(k) for k in NodeKind}      # (once, not per node)
        return {
            "nodes": [{"id": n.id, "kind": kinds[n.kind], "label": n.label, "pid": n.pid,
                       "tid": n.tid, "state": n.state, "dead": n.dead,
                       "stuck": n.id in stuck} for n in self.nodes.values()],
            "edges": [e.to_json() for e in self.edges],
            "cycle": list(self.proof.cycle) if self.proof else [],
            "proof": self.proof.to_json() if self.proof else None,
        }


def _deciders(threads: List[Node], waiting: Dict[str, List[Edge]]) -> List[Node]:
    """The threads that decide a process's verdict: those not exited whose verdict is known,
    without library helpers and pooled threads unless nothing else is left; and when some of
    them work or wait, without those that only tick or idle (module doc)."""
    known = [t for t in threads if not t.dead and t.state != "unknown"]
    ds = [t for t in known if t.decides] or known
    busy = [t for t in ds if t.id in waiting or t.activity in ("progress", "spin")]
    return busy or ds


__all__ = ["WaitGraph", "Node", "Edge", "Proof", "EdgeKind", "NodeKind", "tnode", "pnode",
           "anode", "GPU", "OUTSIDE"]
