"""What a thread rule is given: ``ThreadContext``, one thread's statistics with its recording,
its process, the call it is blocked in at the end (vocab/waits.py) and its CPU use."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from ... import events as ev
from ..accumulate.stats import ProcessStats, Recording, ThreadStats
from ..vocab.waits import CpuUse, Wait


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

    @property
    def timed(self) -> bool:
        """The recording has times (a log without timestamps has none: rates and durations
        are unknown, never 0)."""
        return self.rec.capabilities.get("timestamps", True)

    def span(self) -> str:
        """" in 5.2 s" for a sentence about the window, or " (the log has no times)"."""
        return f" in {self.rec.window:.1f} s" if self.timed else " (the log has no times)"

    def rate(self, n: int) -> str:
        if not self.rec.capabilities.get("timestamps", True):
            return f"{n} times"
        return f"{n / self.rec.window:.1f}/s"
