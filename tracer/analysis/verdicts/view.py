"""Partial views prove nothing (issue 32 item 5): what a recording's view lacks, and the rule
that no deadlock is proven from such a view.

Contract: pure functions of the recording's capabilities (strace/importer.py
``view_capabilities``; a recording that does not say is whole):
- ``view_lacks(caps)``: what the view lacks, in words (several strace sessions joined in one
  file, a process traced by one thread alone).
- ``unproven(verdict, lacks)``: a deadlock verdict from such a view is ``blocked``: the
  threads are stuck as far as the log shows, but the cycle or dead end closes only across
  what the view lacks. Any other verdict stays.
- ``end_severity(caps)``: the order in which the tree weighs its chains' ends
  (waitgraph/chain.py SEVERITY), a ticking thread weighing less in sessions joined.
"""
from __future__ import annotations

from typing import Dict, List

from ..vocab.verdict import BLOCKED, DEADLOCKED, Verdict
from ..waitgraph.chain import SEVERITY, EndKind

__all__ = ["view_lacks", "unproven", "end_severity", "VIEW_NOTE"]

VIEW_NOTE = "the log is a partial view ({}): no deadlock proof rests on it"


def view_lacks(caps: Dict[str, bool]) -> List[str]:
    """What the view lacks, in words: several strace sessions joined in one file (``one_session``
    False: their states are of different times, so waits seen in one and holders seen in another
    never were at once), a process traced by one thread alone (``all_threads`` False: strace -p TID
    without -f; what its other threads do is not in it)."""
    out = []
    if caps.get("one_session") is False:
        out.append("several strace sessions joined in one file, of different times")
    if caps.get("all_threads") is False:
        out.append("a process traced by one thread alone (strace -p TID without -f)")
    return out


def unproven(verdict: Verdict, lacks: List[str]) -> Verdict:
    return BLOCKED if lacks and verdict == DEADLOCKED else verdict


_WAITS = (EndKind.STOPPED, EndKind.WRITE_STUCK, EndKind.UNKNOWN_WAKER)
_SESSIONS_SEVERITY: List[EndKind] = [k for k in SEVERITY if k is not EndKind.TICK]
_SESSIONS_SEVERITY.insert(max(_SESSIONS_SEVERITY.index(k) for k in _WAITS) + 1, EndKind.TICK)


def end_severity(caps: Dict[str, bool]) -> List[EndKind]:
    """The order in which the tree weighs its chains' ends (waitgraph/chain.py SEVERITY). In
    several sessions joined, each session is its own view: a thread that only ticks (periodic
    wake-ups, nothing to show) is evidence of life in its own session alone, so it weighs less than
    a wait that never ends seen in another (the log taken at a hang: the thread blocked without
    timeout is the first suspect)."""
    return _SESSIONS_SEVERITY if caps.get("one_session") is False else list(SEVERITY)
