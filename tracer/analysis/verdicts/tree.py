"""Tree rules: the tree's verdict, its root cause and, for a deadlock, the proof.

Contract: ``judge_tree`` is a pure function of the process verdicts, the settled wait-for graph
and its chains (which already decided who is stuck: no fixpoint here). The root cause is where
the chain of waits ends, never merely the thread that ticks: every deciding thread of every
live process starts a chain (waitgraph/chain.py), and the tree verdict is that of the worst end
(``END_VERDICT``; how ends weigh and what the root cause names: ``judge_tree``). A rank that
stopped joining a collective while its peers spin is the root cause of a busy-waiting tree
(``collective-straggler``). A deadlock among some threads while the tree goes on is a note
(``NoteKind.PARTIAL_DEADLOCK``), not the verdict. A view that lacks part of what it traced
(view.py: sessions joined, a thread traced alone) proves no deadlock: such a verdict is
blocked, and no partial deadlock is noted.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..accumulate.accumulator import Recording
from ..accumulate.stats import ThreadStats
from ...events import Syscall
from ..job.collective import LagSource, Straggler, straggler_summary
from ..vocab.nodes import real_id
from ..job.process_facts import exit_failed
from ..vocab.waits import wait_from_call
from .chain_text import chain_line, end_line
from .served import a_server_progresses, ticks_after_progress
from .process import ProcessVerdict
from .kin import depths as _depths, waiter_counts as _waiter_counts, waiters as _waiters
from .view import end_severity, unproven, view_lacks
from ..vocab.verdict import (BLOCKED, BUSY, DEADLOCKED, EXITED, IDLE, PROGRESSING,
                             SILENT_WORK_RULES, SLOW_NOT_HUNG, UNKNOWN, BlockKind, Note, NoteKind,
                             Verdict)
from ..waitgraph.chain import SEVERITY as END_SEVERITY
from ..waitgraph.chain import WAITER_ENDS, Chains, End, EndKind
from ..waitgraph.graph import EdgeKind, NodeKind, Proof, WaitGraph, pnode

SEVERITY = [DEADLOCKED, BUSY, BLOCKED, PROGRESSING, IDLE, UNKNOWN, EXITED]


@dataclass
class RootCause:
    pid: Optional[int]
    tid: Optional[int]
    summary: str


@dataclass
class TreeVerdict:
    verdict: Verdict
    rule: str
    root_cause: RootCause
    notes: List[Note] = field(default_factory=list)


def _waiter_text(pvs: Mapping[int, ProcessVerdict], pid: int) -> str:
    parts = []
    for w in _waiters(pvs, pid):
        wait = next(x for x in w.waits_on if pid in x.pids)
        parts.append(f"{w.label} waits for it ({wait.kind}: {wait.what})")
    return "; ".join(parts)


def _pick(pvs: Mapping[int, ProcessVerdict], verdict: Verdict) -> Optional[ProcessVerdict]:
    hits = [pv for pv in pvs.values() if pv.verdict == verdict]
    if not hits:
        return None
    # The process others wait for; then one whose own main thread shows the verdict (not a
    # helper thread's chatter); then the deepest (a worker before its launcher).
    waiting, depth = _waiter_counts(pvs), _depths(pvs)
    return max(hits, key=lambda pv: (waiting.get(pv.pid, 0), pv.key_tid == pv.pid,
                                     depth[pv.pid], -pv.pid))


def _chain_text(pvs: Mapping[int, ProcessVerdict], start: ProcessVerdict) -> str:
    """start waits for X, which waits for Y ... (process level, up to a repeat or a dead one)."""
    parts, seen, cur = [], set(), start
    while cur is not None and cur.pid not in seen:
        seen.add(cur.pid)
        if cur.verdict == EXITED:           # the chain ends at a process that is gone
            if cur is start:
                parts.append(f"{cur.label} {cur.exit_status}")
            break
        nxt = [q for w in cur.waits_on for q in w.pids if q != cur.pid]
        wait = next((w for w in cur.waits_on if w.pids), cur.waits_on[0] if cur.waits_on else None)
        parts.append(f"{cur.label} {wait.what}" if wait else f"{cur.label} is blocked")
        cur = pvs.get(nxt[0]) if nxt else None
    return "; ".join(parts)


END_VERDICT = {EndKind.CYCLE: DEADLOCKED, EndKind.DEAD: DEADLOCKED, EndKind.SPIN: BUSY,
               EndKind.TICK: BUSY, EndKind.STOPPED: BLOCKED, EndKind.GPU: BLOCKED,
               EndKind.UNKNOWN_WAKER: BLOCKED, EndKind.WRITE_STUCK: BLOCKED,
               EndKind.OUTSIDE_STUCK: BLOCKED,
               EndKind.PROGRESS: PROGRESSING, EndKind.IDLE: IDLE, EndKind.OUTSIDE: IDLE,
               EndKind.UNKNOWN: UNKNOWN}


def _sources(pvs: Mapping[int, ProcessVerdict], graph: WaitGraph) -> List[str]:
    """Where the chains the tree is judged by start: each live process as a whole (``P``): a
    process goes on through the deciding thread that acts for it, so threads stuck while their
    process goes on are a partial hang (a note), not the tree's verdict."""
    return [pnode(pid) for pid, pv in sorted(pvs.items())
            if pv.verdict != EXITED and pnode(pid) in graph.nodes]


