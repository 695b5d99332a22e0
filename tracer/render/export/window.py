"""The recording window of a timeline export, and the timestamps clamped to it.

Contract:
- ``Window.of_trace(start, end)``: the window from the trace header's ``start`` to ``end``
  (the trace's end, read before the events), at most ``MAX_SPAN_S`` after the start; an end
  before the start is the start; ``end`` None: the window is ``MAX_SPAN_S`` long.
- ``clamp(ts)`` is ``ts`` within [start, end]; ``event(e)`` is ``e`` itself when every time it
  carries lies in the window, else a copy with them clamped: an event at 1 (1970) or at 2**63 s
  is drawn at the window's edge. The analyzer is fed the events as they are; only what the
  timeline draws is clamped.
- ``bucket_s()``: the counters' bucket width, rates.BUCKET_S unless the window would need
  more than rates.MAX_BUCKETS of them; then wider (a window of unknown end keeps rates.BUCKET_S).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import msgspec

from ... import events as ev
from ...events.counts import ThreadCounts
from .rates import BUCKET_S, MAX_BUCKETS

__all__ = ["Window", "MAX_SPAN_S"]

MAX_SPAN_S = 30 * 86400.0         # a month: longer than any recording or imported log


@dataclass(frozen=True)
class Window:
    """[start, end] of the recording, in epoch seconds (module doc)."""
    start: float
    end: float
    known_end: bool = True

    @classmethod
    def of_trace(cls, start: float, end: Optional[float]) -> "Window":
        """The window of a trace (module doc). ``end`` is when the trace ends
        (tracefile/format.trace_end, read before the events: the end record's time, or a trace cut
        short's last row's), at most ``MAX_SPAN_S`` after the start (no recording lasts longer: one
        bad end time cannot make the export endless). ``end`` None (a pipe, read once: its end
        cannot be known first): the window is ``MAX_SPAN_S`` long, and the size bound of
        export/__init__.py is what stops a trace whose times make it huge."""
        if not math.isfinite(start):
            start = 0.0
        last = start + MAX_SPAN_S
        if end is None:
            return cls(start, last, known_end=False)
        return cls(start, min(max(end, start), last))

    def clamp(self, ts: float) -> float:
        return self.start if ts < self.start else self.end if ts > self.end else ts

    def event(self, e: ev.Event) -> ev.Event:
        """``e``, or a copy with its times clamped (module doc): the times it carries are ``ts``, a
        call's end ``ts + dur``, a count's ``since``."""
        lo, hi = self.start, self.end
        ts = e.ts
        changed = {} if lo <= ts <= hi else {"ts": self.clamp(ts)}
        if isinstance(e, ev.Syscall) and e.dur is not None:
            at = changed.get("ts", ts)
            if at + e.dur > hi:
                changed["dur"] = max(0.0, hi - at)
        elif type(e) is ThreadCounts and not lo <= e.since <= hi:  # type: ignore[attr-defined]
            changed["since"] = self.clamp(e.since)  # type: ignore[attr-defined]
        return msgspec.structs.replace(e, **changed) if changed else e

    def bucket_s(self) -> float:
        """The counters' bucket width (module doc), so that a counter series has at most
        rates.MAX_BUCKETS points."""
        if not self.known_end:
            return BUCKET_S
        return max(BUCKET_S, (self.end - self.start) / MAX_BUCKETS)
