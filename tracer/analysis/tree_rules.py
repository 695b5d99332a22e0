"""Tree rules: cross-process deadlocks, the tree's verdict and its root cause.

Contract: ``judge_tree`` is a pure function of the process verdicts. A ``blocked`` process is
``deadlocked`` when none of its waits can end: every wait leads, through other blocked
processes, only to cycles or to processes that have exited (a fixpoint over the wait-for graph:
a wait can end when it reaches a process that runs, the GPU, or something outside the tree).
The tree verdict is the most severe of: deadlocked > busy-waiting > blocked > progressing >
idle > exited (exited only when everything has exited). The root cause names the process (and
thread) that the others wait for, in words. Given the wait-for graph (waitgraph.py), a deadlock's
root cause ends with its proof: the cycle or the dead end, naming tids, pids and objects.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional, Set

from .accumulate import Recording
from .process_rules import ProcessVerdict, WaitEdge, exit_failed
from .thread_rules import BLOCKED, BUSY, DEADLOCKED, EXITED, IDLE, PROGRESSING, UNKNOWN

if TYPE_CHECKING:  # pragma: no cover
    from .waitgraph import WaitGraph

SEVERITY = [DEADLOCKED, BUSY, BLOCKED, PROGRESSING, IDLE, UNKNOWN, EXITED]


@dataclass
class RootCause:
    pid: Optional[int]
    tid: Optional[int]
    summary: str


@dataclass
class TreeVerdict:
    verdict: str
    rule: str
    root_cause: RootCause
    evidence: List[str] = field(default_factory=list)


def _alive_edge(e: WaitEdge, pv: ProcessVerdict) -> bool:
    # A wait on the GPU, on something outside the tree, or on a thread that still runs in the
    # same process (a lock, an eventfd this process holds too) can end without any other traced
    # process doing anything.
    if (e.kind == "eventfd" and e.self_holds) or e.kind == "thread":
        return any(v.verdict in (PROGRESSING, BUSY, IDLE) for tid, v in pv.threads.items()
                   if tid != e.tid)
    return e.kind in ("gpu", "outside")


def resolve_deadlocks(pvs: Dict[int, ProcessVerdict]) -> None:
    """Mark blocked processes whose waits can never end as deadlocked (module doc)."""
    can_end: Set[int] = {pid for pid, pv in pvs.items()
                         if pv.verdict in (PROGRESSING, BUSY, IDLE, UNKNOWN)}
    blocked = [pid for pid, pv in pvs.items() if pv.verdict == BLOCKED]
    for pid in blocked:
        pv = pvs[pid]
        if any(_alive_edge(e, pv) for e in pv.waits_on):
            can_end.add(pid)
    changed = True
    while changed:
        changed = False
        for pid in blocked:
            if pid in can_end:
                continue
            targets = [t for e in pvs[pid].waits_on for t in e.pids if t != pid]
            # Peers outside the traced set are unknown: assume they can act.
            if any(t in can_end or t not in pvs for t in targets):
                can_end.add(pid)
                changed = True
    for pid in blocked:
        if pid not in can_end:
            pv = pvs[pid]
            pv.verdict, pv.rule = DEADLOCKED, "wait-cycle-or-dead-end"
            for e in pv.waits_on:
                for t in e.pids:
                    q = pvs.get(t)
                    if q is not None and q.verdict == EXITED:
                        pv.evidence.append(f"waits for {q.label}, which {q.exit_status}")


def _waiters(pvs: Dict[int, ProcessVerdict], pid: int) -> List[ProcessVerdict]:
    return [pv for pv in pvs.values() if any(pid in e.pids for e in pv.waits_on)
            and pv.pid != pid]


def _depth(pvs: Dict[int, ProcessVerdict], pid: int) -> int:
    d, seen = 0, set()
    while pid in pvs and pid not in seen:
        seen.add(pid)
        pid = pvs[pid].ppid
        d += 1
    return d


def _waiter_text(pvs: Dict[int, ProcessVerdict], pid: int) -> str:
    parts = []
    for w in _waiters(pvs, pid):
        edge = next(e for e in w.waits_on if pid in e.pids)
        parts.append(f"{w.label} waits for it ({edge.kind}: {edge.what})")
    return "; ".join(parts)


def _pick(pvs: Dict[int, ProcessVerdict], verdict: str) -> Optional[ProcessVerdict]:
    hits = [pv for pv in pvs.values() if pv.verdict == verdict]
    if not hits:
        return None
    return max(hits, key=lambda pv: (len(_waiters(pvs, pv.pid)), _depth(pvs, pv.pid), -pv.pid))


def _cycle_text(pvs: Dict[int, ProcessVerdict], start: ProcessVerdict) -> str:
    parts, seen, cur = [], set(), start
    while cur is not None and cur.pid not in seen:
        seen.add(cur.pid)
        if cur.verdict == EXITED:           # the chain ends at a process that is gone
            parts.append(f"{cur.label} {cur.exit_status}" if cur is start else "")
            break
        nxt_pids = [t for e in cur.waits_on for t in e.pids if t != cur.pid]
        edge = next((e for e in cur.waits_on if e.pids), cur.waits_on[0] if cur.waits_on else None)
        parts.append(f"{cur.label} {edge.what}" if edge else f"{cur.label} is blocked")
        cur = pvs.get(nxt_pids[0]) if nxt_pids else None
    return "; ".join(p for p in parts if p)


def judge_tree(pvs: Dict[int, ProcessVerdict], rec: Recording,
               graph: Optional["WaitGraph"] = None) -> TreeVerdict:
    tree = _judge_tree(pvs, rec)
    if graph is None:
        return tree
    if tree.verdict == DEADLOCKED:
        stuck = sorted((pv for pv in pvs.values() if pv.verdict == DEADLOCKED),
                       key=lambda pv: (pv.pid != tree.root_cause.pid, -_depth(pvs, pv.pid)))
        starts = [t for pv in stuck for t in ([pv.key_tid] if pv.key_tid else []) + [pv.pid]]
        proof = graph.prove(starts)
        if proof is not None:
            tree.root_cause.summary += f". Proof, {proof.text}"
            tree.evidence.append(proof.text)
    else:
        from .waitgraph import definite_cycle
        proof = definite_cycle(graph)
        if proof is not None:
            graph.proof = proof
            tree.evidence.append("some threads are deadlocked although the tree goes on: "
                                 + proof.text)
    return tree


def _judge_tree(pvs: Dict[int, ProcessVerdict], rec: Recording) -> TreeVerdict:
    resolve_deadlocks(pvs)
    if not pvs:
        return TreeVerdict(UNKNOWN, "no-processes", RootCause(None, None, "nothing was recorded"))
    if all(pv.verdict == EXITED for pv in pvs.values()):
        root = min(pvs.values(), key=lambda pv: (not exit_failed(rec.processes[pv.pid]),
                                                 _depth(pvs, pv.pid)))
        return TreeVerdict(EXITED, "all-exited",
                           RootCause(root.pid, None, f"the tree is gone: {root.label} "
                                     f"{root.exit_status}"))
    # A process blocked on a live peer is decided by that peer: it does not set the tree's
    # verdict (a launcher waiting for healthy workers is not a blocked tree). Blocked on the GPU
    # (or on something outside the tree) it does.
    deciding = [pv.verdict for pv in pvs.values() if pv.verdict != EXITED
                and not (pv.verdict == BLOCKED and pv.rule == "waits-on-peers")]
    verdict = min(deciding or [BLOCKED], key=SEVERITY.index)
    dead = [pv for pv in pvs.values() if pv.verdict == EXITED and exit_failed(rec.processes[pv.pid])]
    if verdict == DEADLOCKED:
        return _deadlock_cause(pvs, dead)
    pick = _pick(pvs, verdict)
    assert pick is not None
    prefix = f"thread {pick.key_tid}: "
    lines = [e[len(prefix):] if e.startswith(prefix) else e for e in pick.evidence]
    lines = lines[:2] + [e for e in lines[2:] if e == "no output"]
    first = "; ".join(lines) or pick.rule
    thread = f" thread {pick.key_tid}" if pick.key_tid not in (None, pick.pid) else ""
    words = {BUSY: "busy-waits", BLOCKED: "is blocked", PROGRESSING: "makes progress",
             IDLE: "is idle", UNKNOWN: "could not be judged"}[verdict]
    if pick.rule == "waits-on-gpu":
        words = "waits for the GPU"
    summary = f"{pick.label}{thread} {words}: {first}"
    others = _waiter_text(pvs, pick.pid)
    if others:
        summary += f"; {others}"
    if verdict in (BUSY, BLOCKED) and dead:
        summary += "; " + "; ".join(f"{d.label} {d.exit_status}" for d in dead)
    return TreeVerdict(verdict, f"process-{pick.rule}", RootCause(pick.pid, pick.key_tid, summary))


def _deadlock_cause(pvs: Dict[int, ProcessVerdict], dead: List[ProcessVerdict]) -> TreeVerdict:
    stuck = [pv for pv in pvs.values() if pv.verdict == DEADLOCKED]
    start = max(stuck, key=lambda pv: (_depth(pvs, pv.pid), len(_waiters(pvs, pv.pid))))
    chain = _cycle_text(pvs, start)
    if dead:
        d = max(dead, key=lambda pv: _depth(pvs, pv.pid))
        summary = f"{d.label} {d.exit_status}; {chain}"
        return TreeVerdict(DEADLOCKED, "dead-peer", RootCause(d.pid, None, summary))
    if len(stuck) == 1 and stuck[0].rule == "all-threads-blocked":
        pv = stuck[0]
        waits = "; ".join(f"thread {e.tid} in {e.what}" for e in pv.waits_on[:4])
        summary = (f"{pv.label}: every thread is blocked without timeout ({waits}) "
                   "and none runs to wake the others")
        return TreeVerdict(DEADLOCKED, "in-process-deadlock", RootCause(pv.pid, pv.key_tid, summary))
    return TreeVerdict(DEADLOCKED, "wait-cycle", RootCause(start.pid, start.key_tid, chain))