def _spins(pvs: Mapping[int, ProcessVerdict], graph: WaitGraph, chains: Chains) -> bool:
    """A deciding thread spin-waits (for a peer rank: it has edges of its own), for something
    other than work that advances (a spinning reader of a process that progresses waits for
    that work: waitgraph/spinners.py)."""
    return any(n.activity == "spin" and graph.out(n.id)
               and chains.end(n.id).kind != EndKind.PROGRESS for pid, pv in pvs.items()
               if pv.verdict != EXITED for n in graph.deciders(pid))


def _worst_end(pvs: Mapping[int, ProcessVerdict], graph: WaitGraph, chains: Chains,
               roots: Sequence[int],
               severity: Sequence[EndKind] = END_SEVERITY) -> Optional[Tuple[End, str]]:
    """(the worst end, the source whose chain shows it best): the end most chains share; the
    chain from the tree's root first, else the longest one."""
    ends = {src: chains.end(src) for src in _sources(pvs, graph)}
    if not ends:
        return None
    worst = min(severity.index(e.kind) for e in ends.values())
    hits = {src: e for src, e in ends.items() if severity.index(e.kind) == worst}
    shared: Dict[str, int] = {}
    for e in hits.values():
        shared[e.node] = shared.get(e.node, 0) + 1
    node = max(shared, key=lambda n: (shared[n], -_node_pid(graph, n)))
    srcs = [src for src, e in hits.items() if e.node == node]
    rooted = [src for src in srcs if graph.nodes[src].pid in roots]
    src = rooted[0] if rooted else max(srcs, key=lambda s: len(chains.walk(s).steps))
    return hits[src], src


def _node_pid(graph: WaitGraph, nid: str) -> int:
    return graph.nodes[nid].pid or 0


