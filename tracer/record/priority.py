"""hangtrace's own CPU priority for the end of a recording: on a busy machine its end (stacks,
the last reads of /proc, the analysis) waits for a CPU far longer than it computes.

Contract:
- ``raise_own(nice, helpers)`` sets this process's threads (``/proc/self/task``) and
  ``helpers`` (pids whose parent is this process: strace; any other pid is never touched) to
  ``nice``; threads and children they start later inherit it (py-spy). A hangtrace started
  under ``nice`` (its main thread above 0) is left as it is. Without CAP_SYS_NICE (root)
  nothing changes (``Raised.why``).
- ``Raised.restore()`` puts back each changed thread that still runs.
- ``end_nice()``: ``$HANGTRACE_END_NICE`` (-20..19; 0 or more: leave it), else ``END_NICE``.
- ``EndPriority``: one recording's, raised once from any thread (``raise_once``), restored.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

__all__ = ["raise_own", "Raised", "EndPriority", "end_nice", "END_NICE", "ENV"]

END_NICE = -10          # CFS weight 9548 against 1024 at nice 0: most of a CPU beside 8 spinners
ENV = "HANGTRACE_END_NICE"


def end_nice() -> int:
    """The nice value the end runs at (module doc); 0 when the environment says to leave it."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return END_NICE
    try:
        return max(-20, min(19, int(raw)))
    except ValueError:
        return END_NICE


@dataclass
class Raised:
    """What ``raise_own`` changed: tid -> its nice value before; ``why`` when it could not."""
    before: Dict[int, int] = field(default_factory=dict)
    why: str = ""

    def restore(self) -> None:
        for tid, nice in self.before.items():
            try:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            except OSError:
                pass            # it ended, or the right to raise it back went
        self.before = {}


def _own_tids() -> List[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [os.getpid()]


def _own_child(pid: int) -> bool:
    from ..linux import procfs
    st = procfs.read_stat(pid)
    return st is not None and st.ppid == os.getpid()


def raise_own(nice: int, helpers: Sequence[int] = ()) -> Raised:
    """This process's threads and its ``helpers`` to ``nice`` where they run below it
    (module doc)."""
    out = Raised()
    if nice >= 0:
        return out
    try:
        if os.getpriority(os.PRIO_PROCESS, os.getpid()) > 0:
            out.why = "started under nice: left as it is"
            return out
    except OSError:
        return out
    for tid in _own_tids() + [p for p in helpers if _own_child(p)]:
        try:
            now = os.getpriority(os.PRIO_PROCESS, tid)
            if now <= nice:
                continue
            os.setpriority(os.PRIO_PROCESS, tid, nice)
            out.before[tid] = now
        except PermissionError:
            out.why = f"nice {nice} not allowed (CAP_SYS_NICE or RLIMIT_NICE)"
            break
        except OSError:
            continue            # a thread that ended meanwhile
    return out


class EndPriority:
    """One recording's end priority (session.py): ``raise_once(helpers)`` the first time it is
    called, from whichever thread begins the end; ``restore()`` puts it back."""

    def __init__(self) -> None:
        self.raised: Optional[Raised] = None
        self._lock = threading.Lock()

    def raise_once(self, helpers: Sequence[int] = ()) -> None:
        with self._lock:
            if self.raised is None:
                self.raised = raise_own(end_nice(), helpers)

    def restore(self) -> None:
        with self._lock:
            if self.raised is not None:
                self.raised.restore()
