"""Python stacks taken at the end of a recording (``PyStack`` events), for the report.

Contract: ``StackTable.feed`` takes PyStack events; ``by_thread`` maps (pid, tid) to frames
("func (file:line)", innermost first); ``notes()`` says, once per reason, for which processes no
stack could be taken (``failure_notes``).
"""
from __future__ import annotations

from typing import Dict, List, Sequence

from ... import events as ev
from ..vocab.nodes import real_id


def failure_notes(failures: Sequence[ev.PyStack]) -> List[str]:
    """One note line per distinct reason: "Python stacks not taken for pid 1, 2: <why>"."""
    by_reason: Dict[str, List[int]] = {}
    for f in failures:
        pids = by_reason.setdefault(f.error, [])
        if f.pid not in pids:
            pids.append(f.pid)
    return [f"Python stacks not taken for pid {', '.join(str(real_id(p)) for p in pids)}: {why}"
            for why, pids in by_reason.items()]


class StackTable:
    """Python stacks by (pid, tid), and the ones that could not be taken."""

    def __init__(self) -> None:
        self.by_thread: Dict[tuple, List[str]] = {}
        self.failures: List[ev.PyStack] = []

    def feed(self, e: ev.PyStack) -> None:
        if e.error:
            self.failures.append(e)
        else:
            self.by_thread[(e.pid, e.tid)] = list(e.frames)

    def notes(self) -> List[str]:
        return failure_notes(self.failures)