def judge_tree(pvs: Dict[int, ProcessVerdict], rec: Recording, graph: WaitGraph,
               stragglers: Sequence[Straggler] = (),
               chains: Optional[Chains] = None) -> TreeVerdict:
    """The tree's verdict and root cause (module doc). The worst end (``END_VERDICT``): a cycle or
    a dead end -> deadlocked, a spin or a process that only ticks -> busy-waiting, a wait on the
    GPU or on a waker that cannot be told -> blocked, progress -> progressing, idle or outside ->
    idle; exited only when everything has exited. A tree whose chains end in work that advances is
    progressing, however slow. The root cause names the thread the chain ends at (its pid and tid:
    the end most chains share, the one the tree's root reaches first), with the chain in one line;
    a deadlock's root cause ends with the graph's proof, naming tids, pids and objects."""
    chains = chains or Chains(graph)
    if not pvs:
        return TreeVerdict(UNKNOWN, "no-processes", RootCause(None, None, "nothing was recorded"))
    ended = _interrupted_wait(pvs, rec)
    if ended is not None:
        return ended
    if all(pv.verdict == EXITED for pv in pvs.values()):
        return _gone_cause(pvs, rec)
    lacks = view_lacks(rec.capabilities)     # a partial view proves no deadlock (view.py)
    for pv in pvs.values():
        pv.verdict = unproven(pv.verdict, lacks)
    severity = end_severity(rec.capabilities)
    found = _worst_end(pvs, graph, chains, rec.roots, severity)
    if found is not None and found[0].kind == EndKind.TICK and a_server_progresses(
            _sources(pvs, graph), rec, graph, chains):
        found = _worst_end(pvs, graph, chains, rec.roots, ticks_after_progress(severity))
    verdict = unproven(END_VERDICT[found[0].kind] if found else UNKNOWN, lacks)
    if _spins(pvs, graph, chains):
        # a rank that spin-waits for a peer busy-waits, whatever its chain ends in
        verdict = min(verdict, BUSY, key=SEVERITY.index)
    if any(pv.verdict == DEADLOCKED for pv in pvs.values()) and verdict != DEADLOCKED:
        verdict = DEADLOCKED        # a process closed on itself that no chain reaches first
    dead = [pv for pv in pvs.values() if pv.verdict == EXITED
            and exit_failed(rec.processes[pv.pid])]
    if verdict == DEADLOCKED:
        tree = _deadlock_cause(pvs, dead, stragglers)
        depth = _depths(pvs)
        stuck = sorted((pv for pv in pvs.values() if pv.verdict == DEADLOCKED),
                       key=lambda pv: (pv.pid != tree.root_cause.pid, -depth[pv.pid]))
        starts = [t for pv in stuck for t in ([pv.key_tid] if pv.key_tid else []) + [pv.pid]]
        proof = _chain_proof(graph, chains, found) or graph.prove(starts)
        line = chain_line(chains.walk(found[1]), graph) if found else ""
        if line and line not in tree.root_cause.summary and (
                proof is None or line not in proof.text):
            tree.root_cause.summary += f"; the chain: {line}"
        if proof is not None:
            tree.root_cause.summary += f". Proof, {proof.text}"
        return tree
    live_late = [st for st in stragglers if not st.dead]
    if verdict in (BUSY, BLOCKED) and live_late:
        tree = _straggler_cause(pvs, live_late[0], verdict)
    elif found is not None:
        tree = _chain_cause(pvs, verdict, dead, found, graph, chains)
    else:
        tree = _plain_cause(pvs, verdict, dead)
    proof = graph.definite_cycle() if not lacks else None
    if proof is not None:
        graph.proof = proof
        tree.notes.append(Note(NoteKind.PARTIAL_DEADLOCK, "some threads are deadlocked although "
                               "the tree goes on: " + proof.text))
    return tree


# Signals a user or a supervisor sends to end a process (a terminal's Ctrl-C, Ctrl-\\, kill,
# a closed terminal): one that interrupts a wait ends the hang the log shows.
ENDING_SIGNALS = ("SIGINT", "SIGTERM", "SIGQUIT", "SIGHUP")


