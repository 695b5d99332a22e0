"""hangtrace's own CPU use during a recording, for the report's notes.

Contract: ``own_cpu()`` is the CPU seconds (user+sys) of this process, all its threads, and of
its reaped children (strace); ``cpu_note(readings, window)`` says, from three of them (the
attach's start, the window's start, the end), what attaching and recording cost. BPF programs
run in the traced threads and are not in it.
"""
from __future__ import annotations

import os
from typing import List

__all__ = ["own_cpu", "cpu_note"]


def own_cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def cpu_note(cpu: List[float], window: float) -> str:
    """One line (module doc); fewer than three readings: the recording did not start."""
    if len(cpu) < 3:
        return f"hangtrace's own CPU: {cpu[-1] - cpu[0]:.2f} s (the recording did not start)"
    during = cpu[2] - cpu[1]
    pct = 100.0 * during / window if window > 0 else 0.0
    return (f"hangtrace's own CPU: {during:.2f} s while recording {window:.1f} s "
            f"({pct:.0f}% of one CPU), {cpu[1] - cpu[0]:.2f} s to attach")
