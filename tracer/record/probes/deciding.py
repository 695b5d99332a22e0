"""Which processes hold the threads that may decide a verdict, as /proc shows them now: those
on a CPU or waiting for one (state R: a spin, the work that advances) and those in
uninterruptible sleep (state D: a driver call, a stuck filesystem) are where a chain of waits
can end; a process of threads that all sleep interruptibly is read after them.

Contract: ``deciding_first(pids)`` -> ``pids`` in that order (R, then D, then the rest; the
given order kept within each), from one read of each thread's /proc/PID/task/TID/stat; a
process gone or unreadable goes last. Reads only /proc. Pure helper ``rank(states)``.
The end probes that work through many processes (pystacks.py) or threads (kernel_stacks.py)
take them in this order, so that what a budget cuts is never the deciding thread's evidence.
"""
from __future__ import annotations

from typing import Dict, Iterable, List

from ...linux import procfs

__all__ = ["deciding_first", "rank", "RUNNING", "UNINTERRUPTIBLE", "OTHER"]

RUNNING, UNINTERRUPTIBLE, OTHER = 0, 1, 2


def rank(states: Iterable[str]) -> int:
    """RUNNING when a thread is in R, else UNINTERRUPTIBLE when one is in D, else OTHER."""
    seen = set(states)
    if "R" in seen:
        return RUNNING
    return UNINTERRUPTIBLE if "D" in seen else OTHER


def _states(pid: int, root: str) -> List[str]:
    st = procfs.read_stat(pid, root=root)
    if st is None:
        return []
    if st.num_threads == 1:
        return [st.state]
    out = []
    for tid in procfs.list_tids(pid, root):
        t = procfs.read_stat(pid, tid, root)
        if t is not None:
            out.append(t.state)
    return out


def deciding_first(pids: List[int], root: str = "/proc") -> List[int]:
    """``pids`` ordered by ``rank`` of their threads' states now (module doc)."""
    ranks: Dict[int, int] = {}
    for pid in pids:
        states = _states(pid, root)
        ranks[pid] = rank(states) if states else OTHER + 1
    return sorted(pids, key=lambda p: ranks[p])