def _interrupted_wait(pvs: Mapping[int, ProcessVerdict], rec: Recording) -> Optional[TreeVerdict]:
    """Blocked, rule ``interrupted-wait``: where the log shows the hang ended from outside. A
    thread's futex wait without timeout returns ERESTARTSYS (or EINTR) as SIGINT, SIGTERM,
    SIGQUIT or SIGHUP reaches its process, and what the process does after it is its end (a
    traceback written, an exit): that is not progress, and "exited" hides why it was stopped.
    Only where every process of the tree is such a one or has exited, and each such process
    shows no other thread at work (each other thread inside a futex wait that never returned):
    a worker that computed beside the waiting main thread makes it no hang."""
    found: List[Tuple[ProcessVerdict, ThreadStats, Syscall, str]] = []
    for pid, pv in pvs.items():
        p = rec.processes[pid]
        signal = next((s for s in ENDING_SIGNALS if p.signals.get(s)), None)
        threads = rec.threads_of(pid)
        waiting = [(t, t.interrupted) for t in threads if t.interrupted is not None]
        if signal is None or not waiting:
            if pv.verdict == EXITED:
                continue
            return None
        others = [t for t in threads if t.interrupted is None]
        if any(t.never_returned is None or t.never_returned.name != "futex" for t in others):
            return None
        found.append((pv, *waiting[0], signal))
    if not found:
        return None
    depth = _depths(pvs)
    pv, t, call, signal = min(found, key=lambda f: (depth[f[0].pid], f[0].pid))
    p = rec.processes[pv.pid]
    w = wait_from_call(call, p.info.fds if p.info else [])
    who = _thread_words(t)
    after = (f"then it {pv.exit_status}" if pv.verdict == EXITED else
             "what it did after (a traceback, its exit) is its end, not progress")
    return TreeVerdict(BLOCKED, "interrupted-wait", RootCause(pv.pid, t.tid, (
        f"{pv.label}: {who} was blocked in {w.describe()} until {signal} interrupted it (sent "
        f"from a terminal or another process: the hang ended from outside); {after}")))


def _thread_words(t: ThreadStats) -> str:
    """How a root cause's sentence names a thread of its process."""
    return "its main thread" if t.is_main else f"thread {real_id(t.tid)}"


def _gone_cause(pvs: Mapping[int, ProcessVerdict], rec: Recording) -> TreeVerdict:
    """Everything exited: the first process that failed (by the order of the exits: a log may
    have no times), else the tree's root, and what its threads were inside when it ended, where a call never
    returned (a thread stuck until it was killed)."""
    depth = _depths(pvs)

    def order(pv: ProcessVerdict) -> Tuple[int, int, int]:
        p = rec.processes[pv.pid]
        at = p.exit_order or 1 << 30
        if exit_failed(p):                 # the first to fail
            return (0, at, depth[pv.pid])
        return (1, depth[pv.pid], at)  # all clean: the tree's root
    root = min(pvs.values(), key=order)
    summary = f"the tree is gone: {root.label} {root.exit_status}"
    p = rec.processes[root.pid]
    fds = p.info.fds if p.info else []
    stuck = [(t, w) for t in rec.threads_of(root.pid) if t.never_returned is not None
             for w in [wait_from_call(t.never_returned, fds)] if w.timeout is None]
    stuck.sort(key=lambda tw: (not tw[0].is_main, tw[0].tid))
    tid = stuck[0][0].tid if stuck else (root.pid if (root.pid, root.pid) in rec.threads
                                         else None)
    for t, w in stuck[:3]:
        who = _thread_words(t)
        summary += (f"; before it ended, {who} was blocked in {w.describe()}, and the call "
                    "never returned")
    return TreeVerdict(EXITED, "all-exited", RootCause(root.pid, tid, summary))


def _chain_proof(graph: WaitGraph, chains: Chains,
                 found: Optional[Tuple[End, str]]) -> Optional[Proof]:
    """The cycle the worst chain ends in, as the proof (the waits named, in order)."""
    if found is None or found[0].kind != EndKind.CYCLE:
        return None
    chain = chains.walk(found[1])
    loop = [s.edge for s in chain.cycle() if s.edge is not None]
    if len(loop) < 2 or any(e.kind == EdgeKind.FUTEX for e in loop):
        return None             # a process closed on itself: the graph's own proof says it
    lead = [s.edge for s in chain.steps[:len(chain.steps) - len(chain.cycle())]
            if s.edge is not None]
    text = "cycle: " + "; ".join(e.text for e in loop)
    if lead:
        text = "; ".join(e.text for e in lead) + ", which is in a " + text
    graph.proof = Proof("cycle", lead + loop, [s.src for s in chain.cycle()], text)
    return graph.proof


