"""Partial hangs: threads stuck for the whole window while the tree as a whole goes on.

Contract: ``partial_hangs(tree_verdict, pvs, waits)`` is pure. When the tree is judged
progressing or idle (a server whose accept thread still answers while its request workers are
stuck), it groups the threads that sat in one wait without a time limit for the whole window by
the object they wait on (a mutex with its holder, a pipe, FIFO or socket, a futex without a
holder: ``partial_hangs``), and returns ``PartialHang`` records, most telling first.
Library helpers (known by name or behaviour) are left out: they park by design. The verdict
rules are unchanged: a stuck scheduler still decides the tree; this is a section of the report.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Tuple

from ..waitgraph.build import ResolvedWait
from .process import ProcessVerdict
from ..vocab.verdict import BLOCKED, IDLE, PROGRESSING, Verdict
from ..waitgraph.graph import EdgeKind, WaitGraph

__all__ = ["PartialHang", "partial_hangs"]


@dataclass
class PartialHang:
    kind: str                       # mutex, join, pipe, socket, futex
    what: str                       # the object: "mutex 0x55.. held by thread 812", "pipe:[9]"
    pid: int
    tids: List[int] = field(default_factory=list)
    certain: bool = True            # False: an idle pool waits like this too
    evidence: str = ""

    def to_json(self) -> Dict[str, object]:
        return {"kind": self.kind, "object": self.what, "pid": self.pid, "tids": self.tids,
                "certain": self.certain, "evidence": self.evidence}


def _key(pv: ProcessVerdict, tid: int, w: ResolvedWait) -> Tuple[str, str]:
    wait = pv.threads[tid].wait
    if w.kind in (EdgeKind.MUTEX, EdgeKind.JOIN) and wait is not None:
        # w.what: "futex 0x.. without timeout: mutex held by thread 812 [of pid N]"
        return str(w.kind), f"futex 0x{wait.futex_addr or 0:x} ({w.what.partition(': ')[2]})"
    if w.kind == EdgeKind.FUTEX and wait is not None:
        return "futex", f"futex 0x{wait.futex_addr or 0:x}"
    if wait is not None and wait.target.kind in ("pipe", "fifo", "tcp", "udp", "unix", "socket"):
        return ("pipe" if wait.target.kind in ("pipe", "fifo") else "socket"), wait.target.text
    return "", ""


def _holder_text(graph: WaitGraph, tid: int, pvs: Mapping[int, ProcessVerdict]) -> str:
    """What the holder of the mutex thread ``tid`` waits for is doing, if it waits itself."""
    for e in graph.out(f"T{tid}"):
        if e.kind not in (EdgeKind.MUTEX, EdgeKind.JOIN):
            continue
        node = graph.nodes.get(e.dst)
        if node is None or node.tid is None or node.pid not in pvs:
            return ""
        v = pvs[node.pid].threads.get(node.tid)
        if v is not None and v.wait is not None:
            return f"; its holder, thread {node.tid}, waits in {v.wait.describe()}"
        return f"; its holder, thread {node.tid}, is {v.verdict if v else 'unknown'}"
    return ""


def partial_hangs(tree: Verdict, pvs: Mapping[int, ProcessVerdict],
                  waits: Mapping[int, List[ResolvedWait]], graph: WaitGraph
                  ) -> List[PartialHang]:
    """The partial hangs of a tree judged progressing or idle (module doc), most telling first: a
    mutex (or pthread_join) whose holder the probe read: one waiter is enough ("3 threads wait for
    mutex 0x55.. held by thread 812"); a pipe, FIFO or socket read by two threads or more; a futex
    with no recorded holder waited on by two threads or more (a Python lock, a condition: an idle
    pool parks like this too, and the record says so)."""
    if tree not in (PROGRESSING, IDLE):
        return []
    groups: Dict[Tuple[int, str, str], PartialHang] = {}
    for pid, pv in pvs.items():
        by_tid = {w.tid: w for w in waits.get(pid, [])}
        for tid, v in sorted(pv.threads.items()):
            w = by_tid.get(tid)
            if v.verdict != BLOCKED or v.wait is None or w is None or v.helper is not None:
                continue
            if v.wait.timeout is not None or not v.wait.whole_window:
                continue
            kind, what = _key(pv, tid, w)
            if not kind:
                continue
            g = groups.setdefault((pid, kind, what), PartialHang(
                kind, what, pid, certain=kind in ("mutex", "join", "pipe", "socket"),
                evidence=w.what + (_holder_text(graph, tid, pvs) if kind in ("mutex", "join")
                                   else "")))
            g.tids.append(tid)
    out = [g for g in groups.values()
           if len(g.tids) >= 2 or g.kind in ("mutex", "join")]
    for g in out:
        if not g.certain:
            g.evidence += ("; no thread records holding it (a Python lock, a condition): an "
                           "idle pool waits like this too")
    order = {"mutex": 0, "join": 1, "pipe": 2, "socket": 2, "futex": 3}
    out.sort(key=lambda g: (order.get(g.kind, 9), -len(g.tids), g.pid))
    return out
