"""Building the wait-for graph: the one place that resolves what a blocked thread waits on.

Contract: ``build_wait_graph(GraphInput)`` is pure (the recording, per-process facts, thread
verdicts, the end-of-recording probes' facts, the collective facts) and returns the settled
``WaitGraph`` plus, per process, one ``ResolvedWait`` per waiting thread (``BuiltGraph``): the
summary the report shows as ``waits_on`` (kind, a sentence, the other processes that could end
it). Each summary and its graph edges come from the same resolution, so a verdict and its proof
cannot disagree. Edges are alternatives: the wait ends when any of them acts. How each wait
resolves (a futex, a child, a pipe, a lock, an eventfd, a socket, a collective's straggler, a
spinner; across nodes in merged traces): ``build_wait_graph``'s docstring.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..accumulate.accumulator import Recording
from ..job.collective import LagSource, Straggler
from ..vocab.facts import WaitFacts
from ..vocab.nodes import node_of, real_id, same_node
from ..job.process_facts import FdIndex, ProcessFacts
from ..job.roles import is_gpu_event_thread
from ..job.stack_groups import collective_frame, python_sync_frame
from ..vocab.verdict import ACTIVE, BLOCKED, EXITED, IDLE, PROGRESSING, UNKNOWN, ThreadVerdict
from .fd_waits import FdWaits, ResolvedWait
from .graph import GPU, OUTSIDE, Edge, EdgeKind, Node, NodeKind, WaitGraph, anode, pnode, tnode
from .spinners import spinner_edges
from .stack_waits import stack_wait
from ..accumulate.log_owners import log_owner
from ..vocab.waits import LOCK_CALLS, Wait


@dataclass
class GraphInput:
    """What the graph is built from (module doc); ``stacks``: the Python frames py-spy saw, per
    (pid, tid)."""
    rec: Recording
    procs: Mapping[int, ProcessFacts]
    threads: Mapping[int, Mapping[int, ThreadVerdict]]      # pid -> tid -> verdict
    facts: WaitFacts
    peers: Mapping[int, Sequence[int]]                      # rank pid -> connected peer ranks
    stragglers: Sequence[Straggler] = ()
    stacks: Mapping[Tuple[int, int], Sequence[str]] = field(default_factory=dict)  # py-spy

@dataclass
class BuiltGraph:
    """The settled graph, and per pid its threads' ``ResolvedWait``s."""
    graph: WaitGraph
    waits: Dict[int, List[ResolvedWait]]                    # pid -> its threads' waits


def build_wait_graph(inp: GraphInput) -> BuiltGraph:
    """The settled graph and the waits (module doc). How a wait resolves (edges are alternatives:
    the wait ends when any of them acts; the waits the stacks explain are asked first,
    stack_waits.py):

    - futex: the owner the probe read from a glibc mutex (or the thread pthread_join waits for);
      else, in a rank connected to peer ranks, the peers (a collective), when the thread's Python
      stack is in a collective, or, without a stack, it is the main thread of a rank RANK or NCCL
      RAS names; else, in a process whose GPU event thread runs, the GPU (a blocking-sync wait);
      else the thread that last woke that address, or any other thread of the process
      (``A<pid>``).
    - wait4/waitid: the child (or every child) that has not exited; when every child it waits
      for has exited, the wait ends (it returns the zombie's status, or ECHILD once reaped): the
      thread gets no edge and can act (``ResolvedWait.ended``), never a dead end; a pipe read:
      the processes holding its write end, a pipe write (the pipe is full): the processes holding
      its read end; flock/fcntl(F_SETLKW): the processes holding a lock on the file (/proc/locks
      by inode, or the log's lock calls); an eventfd (named by its eventfd-id): every other
      process holding it, and the process itself when another of its threads could write it; a
      socket: the process at the other end (TCP by reversed addresses, unix by strace -yy's peer
      inode or sock_diag's); a file or device on a FUSE, network or device file system, or in D
      state (the storage-waits probe's facts): blocked on it, its FUSE daemon the next hop
      (fd_waits.storage); anything else: outside.
    - In merged traces a TCP 4-tuple between nodes links their processes; every other object
      (pipe, eventfd, unix socket, futex, loopback) only processes of one node (nodes.py). Texts
      name pids and tids as their node knows them (``ProcessFacts.ref``, nodes.real_id).
    - A rank spin-waiting on its GPU in a collective while a peer stopped joining
      (collective.Straggler) waits for that peer.
    - A thread that spins (no wait, no progress: a reader polling a non-blocking pipe) in a
      process holding a pipe's read end whose writers include a descendant process that makes
      progress waits for that work (spinners.py): its chain goes on to that process."""
    b = _Builder(inp)
    b.build()
    b.g.settle()
    return BuiltGraph(b.g, b.waits)