def _chain_cause(pvs: Mapping[int, ProcessVerdict], verdict: Verdict,
                 dead: List[ProcessVerdict], found: Tuple[End, str], graph: WaitGraph,
                 chains: Chains) -> TreeVerdict:
    """The root cause where the chain ends (module doc)."""
    end, src = found
    at = end.before if end.kind in WAITER_ENDS and end.before else end.node
    where = graph.nodes[at]
    pv = pvs.get(where.pid or -1)
    if pv is None:                  # the chain ends outside every process (the GPU, outside)
        return _plain_cause(pvs, verdict, dead)
    chain = chains.walk(src)
    summary = end_line(end, graph, pvs, bool(chain.steps) and any(
        s.edge is not None and graph.nodes[s.src].pid != where.pid for s in chain.steps))
    line = chain_line(chain, graph, at)
    if line:
        summary += f"; the chain: {line}"
    on_chain = {graph.nodes[n].pid for n in chain.nodes}
    also = [f"{w.label} waits for it too ({x.kind}: {x.what})"
            for w in _waiters(pvs, pv.pid) if w.pid not in on_chain
            for x in [next(x for x in w.waits_on if pv.pid in x.pids)]]
    if also:
        summary += "; " + "; ".join(also)
    summary += _undecided_and_dead(pvs, pv, verdict, dead)
    tid = where.tid if where.kind == NodeKind.THREAD else None
    tv = pv.threads.get(tid) if tid is not None else None
    if verdict == PROGRESSING and tv is not None and tv.rule in SILENT_WORK_RULES:
        summary = SLOW_NOT_HUNG + summary
    rule = f"process-{pv.rule}"
    return TreeVerdict(verdict, rule, RootCause(pv.pid, tid if tid is not None else pv.key_tid,
                                                summary))


def _plain_cause(pvs: Mapping[int, ProcessVerdict], verdict: Verdict,
                 dead: List[ProcessVerdict]) -> TreeVerdict:
    # No process may have the verdict of a chain that ends outside every process (a thread
    # whose rows name a pid the table does not hold): the most severe process is named.
    pick = _pick(pvs, verdict) or min(pvs.values(), key=lambda pv: SEVERITY.index(pv.verdict))
    lines = pick.key_lines()
    lines = lines[:2] + [e for e in lines[2:] if e == "no output"]
    first = "; ".join(lines) or pick.rule
    thread = f" thread {real_id(pick.key_tid)}" if pick.key_tid not in (None, pick.pid) else ""
    words = _WORDS[verdict]
    if pick.block == BlockKind.GPU:
        words = "waits for the GPU"
    summary = f"{pick.label}{thread} {words}: {first}"
    others = _waiter_text(pvs, pick.pid)
    if others:
        summary += f"; {others}"
    summary += _undecided_and_dead(pvs, pick, verdict, dead)
    return TreeVerdict(verdict, f"process-{pick.rule}", RootCause(pick.pid, pick.key_tid, summary))


def _undecided_and_dead(pvs: Mapping[int, ProcessVerdict], pick: ProcessVerdict,
                        verdict: Verdict, dead: List[ProcessVerdict]) -> str:
    """What a root cause's summary adds after its chain: the ranks that look just like it (which
    one is behind cannot be told), and, for a tree still busy or blocked, the processes that
    failed."""
    text = ""
    alike = _alike_ranks(pvs, pick)
    if alike:
        text += (f"; {', '.join(p.label for p in alike)} "
                 f"{'does' if len(alike) == 1 else 'do'} the same: which rank is behind "
                 "cannot be told from here (no NCCL RAS answer, and their stacks, GPUs and "
                 "waits do not differ)")
    if verdict in (BUSY, BLOCKED) and dead:
        text += "; " + "; ".join(f"{d.label} {d.exit_status}" for d in dead)
    return text


