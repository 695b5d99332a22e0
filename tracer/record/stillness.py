"""Which processes did nothing between two looks: what a probe would read of them again is as
it was then, by their own doing.

Contract:
- ``RunCounts()``; ``add(pid)`` keeps its threads' run counts and on-CPU time
  (/proc/PID/task/TID/schedstat) and its user CPU ticks and page faults (/proc/PID/stat) now.
- ``still(pids)``: those none of whose threads was put on a CPU since (the scheduler counts
  each run, exactly; a thread woken but not yet run counts as still).
- ``quiet(pids, callers)``, where ptrace's attach woke every thread: those not in ``callers``
  (seen completing a call) with the same threads, user ticks and major faults and at most
  ``RESTART_FAULTS`` more minor ones. A process not added, gone or unreadable is neither.
"""
from __future__ import annotations

from typing import Collection, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from ..linux import procfs

__all__ = ["RunCounts"]

# ptrace's attach makes a thread asleep in a call restart it: that one instruction can fault
# its page in again (the kernel reclaims an idle process's pages: 45 of 300 did, by one)
RESTART_FAULTS = 2
Threads = Tuple[Tuple[int, bytes], ...]       # (tid, its schedstat's run_ns and run count)
Totals = Tuple[Tuple[int, ...], int, int, int]  # (tids, utime, minflt, majflt)


def _threads(pid: int, root: str, tids: Optional[List[int]] = None) -> Optional[Threads]:
    """(tid, "RUN_NS COUNT") of each thread (of ``tids``: listed just before), None when
    unreadable or not kept."""
    out = []
    for tid in procfs.list_tids(pid, root) if tids is None else tids:
        fields = (procfs.read_bytes(f"{root}/{pid}/task/{tid}/schedstat") or b"").split()
        if len(fields) < 3 or (fields[0] == b"0" and fields[2] == b"0"):
            return None             # gone, denied, or no scheduler statistics kept
        out.append((tid, fields[0] + b" " + fields[2]))
    return tuple(out) or None


def _totals(pid: int, root: str) -> Optional[Totals]:
    st = procfs.read_stat(pid, root=root)
    if st is None:
        return None
    return tuple(procfs.list_tids(pid, root)), st.utime, st.minflt, st.majflt


class RunCounts:
    """What ``still`` and ``quiet`` compare with, per process (module doc)."""

    def __init__(self, root: str = "/proc") -> None:
        self.counts: Dict[int, Threads] = {}
        self.totals: Dict[int, Totals] = {}
        self.root = root

    def add(self, pid: int) -> None:
        totals = _totals(pid, self.root)
        threads = _threads(pid, self.root)
        if threads is not None and totals is not None:
            self.counts[pid], self.totals[pid] = threads, totals

    @classmethod
    def read(cls, pids: Iterable[int], root: str = "/proc") -> "RunCounts":
        out = cls(root)
        for pid in pids:
            out.add(pid)
        return out

    def still(self, pids: Iterable[int],
              tids: Optional[Mapping[int, List[int]]] = None) -> Set[int]:
        """Those of ``pids`` whose threads did not run since ``add`` (module doc); ``tids``:
        their threads, when the caller has just listed them."""
        return {pid for pid in pids if pid in self.counts and _threads(
            pid, self.root, tids.get(pid) if tids is not None else None) == self.counts[pid]}

    def quiet(self, pids: Iterable[int], callers: Collection[int]) -> Set[int]:
        """Those of ``pids`` that did nothing of their own since ``add`` (module doc)."""
        return {pid for pid in pids if pid in self.totals and pid not in callers
                and _same(self.totals[pid], _totals(pid, self.root))}


def _same(before: Totals, now: Optional[Totals]) -> bool:
    """The same threads, user ticks and major faults; minor faults within RESTART_FAULTS."""
    return now is not None and now[:2] == before[:2] and now[3] == before[3] \
        and 0 <= now[2] - before[2] <= RESTART_FAULTS