class _Builder(FdWaits):
    def __init__(self, inp: GraphInput) -> None:
        self.inp, self.rec, self.procs = inp, inp.rec, inp.procs
        self.fdx = FdIndex(inp.rec, dict(inp.procs))
        self.g = WaitGraph()
        self.waits: Dict[int, List[ResolvedWait]] = {}
        self.late = {s.pid: s for s in inp.stragglers}
        # node index -> name (merged traces), for pids outside the traced tree
        self.node_names = {node_of(p): pf.node for p, pf in inp.procs.items() if pf.node}
        # per process, computed once (a futex wait per thread asked them: quadratic)
        self._pollers: Dict[int, Optional[int]] = {}
        self._active: Dict[int, List[int]] = {}
        self._tids: Dict[int, set] = {}                      # pid -> its tids (log_owner)

    # ------------------------------------------------------------------ nodes
    def plabel(self, pid: int) -> str:
        pf = self.procs.get(pid)
        return pf.label if pf is not None else self.ref(pid)

    def ref(self, pid: int) -> str:
        """"pid 42" ("pid 42 on node b"): a process in a list."""
        pf = self.procs.get(pid)
        if pf is not None:
            return pf.ref
        node = self.node_names.get(node_of(pid))
        return f"pid {real_id(pid)}" + (f" on node {node}" if node else "")

    def refs(self, pids: Sequence[int]) -> str:
        return ", ".join(self.ref(q) for q in pids)

    def tlabel(self, pid: int, tid: int) -> str:
        return self.plabel(pid) if tid == pid else \
            f"thread {real_id(tid)} of {self.plabel(pid)}"

    def process(self, pid: int, any_thread: bool = False) -> str:
        nid = anode(pid) if any_thread else pnode(pid)
        if nid not in self.g.nodes:
            pf = self.procs.get(pid)
            if pf is None:
                self.g.add_node(Node(nid, NodeKind.OUTSIDE,
                                     f"{self.ref(pid)} (outside the traced tree)", pid=pid))
            else:
                label = f"another thread of {pf.label}" if any_thread else pf.label
                self.g.add_node(Node(nid, NodeKind.ANY_THREAD if any_thread
                                     else NodeKind.PROCESS, label, pid=pid,
                                     state="exited" if pf.gone else "",
                                     dead=pf.gone is not None, dead_text=_dead_text(pf.gone),
                                     untraced=any_thread and pf.threads_partial))
        return nid

    def thread(self, pid: int, tid: int) -> str:
        nid = tnode(tid)
        if nid in self.g.nodes:
            return nid
        pf = self.procs.get(pid)
        tv = self.inp.threads.get(pid, {}).get(tid)
        t = self.rec.threads.get((pid, tid))
        n = Node(nid, NodeKind.THREAD, self.tlabel(pid, tid), pid=pid, tid=tid,
                 state=str(tv.verdict) if tv else "unknown", decides=tv.decides if tv else True)
        if pf is not None and pf.gone is not None:
            n.dead, n.state, n.dead_text = True, "exited", _dead_text(pf.gone)
        elif (t is not None and t.exited_at is not None) or (tv and tv.verdict == EXITED):
            n.dead, n.state, n.dead_text = True, "exited", "has exited"
        # a stopped thread can act again once it gets SIGCONT: not stuck, not at work
        n.active = not n.dead and (tv is None or tv.verdict in ACTIVE or tv.stopped)
        n.activity = "dead" if n.dead else _activity(tv)
        n.call = tv.wait.call if tv is not None and tv.wait is not None else ""
        n.polls = tv is not None and tv.polls
        n.lock_wait = tv is not None and tv.wait is not None and tv.wait.waits_for_a_lock
        n.owed = tv is not None and tv.wait is not None and tv.wait.awaits_reply
        self.g.add_node(n)
        self.process(pid)
        return nid

    def special(self, nid: str, kind: NodeKind, label: str, dead: bool = False,
                dead_text: str = "") -> str:
        if nid not in self.g.nodes:
            self.g.add_node(Node(nid, kind, label, state=str(kind), dead=dead,
                                 dead_text=dead_text))
        return nid

    def edge(self, src: str, dst: str, kind: EdgeKind, obj: str, text: str) -> None:
        self.g.add_edge(Edge(src, dst, kind, obj, text))

    # ------------------------------------------------------------------ walk
    def build(self) -> None:
        for pid, tvs in sorted(self.inp.threads.items()):
            for tid in sorted(tvs):
                self.thread(pid, tid)
        for pid, tvs in sorted(self.inp.threads.items()):
            pf = self.procs.get(pid)
            if pf is None or pf.gone is not None:
                continue
            for tid, tv in sorted(tvs.items()):
                if tv.verdict == BLOCKED and tv.wait is not None and not tv.stopped:
                    r = self.resolve(pid, tid, tv.wait)
                    self.waits.setdefault(pid, []).append(r)
        for st in self.inp.stragglers:
            self.straggler_edges(st)
        spinner_edges(self)

    def resolve(self, pid: int, tid: int, w: Wait) -> ResolvedWait:
        src = tnode(tid)
        who = self.g.nodes[src].label
        # issue 24: waits the stacks explain (the GIL's holder, the GPU driver, vfork)
        found = stack_wait(self, pid, tid, src, who, w)
        if found is not None:
            return ResolvedWait(tid, *found)
        if w.call == "futex":
            r = self.futex(pid, tid, src, who, w)
        elif w.call in ("wait4", "waitid"):
            r = self.child(pid, tid, src, who, w)
        elif w.call in LOCK_CALLS:
            r = self.file_lock(pid, tid, src, who, w)
        elif w.fd_kind in ("pipe", "fifo") and w.fd_target:
            r = self.pipe(pid, tid, src, who, w)
        elif w.fd_kind == "eventfd" and self.eventfd_of(pid, w):
            r = self.eventfd(pid, tid, src, who, w, self.eventfd_of(pid, w) or "")
        elif w.fd_kind in ("unix", "socket", "tcp", "udp") and w.fd_target:
            r = self.socket(pid, tid, src, who, w)
        else:
            r = self.storage(pid, tid, src, who, w) or self.outside(
                tid, src, who, w, f"waits in {w.describe()}")
        return r

    def outside(self, tid: int, src: str, who: str, w: Wait, what: str,
                why: str = "") -> ResolvedWait:
        self.edge(src, self.special(OUTSIDE, NodeKind.OUTSIDE, "outside the traced tree"),
                  EdgeKind.OUTSIDE, w.describe(), f"{who} waits in {w.describe()}{why}")
        return ResolvedWait(tid, EdgeKind.OUTSIDE, what)

    # ------------------------------------------------------------------ futexes
    def futex(self, pid: int, tid: int, src: str, who: str, w: Wait) -> ResolvedWait:
        addr = w.futex_addr or 0
        base = f"futex 0x{addr:x} without timeout"
        lock = self.inp.facts.stacks.lock_call(pid, tid)
        if lock:                       # its native stack (strace -k, py-spy, ...) says which
            base += f", a lock wait ({lock}): its holder ends it"
        fo = self.inp.facts.owner(pid, w.futex_addr) or self.log_owner(pid, tid, w)
        if fo is not None and fo.owner_tid and fo.kind in ("mutex", "pi-mutex", "join"):
            return self.owned_futex(pid, tid, src, who, addr, base, fo)
        peers = [] if pid in self.late or not self.in_collective(pid, tid) \
            else list(self.inp.peers.get(pid, []))
        if peers:
            for q in peers:
                self.edge(src, self.process(q), EdgeKind.COLLECTIVE, "collective",
                          f"{who} waits in a collective for {self.plabel(q)}")
            return ResolvedWait(tid, EdgeKind.COLLECTIVE, base + (
                "; connected (gloo/TCPStore sockets) to " + self.refs(peers)
                + ": waits in a collective for them"), peers)
        poller = self.gpu_poller(pid)
        if poller is not None and pid not in self.late and not self.python_wait(pid, tid):
            what = (f"{base}; thread {real_id(poller)} polls the GPU's fds and wakes it when "
                    "the GPU finishes (blocking-sync wait on the GPU: the kernel or copy it "
                    "waits for has not completed)")
            self.edge(src, self.special(GPU, NodeKind.GPU, "the GPU"), EdgeKind.GPU, "GPU",
                      f"{who} waits for the GPU ({what})")
            return ResolvedWait(tid, EdgeKind.GPU, what)
        waker = self.rec.futex_wakers.get(addr)
        if waker is not None and not same_node(waker[0], pid):
            waker = None           # the same address in a process of another node
        if waker is not None and waker[1] != tid:
            dst = self.thread(*waker)
            self.edge(src, dst, EdgeKind.FUTEX, f"futex 0x{addr:x}",
                      f"{who} waits on futex 0x{addr:x}, last woken by {self.g.nodes[dst].label}")
        else:
            why = f" ({fo.why})" if fo is not None and fo.why else ""
            self.edge(src, self.process(pid, any_thread=True), EdgeKind.FUTEX,
                      f"futex 0x{addr:x}",
                      f"{who} waits on futex 0x{addr:x} with unknown holder{why}")
        running = [t for t in self.active_threads(pid)[:5] if t != tid]
        what = base
        if pid in self.late:
            what += (" (a wait inside the process: its GPU is idle, so it is not in the "
                     "collective)" if self.late[pid].source == LagSource.NVML else
                     f" (a wait inside the process: it is not in the collective, by "
                     f"{self.late[pid].source})")
        elif running:
            what += (f"; threads {', '.join(str(real_id(t)) for t in running[:4])} still run "
                     "and could wake it")
        other = [] if waker is None or waker[0] == pid else [waker[0]]
        return ResolvedWait(tid, EdgeKind.FUTEX, what, other, inside=not other)

    def python_wait(self, pid: int, tid: int) -> bool:
        """The thread's Python stack waits on a queue, condition, event or lock: it waits for
        another thread, not for the GPU (a serving rank's main thread waits on its runner)."""
        return bool(python_sync_frame(self.inp.stacks.get((pid, tid)) or ()))

    def in_collective(self, pid: int, tid: int) -> bool:
        """A futex wait of a rank's thread is a wait in a collective when its Python stack is in
        one; without a stack, when it is the main thread of a rank its environment or NCCL RAS
        names (torchrun's ranks run their collectives there; a serving rank's main thread waits
        on a queue for its runner)."""
        frames = self.inp.stacks.get((pid, tid))
        if frames:
            return bool(collective_frame(frames))
        pf = self.procs.get(pid)
        return tid == pid and pf is not None and pf.role.kind == "rank"

    def log_owner(self, pid: int, tid: int, w: Wait):
        """The futex's owner as the log shows it (accumulate/log_owners.py): pthread_join of a
        thread by its tid, a lock a fault handler waits for that its own fault left held."""
        t = self.rec.threads.get((pid, tid))
        if t is None:
            return None
        ns = self.inp.facts.stacks.native.get((pid, tid))
        frames = ns.frames if ns is not None and ns.source.startswith("strace -k, at") else ()
        return log_owner(pid, t, w, self.tids_of(pid), frames)

    def tids_of(self, pid: int) -> set:
        if pid not in self._tids:
            self._tids[pid] = {t for (p, t) in self.rec.threads if p == pid}
        return self._tids[pid]

    def owned_futex(self, pid: int, tid: int, src: str, who: str, addr: int, base: str,
                    fo) -> ResolvedWait:
        owner = fo.owner_tid
        dst = self.owner_node(fo)
        holder = self.g.nodes[dst].label
        if fo.kind == "join":
            self.edge(src, dst, EdgeKind.JOIN, f"futex 0x{addr:x}",
                      f"{who} waits for {holder} to exit (pthread_join, futex 0x{addr:x})")
            what = (f"{base}: pthread_join of thread {real_id(owner)}, which holds it until it "
                    "exits")
        else:
            shared = "process-shared " if fo.shared else ""
            pi = "PI " if fo.kind == "pi-mutex" else ""
            self.edge(src, dst, EdgeKind.MUTEX, f"mutex 0x{addr:x}",
                      f"{who} waits for {shared}{pi}mutex 0x{addr:x} held by {holder}")
            what = f"{base}: {shared}mutex held by thread {real_id(owner)}" + (
                f" ({fo.why})" if fo.why and owner == tid else "")
        opid = self.g.nodes[dst].pid
        kind = EdgeKind.JOIN if fo.kind == "join" else EdgeKind.MUTEX
        if self.g.nodes[dst].kind == NodeKind.GONE:
            return ResolvedWait(tid, kind, what + ", which no longer exists")
        if opid is None or opid == pid:
            return ResolvedWait(tid, kind, what, inside=True)
        return ResolvedWait(tid, kind, what + f" of {self.ref(opid)}", [opid])

    def owner_node(self, fo) -> str:
        tid = fo.owner_tid or 0
        pid = fo.owner_pid
        if pid is None:        # not found at probe time: was it a thread of the recording?
            pid = next((p for (p, t) in self.rec.threads if t == tid), None)
            if pid is None and tid in self.rec.processes:
                pid = tid
        if pid is None:
            return self.special(tnode(tid), NodeKind.GONE, f"thread {real_id(tid)}", dead=True,
                                dead_text="no longer exists (it exited holding the lock)")
        if pid not in self.procs:
            return self.special(tnode(tid), NodeKind.OUTSIDE,
                                f"thread {real_id(tid)} of {self.ref(pid)} (outside the traced "
                                "tree)")
        return self.thread(pid, tid)

    def active_threads(self, pid: int) -> List[int]:
        """The process's threads judged active (not unknown), in tid order (once per process)."""
        if pid not in self._active:
            self._active[pid] = [t for t, v in sorted(self.inp.threads.get(pid, {}).items())
                                 if v.verdict in ACTIVE and v.verdict != UNKNOWN]
        return self._active[pid]

    def gpu_poller(self, pid: int) -> Optional[int]:
        """A live thread polling /dev/nvidia* fds: libcuda's event handler, the one that wakes a
        blocking-sync wait when the GPU signals completion (once per process)."""
        if pid not in self._pollers:
            self._pollers[pid] = self._find_gpu_poller(pid)
        return self._pollers[pid]

    def _find_gpu_poller(self, pid: int) -> Optional[int]:
        for tid, v in sorted(self.inp.threads.get(pid, {}).items()):
            if v.verdict in (EXITED, BLOCKED, UNKNOWN):
                continue
            t = self.rec.threads.get((pid, tid))
            if t is not None and (t.poll_fd_kinds.get("nvidia") or is_gpu_event_thread(t.comm)):
                return tid
        return None

    # ------------------------------------------------------------------ processes and fds
    def child(self, pid: int, tid: int, src: str, who: str, w: Wait) -> ResolvedWait:
        """wait4/waitid: edges to the children it waits for that have not exited. A child
        that exited was reaped by an earlier wait, or is a zombie this wait returns at once;
        so when every child it waits for has exited, the wait ends (``child_exited``)."""
        pf = self.procs.get(pid)
        kids = [w.child] if w.child is not None and w.child > 0 else list(pf.children if pf else [])
        alive = [c for c in kids if self.exited(c) is None]
        if kids and not alive:
            return self.child_exited(tid, src, w, kids)
        for c in alive:
            self.edge(src, self.process(c), EdgeKind.CHILD, w.call,
                      f"{who} waits for {self.plabel(c)} in {w.call}")
        if not kids:
            self.edge(src, self.special(OUTSIDE, NodeKind.OUTSIDE, "outside the traced tree"),
                      EdgeKind.OUTSIDE, w.describe(), f"{who} waits in {w.describe()}")
        what = "waits for " + (self.ref(alive[0]) if len(kids) == 1 else "its children") \
            + f" in {w.call}"
        return ResolvedWait(tid, EdgeKind.CHILD, what, alive)

    def exited(self, pid: int) -> Optional[str]:
        """How traced process ``pid`` ended ("exited with status 0"), None while it lives."""
        pf = self.procs.get(pid)
        return pf.gone if pf is not None else None

    def child_exited(self, tid: int, src: str, w: Wait, kids: List[int]) -> ResolvedWait:
        """Every child the wait is for has exited: the wait returns (the zombie's status, or
        ECHILD once it is reaped), so the thread is not stuck on a dead process. It gets no
        edge and acts as a thread that does not wait; what it does once the call returns is
        past the recording (activity ``unknown``)."""
        node = self.g.nodes[src]
        node.active, node.activity = True, "unknown"
        gone = "; ".join(f"{self.ref(c)} {self.exited(c)}" for c in kids[:4]) \
            + (f"; and {len(kids) - 4} more" if len(kids) > 4 else "")
        what = (f"waits for {self.ref(kids[0]) if len(kids) == 1 else 'its children'} in "
                f"{w.call}, and {'it has' if len(kids) == 1 else 'every one has'} exited "
                f"({gone}): the wait returns")
        return ResolvedWait(tid, EdgeKind.CHILD, what, [], ended=True)

    # ------------------------------------------------------------------ collectives
    def straggler_edges(self, st: Straggler) -> None:
        """Each rank waiting in the collective waits for the one that stopped: an edge from
        its thread that waits (spinning on the GPU, or blocked) to the straggler."""
        late = self.plabel(st.pid)
        for w, doing in sorted(st.waiters.items()):
            tvs = self.inp.threads.get(w, {})
            waiting = [tid for tid, v in sorted(tvs.items()) if v.decides
                       and (v.gpu_wait or (v.verdict == BLOCKED and v.wait is not None))]
            tid = w if w in waiting else (waiting[0] if waiting else w)
            if tnode(tid) in self.g.nodes:
                self.edge(tnode(tid), self.process(st.pid), EdgeKind.COLLECTIVE, "collective",
                          f"{self.g.nodes[tnode(tid)].label} {doing}, waiting for {late}, "
                          "which has not joined")
            if not any(x.tid == tid and st.pid in x.pids for x in self.waits.get(w, [])):
                self.waits.setdefault(w, []).append(ResolvedWait(
                    tid, EdgeKind.COLLECTIVE, f"{doing}, waiting for {late}, which has not "
                    "joined", [st.pid]))


def _activity(tv: Optional[ThreadVerdict]) -> str:
    """What a live thread does, as the graph's fixpoint and the chain of waits tell them apart."""
    if tv is None:
        return "unknown"
    if tv.stopped:
        return "stopped"
    return {PROGRESSING: "progress", IDLE: "idle", UNKNOWN: "unknown", BLOCKED: "wait",
            EXITED: "dead"}.get(tv.verdict, "tick" if tv.ticks else "spin")


def _dead_text(gone: Optional[str]) -> str:
    if not gone:
        return ""
    return ("was " + gone) if gone.startswith("killed") else gone
