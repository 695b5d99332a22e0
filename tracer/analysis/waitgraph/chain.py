"""The chain of waits: from a thread, what everything waits for, and where that ends.

Contract: ``Chains(graph)`` over a settled ``WaitGraph`` (graph.py). ``end(nid)`` is where the
waits starting at node ``nid`` end, as an ``End`` (its kind, the node it ends at, and the node
before it); ``walk(nid)`` is the same chain step by step (``Chain``: the edges and the hops into
a thread of a process, then the end). Pure; memoized per node. The root cause is where a chain
stops, never merely a thread that ticks: ``Chains._own_end`` says where a chain ends,
``Chains._next`` how it goes on; ``SEVERITY`` ranks the ends, worst first.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple

from ..vocab.verdict import StrEnum
from .fd_waits import WRITE_CALLS
from .graph import Edge, Node, NodeKind, WaitGraph

__all__ = ["EndKind", "End", "Step", "Chain", "Chains", "SEVERITY", "WAITER_ENDS"]


class EndKind(StrEnum):
    CYCLE = "cycle"
    DEAD = "dead"
    SPIN = "spin"
    TICK = "tick"
    STOPPED = "stopped"
    GPU = "gpu"
    WRITE_STUCK = "write-stuck"
    OUTSIDE_STUCK = "outside-stuck"
    UNKNOWN_WAKER = "unknown-waker"
    PROGRESS = "progress"
    IDLE = "idle"
    OUTSIDE = "outside"
    UNKNOWN = "unknown"


# Worst first: a cycle or a dead end, a spin, ticking, a stopped thread, a write that cannot go
# out, a wait on an unknown waker, progress, a wait owed from outside the recording (a lock
# whose holder is not seen: a tree whose other chains advance still progresses), a wait the
# GPU ends (work that runs), idle, outside, unknown.
SEVERITY = [EndKind.CYCLE, EndKind.DEAD, EndKind.SPIN, EndKind.TICK, EndKind.STOPPED,
            EndKind.WRITE_STUCK, EndKind.UNKNOWN_WAKER,
            EndKind.PROGRESS, EndKind.OUTSIDE_STUCK, EndKind.GPU, EndKind.IDLE, EndKind.OUTSIDE,
            EndKind.UNKNOWN]
_RANK = {k: i for i, k in enumerate(SEVERITY)}
# ends that are not a thread of the tree: the root cause is the thread that waits on them
WAITER_ENDS = frozenset({EndKind.UNKNOWN_WAKER, EndKind.GPU, EndKind.OUTSIDE,
                         EndKind.WRITE_STUCK, EndKind.OUTSIDE_STUCK})
# Calls that wait outside the recording for something owed, never for input: a lock its holder
# keeps, a connection the peer does not answer, a device, a child not traced; and a read of the
# reply to a request the thread just sent on the same fd (Node.owed, issue 44 item 6).
OWED_CALLS = frozenset({"flock", "fcntl", "lockf", "connect", "ioctl", "wait4", "waitid"})
_ACTIVITY_END = {"progress": EndKind.PROGRESS, "spin": EndKind.SPIN, "tick": EndKind.TICK,
                 "stopped": EndKind.STOPPED,
                 "idle": EndKind.IDLE, "unknown": EndKind.UNKNOWN, "dead": EndKind.DEAD,
                 "wait": EndKind.OUTSIDE}


@dataclass(frozen=True)
class End:
    kind: EndKind
    node: str                      # where it ends (a thread, the GPU, the outside, a gone node)
    before: Optional[str] = None   # the node that waits on it (UNKNOWN_WAKER: the waiter itself)
    likely: bool = False           # UNKNOWN_WAKER: ``before`` is the waiter's likely waker


@dataclass(frozen=True)
class Step:
    src: str
    dst: str
    edge: Optional[Edge] = None    # None: a hop from a process node into one of its threads


@dataclass
class Chain:
    start: str
    steps: List[Step] = field(default_factory=list)
    end: Optional[End] = None

    @property
    def nodes(self) -> List[str]:
        return [self.start] + [s.dst for s in self.steps]

    def cycle(self) -> List[Step]:
        """The steps of the cycle the chain ends in ([] when it ends otherwise)."""
        if self.end is None or self.end.kind != EndKind.CYCLE:
            return []
        at = next((i for i, s in enumerate(self.steps) if s.src == self.end.node), None)
        return self.steps[at:] if at is not None else []


class Chains:
    """Chain ends and walks over one settled graph (module doc)."""

    def __init__(self, graph: WaitGraph) -> None:
        self.g = graph
        self._memo: Dict[str, End] = {}
        self._open: Dict[str, bool] = {}
        self._seen: Dict[str, int] = {}        # _warm's visit order (Tarjan's index)

    def _below(self, nid: str) -> List[str]:
        """The nodes ``end(nid)`` may ask the end of (its edges' ends, a process's threads)."""
        node = self.g.nodes[nid]
        if node.kind == NodeKind.THREAD:
            return [e.dst for e in self.g.out(nid) if e.dst in self.g.nodes]
        if node.kind in (NodeKind.PROCESS, NodeKind.ANY_THREAD):
            extra = [t.id for t in self.g.deciders(node.pid or 0)] \
                if node.kind == NodeKind.PROCESS else []
            return list(dict.fromkeys(self._members(node) + extra))
        return []

    def _warm(self, top: str) -> None:
        """The ends of the nodes below ``top``, deepest first (an iterative Tarjan walk: a node
        once every node below it is done), so that ``end``'s own recursion stays a node or two
        deep: a chain of waits 10^4 processes long took 4 frames a hop (Python's limit is
        1,000). A node on a cycle is left to ``end``: where a cycle is entered decides its
        end. Each node is visited once per ``Chains``."""
        low: Dict[str, int] = {}
        stack: List[str] = []
        on_stack: Dict[str, bool] = {}
        work: List[Tuple[str, Iterator[str]]] = []

        def visit(nid: str) -> None:
            self._seen[nid] = low[nid] = len(self._seen)
            stack.append(nid)
            on_stack[nid] = True
            work.append((nid, iter(self._below(nid))))
        visit(top)
        while work:
            nid, below = work[-1]
            nxt = next((c for c in below if c not in self._seen or on_stack.get(c)), None)
            if nxt is not None:
                if nxt in self._seen:
                    low[nid] = min(low[nid], self._seen[nxt])
                else:
                    visit(nxt)
                continue
            work.pop()
            if work:
                up = work[-1][0]
                low[up] = min(low[up], low[nid])
            if low[nid] != self._seen[nid]:
                continue
            scc = []
            while True:
                q = stack.pop()
                del on_stack[q]
                scc.append(q)
                if q == nid:
                    break
            if len(scc) == 1 and nid not in self._below(nid):
                self.end(nid)                  # all below it are done: one frame deep

    # ------------------------------------------------------------------ ends
    def end(self, nid: str) -> End:
        got = self._memo.get(nid)
        if got is not None:
            return got
        if nid not in self.g.nodes:            # a process the graph never had (no threads)
            return End(EndKind.UNKNOWN, nid)
        if nid in self._open:                  # back on a node being followed: a cycle
            return End(EndKind.CYCLE, nid)
        if not self._open and nid not in self._seen:
            self._warm(nid)
            got = self._memo.get(nid)
            if got is not None:
                return got
        self._open[nid] = True
        try:
            nxt = self._next(nid, (nid,))
            e = nxt[1] if isinstance(nxt[1], End) else self.end(nxt[1])  # type: ignore[arg-type]
        finally:
            del self._open[nid]
        node = self.g.nodes[nid]
        if e.before is None and e.node != nid and node.kind == NodeKind.THREAD:
            e = End(e.kind, e.node, nid)      # the thread that waits on the end (GPU, outside)
            if e.kind == EndKind.OUTSIDE and node.call in WRITE_CALLS:
                e = End(EndKind.WRITE_STUCK, e.node, nid)
            elif e.kind == EndKind.OUTSIDE and (node.call in OWED_CALLS or node.owed):
                e = End(EndKind.OUTSIDE_STUCK, e.node, nid)
        if e.kind != EndKind.CYCLE or e.node not in self._open:
            self._memo[nid] = e               # a cycle through a node still open is not final
        return e

    def _own_end(self, nid: str, node: Node, before: Optional[str]) -> Optional[End]:
        """The end at ``node`` itself, or None when the chain goes on from it:
        - a thread that does not wait ends it: it makes progress (``PROGRESS``), spins on the CPU
          or the GPU (``SPIN``), ticks in a loop with nothing to show (``TICK``: only reached in a
          process that does nothing else), is stopped by a signal (``STOPPED``), waits for input
          (``IDLE``) or was not observed (``UNKNOWN``); a thread or process that is gone ends it as
          ``DEAD``, the GPU as ``GPU`` (a blocking wait its kernel ends), the outside world as
          ``OUTSIDE`` (``OUTSIDE_STUCK`` when it waits there for something owed, never input:
          ``OWED_CALLS``, or a thread whose wait the graph marks ``owed``: a file system's or a
          device's answer, fd_waits.storage; ``WRITE_STUCK`` when it waits to write: a full pipe or socket whose
          reader the recording does not show, a consumer that stopped reading);
        """
        if node.dead:
            return End(EndKind.DEAD, nid, before)
        if node.kind == NodeKind.GPU:
            return End(EndKind.GPU, nid, before)
        if node.kind in (NodeKind.OUTSIDE, NodeKind.GONE):
            return End(EndKind.DEAD if node.kind == NodeKind.GONE else EndKind.OUTSIDE, nid,
                       before)
        if node.kind == NodeKind.THREAD and not self.g.out(nid):
            return End(_ACTIVITY_END.get(node.activity, EndKind.UNKNOWN), nid, before)
        return None

    def _next(self, nid: str, path: Tuple[str, ...]) -> Tuple[Optional[Step], object]:
        """(the step taken from ``nid``, the node it leads to) or (None, End). ``path`` ends
        with ``nid``. How a chain goes on from a node that does not end it:
        - a waiting thread goes on along one of its edges (they are alternatives): among those that
          lead to something that can still act (``graph.live``), the one that ends worst (a spin
          before progress: the launcher that reads its schedulers' pipe is held up by the one that
          spins); when none can act, the one that ends worst (dead ends and cycles first);
        - a process (``P``) goes on into the deciding thread that acts for it: when it can act, one
          of its live deciding threads whose chain ends in ``PROGRESS`` (a runner that waits for a
          compiler that writes its object file; a main thread that logs while helper threads spin),
          else the worst-ending of them; otherwise the worst-ending of its deciding threads, one
          already on the chain first (closing a ``CYCLE``);
        - "another thread of the process" (``A``: a futex nobody is recorded to hold) goes on into
          a thread of it that works or waits on something that can act, else into one that waits on
          something of its own (another process, the GPU: the queue's producer, blocked itself),
          never into a library helper or a parked pool thread (nobody's producer); when only
          threads that tick or idle are left, the chain ends there: ``UNKNOWN_WAKER`` (``before``
          is the waiting thread: what would wake it cannot be told, and nothing in the process is
          at work), and so does a lock wait whose way on ends idle or outside (a holder does not
          release a lock by waiting for input); when no thread of the process can act at all, as
          a ``CYCLE`` (the process is closed on itself).
        """
        node = self.g.nodes[nid]
        before = path[-2] if len(path) > 1 else None
        own = self._own_end(nid, node, before)
        if own is not None:
            return None, own
        if node.kind == NodeKind.THREAD:
            edges = self.g.out(nid)
            # what can still act, surely (another thread of unknown identity is no sure one)
            live = [e for e in edges if self.g.can_act(e.dst)
                    and self.g.nodes[e.dst].kind != NodeKind.ANY_THREAD]
            pick = self._worst([e.dst for e in (live or edges)], path, self.g.can_act(nid))
            edge = next(e for e in edges if e.dst == pick)
            if node.lock_wait and self.g.nodes[pick].kind == NodeKind.ANY_THREAD \
                    and self.end(pick).kind in (EndKind.IDLE, EndKind.OUTSIDE):
                # a lock's holder does not release it by waiting for input
                return None, End(EndKind.UNKNOWN_WAKER, pick, nid)
            return Step(nid, pick, edge), pick
        members = self._members(node)
        if not members:
            if node.kind == NodeKind.ANY_THREAD:
                # no thread of it can act at all: closed; only ticking or idle ones: unknown
                if not self.g.can_act(nid):
                    return None, End(EndKind.CYCLE, nid, before)
                waker = self._likely_waker(node, before)
                return None, End(EndKind.UNKNOWN_WAKER, nid, waker or before, waker is not None)
            return None, End(EndKind.UNKNOWN, nid, before)   # no thread of it could be judged
        acting = self.g.can_act(nid)
        on_path = [] if acting else [m for m in members if m in path]
        pick = on_path[-1] if on_path else self._worst(members, path, acting)
        if acting and node.kind == NodeKind.PROCESS:
            # a process goes on through a deciding thread that advances: its other threads
            # that spin or wait are a partial hang, not where the process stops
            ahead = [m for m in members if not self._back(m, path)
                     and self.end(m).kind == EndKind.PROGRESS]
            if ahead:
                pick = ahead[0]
            elif self.end(pick).kind in (EndKind.IDLE, EndKind.OUTSIDE):
                # nor idle: a thread that waits for a lock nobody releases stops it
                held = [t.id for t in self.g.deciders(node.pid or 0) if t.lock_wait
                        and not self._back(t.id, path)
                        and self.end(t.id).kind == EndKind.UNKNOWN_WAKER]
                pick = held[0] if held else pick
        return Step(nid, pick), pick

    def _members(self, node: Node) -> List[str]:
        """The threads a process node goes on into (module doc)."""
        pid = node.pid or 0
        if node.kind == NodeKind.PROCESS:
            ds = [t.id for t in self.g.deciders(pid)]
            live = [t for t in ds if self.g.can_act(t)]
            return live or ds
        # library helpers and parked pool threads are nobody's producer (they never decide)
        threads = [t for t in self.g.threads_of(pid) if t.decides]
        acting = [t.id for t in threads if self.g.can_act(t.id)
                  and t.activity not in ("tick", "idle", "unknown")]
        if acting:
            return acting
        # none at work: one that waits on something of its own (another process, the GPU)
        return [t.id for t in threads if t.decides and self._specific(t.id)]

    def _likely_waker(self, node: Node, before: Optional[str]) -> Optional[str]:
        """The one thread of the process a wait on "another thread of it" most likely waits for,
        when no thread of it is at work: its only worker thread (not its main thread, which
        orchestrates, nor ``before``) that waits on another thread itself or polls a flag (a
        main thread waits on a queue for its runner, which waits on an event nobody sets). None
        when there is no such thread, or more than one: then the waker cannot be told."""
        pid = node.pid or 0
        found = [t.id for t in self.g.threads_of(pid)
                 if t.decides and t.tid != pid and t.id != before and not t.dead
                 and (t.polls or (t.activity == "wait" and self.g.out(t.id)
                                  and not self._specific(t.id)))]
        return found[0] if len(found) == 1 else None

    def _worst(self, candidates: List[str], path: Tuple[str, ...], acting: bool) -> str:
        """The candidate whose chain ends worst; among equals, one that is itself where its
        chain ends (the shortest way there). From a node that cannot act, one on the path first
        (it closes a cycle); from one that can, never a way back round: waits that can all still
        end make no cycle."""
        def rank(c: str) -> Tuple[int, int, int]:
            back = self._back(c, path)
            if not acting and back:
                return (-1, 0, 0)
            if back:
                return (len(SEVERITY), 0, 0)
            e = self.end(c)
            if acting and e.kind == EndKind.CYCLE:
                return (len(SEVERITY), 0, 0)
            near = e.node in self.g.nodes and self.g.nodes[e.node].pid == self.g.nodes[c].pid
            return (_RANK[e.kind], 0 if near else 1, 0 if self._specific(c) else 1)
        return min(candidates, key=rank)

    def _specific(self, nid: str) -> bool:
        """A thread that waits on something of its own (not merely on "another thread")."""
        return any(self.g.nodes[e.dst].kind != NodeKind.ANY_THREAD for e in self.g.out(nid))

    def _back(self, c: str, path: Tuple[str, ...]) -> bool:
        """Going to ``c`` comes back to the chain: ``c`` or a thread of its process is on it."""
        if c in path or c in self._open:
            return True
        node = self.g.nodes[c]
        if node.kind in (NodeKind.PROCESS, NodeKind.ANY_THREAD):
            pid, nodes = node.pid or 0, self.g.nodes     # the path (<= limit), not every thread
            return any((n := nodes.get(p)) is not None and n.kind == NodeKind.THREAD
                       and n.pid == pid for p in path)
        return False

    # ------------------------------------------------------------------ walks
    def walk(self, start: str, limit: int = 64) -> Chain:
        chain = Chain(start)
        for step, end in self.steps(start, limit):
            if step is not None:
                chain.steps.append(step)
            chain.end = end
        return chain

    def steps(self, start: str, limit: int = 64) -> Iterator[Tuple[Optional[Step], Optional[End]]]:
        """``walk``'s steps one at a time, (step, None), then (None or the last step, the end):
        a caller that needs the first hops stops there (a 64-step walk per process of a chain
        10^4 deep was most of its analysis)."""
        if start not in self.g.nodes:
            yield None, End(EndKind.UNKNOWN, start)
            return
        path: Tuple[str, ...] = (start,)
        cur = start
        for _ in range(limit):
            step, nxt = self._next(cur, path)
            if step is None:
                yield None, nxt  # type: ignore[misc]
                return
            if step.dst in path:
                yield step, End(EndKind.CYCLE, step.dst, cur)
                return
            yield step, None
            path += (step.dst,)
            cur = step.dst
        yield None, self.end(cur)
