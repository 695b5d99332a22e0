"""Python stacks taken at the end of a recording (``PyStack`` events), for the report.

Contract: ``StackTable.feed`` takes PyStack events; ``by_thread`` maps (pid, tid) to frames
("func (file:line)", innermost first; the file as py-spy names it, often its base name);
``located()`` the same frames with each file's full path where the recording has it (a
collective is told by its package's path, job/stack_groups.py); ``notes()`` says, once per reason, for which processes no
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


def _with_path(frame: str, path: str) -> str:
    """``"f (x.py:3)"`` and ``/a/b/x.py`` -> ``"f (/a/b/x.py:3)"`` (unchanged when they differ)."""
    k = frame.rfind(" (")
    if k < 0 or not frame.endswith(")") or not path:
        return frame
    inner = frame[k + 2:-1]
    name, sep, line = inner.rpartition(":")
    if not sep or not line.isdigit():
        name, line = inner, ""
    if not path.endswith(name.rsplit("/", 1)[-1]):
        return frame
    return f"{frame[:k]} ({path}{':' + line if line else ''})"


class StackTable:
    """Python stacks by (pid, tid), and the ones that could not be taken."""

    def __init__(self) -> None:
        self.by_thread: Dict[tuple, List[str]] = {}
        self.files: Dict[tuple, List[str]] = {}
        self.failures: List[ev.PyStack] = []

    def feed(self, e: ev.PyStack) -> None:
        if e.error:
            self.failures.append(e)
        else:
            self.by_thread[(e.pid, e.tid)] = list(e.frames)
            if e.files and len(e.files) == len(e.frames):
                self.files[(e.pid, e.tid)] = list(e.files)

    def located(self) -> Dict[tuple, List[str]]:
        """``by_thread`` with each frame's file as its full path, where the trace has it."""
        out = dict(self.by_thread)
        for key, files in self.files.items():
            out[key] = [_with_path(f, path) for f, path in zip(self.by_thread[key], files)]
        return out

    def notes(self) -> List[str]:
        return failure_notes(self.failures)
