"""Which processes hold the threads that may decide a verdict, as /proc shows them now: those
using a CPU (a spin, the work that advances) and those in uninterruptible sleep are where a
chain of waits can end; a process whose threads all sleep is read after them.

Contract: ``deciding_first(pids)`` -> ``pids`` in that order: those that gained CPU time
between two reads of /proc/PID/stat ``PAUSE_S`` apart (most first), then state D, then the
rest, each by the CPU time used in all (most first); one gone goes last (``deciding_split``
also says how many lead). One file per process, whatever its threads: beside a recording's
threads each read waits for the interpreter's lock, so 800 thread reads took seconds. Pure
helper ``order(pids, before, after)``. pystacks.py takes processes in this order, so that
what a budget cuts is never the deciding thread's evidence.
"""
from __future__ import annotations

import time
from typing import Dict, List, Optional, Tuple

from ...linux import procfs

__all__ = ["deciding_first", "deciding_split", "order", "PAUSE_S"]

PAUSE_S = 0.05
Read = Tuple[int, str]            # (utime + stime in ticks, the process's state)


def _read(pid: int, root: str) -> Optional[Read]:
    st = procfs.read_stat(pid, root=root)
    return None if st is None else (st.utime + st.stime, st.state)


def _key(pid: int, before: Dict[int, Optional[Read]],
         after: Dict[int, Optional[Read]]) -> Tuple[int, int]:
    a, b = before.get(pid), after.get(pid)
    if a is None or b is None:
        return 4, 0
    gained = b[0] - a[0]
    group = 0 if gained > 0 else 1 if b[1] == "D" else 2
    return group, -(gained if group == 0 else b[0])


def order(pids: List[int], before: Dict[int, Optional[Read]],
          after: Dict[int, Optional[Read]]) -> Tuple[List[int], int]:
    """(``pids`` ordered from two reads (module doc), how many of them lead: CPU gained or
    state D)."""
    keys = {pid: _key(pid, before, after) for pid in pids}
    ordered = sorted(pids, key=lambda p: keys[p])
    return ordered, sum(1 for p in pids if keys[p][0] < 2)


def deciding_split(pids: List[int], root: str = "/proc",
                   pause: float = PAUSE_S) -> Tuple[List[int], int]:
    """(``pids`` ordered by what their processes do now, how many lead) (module doc)."""
    before = {pid: _read(pid, root) for pid in pids}
    time.sleep(pause)
    return order(pids, before, {pid: _read(pid, root) for pid in pids})


def deciding_first(pids: List[int], root: str = "/proc", pause: float = PAUSE_S) -> List[int]:
    """``pids`` ordered by what their processes do now (module doc)."""
    return deciding_split(pids, root, pause)[0]
