"""Process rules: from the verdicts of a process's threads and the wait-for graph to the
process's verdict.

Contract: ``judge_process`` is a pure function. Only threads whose verdict ``decides`` count
(library helpers and threads folded into a pool do not), unless nothing else is left, in the
order its docstring gives. Blocked threads read the wait-for graph (waitgraph/build.py resolved
every wait once; it never resolves waits itself) and its chains (waitgraph/chain.py): the key
thread is the one the chain of the process goes through, not merely its main thread; the rules
for blocked threads (``deadlocked``, ``blocked``, ``idle``, ``unknown``): ``_judge_blocked``.
A rank that stopped joining a collective its peers spin in (collective.Straggler) is
``blocked`` with rule ``stopped-joining-collective``.
``waits_on`` lists the resolved waits; ``findings`` the evidence, each tied to its thread.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional

from ..job.collective import Straggler, straggler_evidence
from ..waitgraph.build import ResolvedWait
from ..vocab.nodes import real_id
from ..job.process_facts import ProcessFacts
from ..job.roles import Role
from ..vocab.verdict import (BLOCKED, BUSY, DEADLOCKED, EXITED, IDLE, PROGRESSING, UNKNOWN,
                             BlockKind, ThreadVerdict, Verdict)
from ..waitgraph.chain import Chains, EndKind
from ..waitgraph.graph import EdgeKind, WaitGraph, anode, pnode


@dataclass(frozen=True)
class Finding:
    """One line of evidence, tied to the thread it is about (None: the process as a whole)."""
    tid: Optional[int]
    text: str

    def render(self) -> str:
        if self.tid is None:
            return self.text
        tid = real_id(self.tid)      # 0: a log's unprefixed lines whose process it never names
        return f"{f'thread {tid}' if tid else 'the traced thread'}: {self.text}"


@dataclass
class ProcessVerdict:
    facts: ProcessFacts
    verdict: Verdict
    rule: str
    threads: Dict[int, ThreadVerdict]
    findings: List[Finding] = field(default_factory=list)
    key_tid: Optional[int] = None
    waits_on: List[ResolvedWait] = field(default_factory=list)
    block: Optional[BlockKind] = None

    @property
    def pid(self) -> int:
        return self.facts.pid

    @property
    def ppid(self) -> int:
        return self.facts.ppid

    @property
    def role(self) -> Role:
        return self.facts.role

    @property
    def label(self) -> str:
        return self.facts.label

    @property
    def exit_status(self) -> Optional[str]:
        return self.facts.gone

    @property
    def evidence(self) -> List[str]:
        return [f.render() for f in self.findings]

    def key_lines(self) -> List[str]:
        """The evidence as the tree's summary quotes it: the key thread's lines bare."""
        return [f.text if f.tid == self.key_tid else f.render() for f in self.findings]


def _deciding(tvs: Mapping[int, ThreadVerdict]) -> Dict[int, ThreadVerdict]:
    live = {tid: v for tid, v in tvs.items() if v.verdict not in (EXITED, UNKNOWN)}
    return {tid: v for tid, v in live.items() if v.decides} or live


def judge_process(pf: ProcessFacts, tvs: Dict[int, ThreadVerdict], graph: WaitGraph,
                  waits: List[ResolvedWait],
                  straggler: Optional[Straggler] = None,
                  labels: Optional[Mapping[int, str]] = None,
                  chains: Optional[Chains] = None) -> ProcessVerdict:
    """The verdict of one process (module doc). The deciding threads count in this order: a thread
    that progresses; a thread that spins (on the CPU or the GPU); a thread stopped by a signal
    (``stopped``: SIGSTOP or job control, it runs nothing until SIGCONT); threads blocked without
    timeout; threads that only tick (a watchdog, a heartbeat: they show the process is alive, and
    decide it only when it does nothing else, as a scheduler loop that never becomes ready); idle
    threads."""
    pv = ProcessVerdict(pf, UNKNOWN, "no-data", tvs)
    if pf.gone is not None:
        pv.verdict, pv.rule = EXITED, "process-exited"
        pv.findings = [Finding(None, pf.gone)]
        return pv
    # The collective edges of a rank spinning for a straggler are part of what it waits on.
    pv.waits_on = [w for w in waits if w.kind == EdgeKind.COLLECTIVE and w.tid in tvs
                   and tvs[w.tid].verdict != BLOCKED]
    deciding = _deciding(tvs)
    if not deciding:
        pv.findings = [Finding(None, "nothing recorded for this process")]
        return pv
    _judge_live(pv, graph, waits, deciding, chains or Chains(graph))
    if straggler is not None and pv.verdict != DEADLOCKED:
        pv.rule = "stopped-joining-collective"
        pv.block = None if pv.block == BlockKind.PEERS else pv.block
        pv.findings.append(Finding(None, straggler_evidence(straggler, labels or {})))
    return pv


def _judge_live(pv: ProcessVerdict, graph: WaitGraph, waits: List[ResolvedWait],
                deciding: Dict[int, ThreadVerdict], chains: Chains) -> None:
    pid = pv.pid

    def first(tids: List[int]) -> int:
        return pid if pid in tids else tids[0]

    progressing = [tid for tid, v in deciding.items() if v.verdict == PROGRESSING]
    if progressing:
        _from_thread(pv, PROGRESSING, first(progressing), deciding[first(progressing)])
        return
    spinning = [tid for tid, v in deciding.items() if v.verdict == BUSY and not v.ticks]
    if spinning:
        key = _chain_thread(pid, chains, spinning) or first(spinning)
        _from_thread(pv, BUSY, key, deciding[key])
        if all(graph.is_stuck(tid) for tid in spinning):
            # Every busy thread spin-waits for something that can never act (a peer rank
            # that died in the collective it spins in): spinning forever is a deadlock.
            pv.verdict, pv.rule, pv.block = DEADLOCKED, "spins-for-a-dead-peer", \
                BlockKind.STUCK
            pv.findings += [Finding(w.tid, w.what) for w in pv.waits_on]
        return
    stopped = [tid for tid, v in deciding.items() if v.stopped]
    if stopped:
        _from_thread(pv, BLOCKED, first(stopped), deciding[first(stopped)])
        pv.rule, pv.block = "stopped", BlockKind.STOPPED
        return
    blocked = {tid: v for tid, v in deciding.items() if v.verdict == BLOCKED and v.wait}
    if blocked:
        _judge_blocked(pv, graph, waits, blocked, chains)
        return
    ticking = [tid for tid, v in deciding.items() if v.verdict == BUSY]
    if ticking:
        _from_thread(pv, BUSY, first(ticking), deciding[first(ticking)])
        return
    idle = [tid for tid, v in deciding.items() if v.verdict == IDLE]
    key = pid if pid in idle else (idle[0] if idle else next(iter(deciding)))
    _from_thread(pv, IDLE, key, deciding[key])


def _ends_here(chains: Chains, pid: int, kind: EndKind) -> bool:
    """The chain of the process ends inside it, in ``kind``."""
    end = chains.end(pnode(pid))
    node = chains.g.nodes.get(end.node)
    return end.kind == kind and node is not None and node.pid == pid


def _chain_thread(pid: int, chains: Chains, among: List[int]) -> Optional[int]:
    """The thread of ``pid`` (one of ``among``) that the chain of the process goes through."""
    for step, _ in chains.steps(pnode(pid)):      # the first hops only
        if step is None:
            break
        node = chains.g.nodes[step.dst]
        if node.pid != pid:
            break
        if node.tid in among:
            return node.tid
    return None


def _from_thread(pv: ProcessVerdict, verdict: Verdict, key: int,
                 v: ThreadVerdict) -> ProcessVerdict:
    pv.verdict, pv.key_tid, pv.rule = verdict, key, f"thread-{v.rule}"
    pv.findings = [Finding(key, e) for e in v.evidence]
    return pv


def _inside(graph: WaitGraph, pid: int, tid: int) -> bool:
    """Every edge of thread ``tid`` leads to its own process (a thread of it, or any of them)."""
    return all(graph.nodes[e.dst].pid == pid and graph.nodes[e.dst].kind != "outside"
               for e in graph.out(f"T{tid}"))


def _held_most(graph: WaitGraph, pid: int, blocked: Mapping[int, ThreadVerdict]) -> Optional[int]:
    """In a process closed on itself: the blocked thread the most of its other threads wait
    for by name (the holder of the GIL or a lock), or None when no thread waits for another."""
    held = {tid: 0 for tid in blocked}
    # the edges out of the process's own nodes (its threads, P and A): not every edge per process
    for src in [n.id for n in graph.threads_of(pid)] + [pnode(pid), anode(pid)]:
        for e in graph.out(src):
            dst = graph.nodes[e.dst]
            if dst.tid in held and dst.pid == pid and graph.nodes[e.src].pid == pid:
                held[dst.tid] += 1
    best = max(held, key=lambda t: (held[t], t == pid, -t), default=None)
    return best if best is not None and held[best] > 0 else None


def _judge_blocked(pv: ProcessVerdict, graph: WaitGraph, waits: List[ResolvedWait],
                   blocked: Dict[int, ThreadVerdict], chains: Chains) -> None:
    """The verdict of a process whose deciding threads are blocked. Every blocked deciding thread
    stuck (nothing that can act can end its wait), or the chain of the process ending in a cycle or
    a dead end while none of its deciding threads can act -> ``deadlocked``:
    ``all-threads-blocked`` when all those waits stay inside the process and none of its threads
    can act, else ``wait-cycle-or-dead-end`` (the tree names the cycle or the dead process). A wait
    the GPU ends -> ``blocked`` (``waits-on-gpu``); a wait inside the process that no thread at
    work can end, only ticking or idle ones (the chain ends there: waitgraph/chain.py's
    UNKNOWN_WAKER) -> ``blocked`` (``waits-for-unknown-waker``); a collective -> ``blocked``
    (``waits-in-collective``); only outside waits -> ``idle`` (``waits-outside``); else ``blocked``
    on other processes that can still act (``waits-on-peers``). Every blocked deciding thread waits
    for children that have all exited (the wait returns: waitgraph/build.py's
    ``ResolvedWait.ended``) -> ``unknown`` (``waited-children-exited``): not stuck on a dead
    process; what it does once the call returns is past the recording."""
    pid = pv.pid
    pv.key_tid = _chain_thread(pid, chains, sorted(blocked)) or \
        (pid if pid in blocked else min(blocked))
    by_tid = {w.tid: w for w in waits}
    mine = [by_tid[tid] for tid in sorted(blocked) if tid in by_tid]
    pv.waits_on = mine + pv.waits_on
    pv.findings = [Finding(w.tid, w.what) for w in mine]
    kinds = {w.kind for w in mine}
    pv.verdict = BLOCKED
    if len(mine) == len(blocked) and all(w.ended for w in mine):
        # every wait returns (the children it waits for have exited): nothing to hold it
        pv.verdict, pv.rule = UNKNOWN, "waited-children-exited"
        return
    ends = chains.end(pnode(pid)).kind in (EndKind.CYCLE, EndKind.DEAD) \
        and not graph.can_act(pnode(pid))
    if all(graph.is_stuck(tid) for tid in blocked) or ends:
        pv.verdict, pv.block = DEADLOCKED, BlockKind.STUCK
        runs = any(graph.can_act(f"T{tid}") for tid in pv.threads)
        if all(_inside(graph, pid, tid) for tid in blocked) and not runs:
            # The parked threads are part of the picture now: list their waits too.
            extra = [w for w in waits if w.tid not in blocked and w.kind != EdgeKind.COLLECTIVE]
            pv.waits_on = mine + extra
            pv.findings = [Finding(w.tid, w.what) for w in pv.waits_on]
            pv.rule, pv.block = "all-threads-blocked", BlockKind.CLOSED
            pv.key_tid = _held_most(graph, pid, blocked) or pv.key_tid
            pv.findings.append(Finding(None, "no thread of the process runs, so none can end "
                                             "these waits"))
        else:
            pv.rule = "wait-cycle-or-dead-end"
            for q in sorted({q for w in mine for q in w.pids}):
                node = graph.nodes.get(f"P{q}")
                if node is not None and node.dead:
                    pv.findings.append(Finding(None, f"waits for {node.label}, which "
                                                     f"{node.dead_text.removeprefix('was ')}"))
    elif EdgeKind.GPU in kinds:
        pv.rule, pv.block = "waits-on-gpu", BlockKind.GPU
    elif _ends_here(chains, pid, EndKind.UNKNOWN_WAKER):
        pv.rule, pv.block = "waits-for-unknown-waker", BlockKind.UNKNOWN_WAKER
    elif EdgeKind.COLLECTIVE in kinds:
        pv.rule, pv.block = "waits-in-collective", BlockKind.COLLECTIVE
    elif kinds and kinds <= {EdgeKind.OUTSIDE}:
        # a wait for something owed (a lock, a connection, a device: chain.OWED_CALLS) is no
        # idle wait for input: blocked, as the tree it decides says
        owed = chains.end(pnode(pid)).kind == EndKind.OUTSIDE_STUCK
        pv.verdict = BLOCKED if owed else IDLE
        pv.rule, pv.block = "waits-outside", BlockKind.OUTSIDE
    else:
        pv.rule, pv.block = "waits-on-peers", BlockKind.PEERS
