"""Verdict names, thresholds and the two types every rule module shares.

Contract: ``ThreadVerdict`` is what a thread rule returns (verdict, the rule that fired, its
evidence); ``ThreadContext`` is what it is given (one thread's statistics, the recording, its
process, what it is blocked in, its CPU use). Rule modules (thread_rules, gpu_rules) import these
from here, so they can import each other's rules without a cycle.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from .. import events as ev
from .accumulate import ProcessStats, Recording, ThreadStats
from .waits import CpuUse, Wait

PROGRESSING, BUSY, BLOCKED, IDLE, EXITED, UNKNOWN = (
    "progressing", "busy-waiting", "blocked", "idle", "exited", "unknown")
DEADLOCKED = "deadlocked"

SPIN_CPU = 0.5            # on CPU at least this fraction of the window with nothing to show
PERIODIC_MIN_WAKEUPS = 3  # timed waits that ran out, at least this many ...
PERIODIC_MIN_RATE = 0.2   # ... and this often per second
YIELD_MIN_RATE = 50.0
NV_RM_CONTROL = 0x2A      # NV_ESC_RM_CONTROL (type 'F' = 0x46), see the nvidia reference
WAIT_NAMES = frozenset({"futex", "poll", "ppoll", "select", "pselect6", "epoll_wait",
                        "epoll_pwait", "epoll_pwait2", "nanosleep", "clock_nanosleep",
                        "sched_yield", "restart_syscall", "rt_sigtimedwait", "rt_sigreturn"})


@dataclass
class ThreadVerdict:
    verdict: str
    rule: str
    evidence: List[str] = field(default_factory=list)
    wait: Optional[Wait] = None
    cpu: Optional[CpuUse] = None
    helper: Optional[str] = None
    parked: bool = False

    @property
    def decides(self) -> bool:
        """Whether this thread may decide its process's verdict (module doc)."""
        return self.helper is None and not self.parked


@dataclass
class ThreadContext:
    t: ThreadStats
    rec: Recording
    proc: ProcessStats
    wait: Optional[Wait]
    cpu: Optional[CpuUse]

    @property
    def fds(self) -> List[ev.FdInfo]:
        return self.proc.info.fds if self.proc.info else []

    @property
    def listening(self) -> List[str]:
        return self.proc.info.listening if self.proc.info else []

    def rate(self, n: int) -> str:
        if not self.rec.capabilities.get("timestamps", True):
            return f"{n} times"
        return f"{n / self.rec.window:.1f}/s"
