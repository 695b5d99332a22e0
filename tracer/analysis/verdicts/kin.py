"""Where a process stands among the others of its tree: who waits for it, how deep it is.

Contract: pure functions of the process verdicts (``ProcessVerdict``: its ``ppid`` and its
resolved waits), each linear in the processes and their waits (a tree of 10^4 processes in one
chain, or 10^4 waiters of one process, is walked once: issue 46 item 8). tree.py's rules order
processes by these figures (the one others wait for; the deepest).
"""
from __future__ import annotations

from typing import Dict, List, Mapping

from .process import ProcessVerdict


def waiters(pvs: Mapping[int, ProcessVerdict], pid: int) -> List[ProcessVerdict]:
    """The processes (other than ``pid``) one of whose waits names ``pid``."""
    return [pv for pv in pvs.values() if pv.pid != pid
            and any(pid in w.pids for w in pv.waits_on)]


def waiter_counts(pvs: Mapping[int, ProcessVerdict]) -> Dict[int, int]:
    """pid -> len(waiters(pvs, pid)), for every pid, in one pass over the waits."""
    counts: Dict[int, int] = {}
    for pv in pvs.values():
        for q in {q for w in pv.waits_on for q in w.pids if q != pv.pid}:
            counts[q] = counts.get(q, 0) + 1
    return counts


def depths(pvs: Mapping[int, ProcessVerdict]) -> Dict[int, int]:
    """pid -> its depth in the tree (itself and its ancestors among ``pvs``; a parent cycle,
    which no real tree has, counted once), every pid in one pass: each parent link is followed
    once (memoised), so a chain of N processes costs N steps, not N*N/2."""
    depth: Dict[int, int] = {}
    for start in pvs:
        path: List[int] = []
        on_path: Dict[int, int] = {}
        pid = start
        while pid in pvs and pid not in depth and pid not in on_path:
            on_path[pid] = len(path)
            path.append(pid)
            pid = pvs[pid].ppid
        if pid in on_path:                  # a parent cycle: each of its members counts it once
            loop = len(path) - on_path[pid]
            for q in path[on_path[pid]:]:
                depth[q] = loop
            path = path[:on_path[pid]]
            base = loop
        else:
            base = depth.get(pid, 0)
        for q in reversed(path):
            base += 1
            depth[q] = base
    return depth