def _alike_ranks(pvs: Mapping[int, ProcessVerdict], pick: ProcessVerdict) -> List[ProcessVerdict]:
    """The other ranks in the very state of ``pick`` (same verdict and rule), when ``pick`` is
    a rank no rule could single out: the root cause is then one of several, and says so."""
    # (its launcher waiting for it in wait4 says nothing: a launcher joins its ranks in turn)
    if not pick.facts.is_rank or any(w.pid != pick.ppid for w in _waiters(pvs, pick.pid)):
        return []
    return sorted((pv for pv in pvs.values() if pv.pid != pick.pid and pv.facts.is_rank
                   and pv.verdict == pick.verdict and pv.rule == pick.rule),
                  key=lambda pv: pv.pid)


_WORDS = {BUSY: "busy-waits", BLOCKED: "is blocked", PROGRESSING: "makes progress",
          IDLE: "is idle", UNKNOWN: "could not be judged", DEADLOCKED: "is deadlocked"}


def _straggler_cause(pvs: Mapping[int, ProcessVerdict], st: Straggler,
                     verdict: Verdict) -> TreeVerdict:
    late = pvs[st.pid]
    lines = [line for line in late.key_lines() if st.why not in line][:1]
    state = _WORDS.get(late.verdict, str(late.verdict)) + (f": {lines[0]}" if lines else "")
    labels = {pid: pv.label for pid, pv in pvs.items()}
    return TreeVerdict(verdict, "collective-straggler",
                       RootCause(st.pid, late.key_tid, straggler_summary(st, labels, state)))


def _deadlock_cause(pvs: Mapping[int, ProcessVerdict], dead: List[ProcessVerdict],
                    stragglers: Sequence[Straggler] = ()) -> TreeVerdict:
    # a chain that ends in a cycle or a dead end may reach no process judged deadlocked (a
    # dead thread the others wait for): the chain then starts from any process that waits
    stuck = [pv for pv in pvs.values() if pv.verdict == DEADLOCKED] or [
        pv for pv in pvs.values() if pv.verdict not in (PROGRESSING, IDLE, EXITED)] or list(
        pvs.values())
    waiting, depth = _waiter_counts(pvs), _depths(pvs)
    start = max(stuck, key=lambda pv: (depth[pv.pid], waiting.get(pv.pid, 0)))
    chain = _chain_text(pvs, start)
    gone = next((st for st in stragglers if st.dead and st.pid in pvs
                 and pvs[st.pid].verdict == EXITED), None)
    if gone is not None:             # a rank died in a collective its peers wait in
        d = pvs[gone.pid]
        waiting = "; ".join(f"{pvs[w].label} {doing}, waiting for it" for w, doing
                            in gone.waiters.items() if w in pvs)
        why = "" if gone.source == LagSource.EXIT else f": {gone.why}"
        return TreeVerdict(DEADLOCKED, "dead-peer", RootCause(
            d.pid, None, f"{d.label} {d.exit_status}{why}; {waiting}"))
    late = next((st for st in stragglers if not st.dead and st.pid in pvs
                 and st.source in (LagSource.STACKS, LagSource.THREADS)
                 and pvs[st.pid].verdict in (DEADLOCKED, BLOCKED)), None)
    if late is not None and not dead:   # the ranks' comparison names the one that differs
        return _straggler_cause(pvs, late, DEADLOCKED)
    if dead:
        d = max(dead, key=lambda pv: depth[pv.pid])
        return TreeVerdict(DEADLOCKED, "dead-peer",
                           RootCause(d.pid, None, f"{d.label} {d.exit_status}; {chain}"))
    if len(stuck) == 1 and stuck[0].block == BlockKind.CLOSED:
        pv = stuck[0]
        waits = "; ".join(f"thread {real_id(w.tid)} in {w.what}" for w in pv.waits_on[:4])
        summary = (f"{pv.label}: every thread is blocked without timeout ({waits}) "
                   "and none runs to wake the others")
        return TreeVerdict(DEADLOCKED, "in-process-deadlock",
                           RootCause(pv.pid, pv.key_tid, summary))
    return TreeVerdict(DEADLOCKED, "wait-cycle", RootCause(start.pid, start.key_tid, chain))
