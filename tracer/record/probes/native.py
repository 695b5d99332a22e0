"""Native frames where py-spy gave none (attach/snapshot ``--native``): a stack scan of the
blocked threads (stackscan.py), never a pause.

Contract: ``scan_uncovered(pids, taken, analyzer)`` -> ``NativeStack`` events for the threads
of ``pids`` that have no native stack among ``taken`` (the events py-spy produced): every
thread of a process py-spy could not read (not Python, py-spy missing, refused), at most
``MAX_THREADS`` per process, the stuck ones first (the analyzer's ``stuck_waits``, then
threads sleeping now). A thread whose frames could not be gathered gets an event with
``error`` ("native frames not gathered: ..."), so the report says so in one line.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Set, Tuple

from ... import events as ev
from ...events.stacks import NativeStack
from ...linux import cancel, procfs
from .elfsyms import read_maps
from .stackscan import all_mappings, scan_thread

if TYPE_CHECKING:  # pragma: no cover
    from ...analysis.analyzer import Analyzer

__all__ = ["scan_uncovered", "MAX_THREADS", "NOT_GATHERED"]

MAX_THREADS = 64
NOT_GATHERED = "native frames not gathered"


def _covered(taken: Sequence[ev.Event]) -> Tuple[Set[Tuple[int, int]], Dict[int, str]]:
    """(threads with native frames, pid -> why py-spy failed for it)."""
    have = {(e.pid, e.tid) for e in taken if isinstance(e, NativeStack) and e.frames}
    failed = {e.pid: e.error for e in taken if isinstance(e, ev.PyStack) and e.error}
    return have, failed


def _order(pid: int, stuck: Set[int]) -> List[int]:
    tids = procfs.list_tids(pid)
    sleeping = []
    for tid in tids:
        st = procfs.read_stat(pid, tid)
        if st is not None and st.state in ("S", "D"):
            sleeping.append(tid)
    return sorted(set(tids) & stuck) + [t for t in sleeping if t not in stuck]


def scan_uncovered(pids: Sequence[int], taken: Sequence[ev.Event],
                   analyzer: Optional["Analyzer"] = None) -> List[NativeStack]:
    have, failed = _covered(taken)
    stuck: Dict[int, Set[int]] = {}
    if analyzer is not None:
        for pid, tid, _ in analyzer.stuck_waits(pids):
            stuck.setdefault(pid, set()).add(tid)
    out: List[NativeStack] = []
    now = time.time()
    for pid in pids:
        if any(p == pid for p, _ in have):
            continue
        maps = read_maps(pid)
        before = f" (py-spy: {failed[pid]})" if pid in failed else ""
        if not maps:
            out.append(NativeStack(ts=now, pid=pid, tid=0, source="stack-scan",
                                   error=f"{NOT_GATHERED}: /proc/PID/maps not readable{before}"))
            continue
        tids = _order(pid, stuck.get(pid, set()))
        regions = all_mappings(pid)
        for tid in cancel.checked(tids[:MAX_THREADS], every=8):
            s = scan_thread(pid, tid, maps, now, regions)
            if s.error and not s.frames:
                s.error = f"{NOT_GATHERED}: {s.error}{before}"
            out.append(s)
    return out
