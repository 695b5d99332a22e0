"""The program's own clock readings, for a log without times (issue 32 item 2): what
``clock_gettime`` and ``gettimeofday`` returned spans the time the log covers at least.

Contract (pure):
- ``clock_reading(name, args)``: (clock, seconds) of a completed call's result text as strace
  prints it, None for anything else (its docstring).
- ``ProgramClock.feed(name, args)`` keeps each clock's first and last reading (log order);
  ``span()`` is (seconds, clock) of the clock read most: a lower bound of the log's duration,
  or None (its docstring). Readings of different clocks are never compared (their bases
  differ).
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from ...linux.intparse import parse_uint

__all__ = ["clock_reading", "ProgramClock", "CLOCK_CALLS"]

CLOCK_CALLS = frozenset({"clock_gettime", "clock_gettime64", "gettimeofday"})
_SEC = re.compile(r"\{tv_sec=([0-9]{1,12}), tv_(n|u)sec=([0-9]{1,9})\}")


def clock_reading(name: str, args: str) -> Optional[Tuple[str, float]]:
    """(clock, seconds) of a completed call's result text as strace prints it:
    ``clock_gettime(CLOCK_MONOTONIC, {tv_sec=7193, tv_nsec=926911244})`` -> ("CLOCK_MONOTONIC",
    7193.926911244), ``gettimeofday({tv_sec=1796126342, tv_usec=418091}, NULL)`` ->
    ("CLOCK_REALTIME", ...); None for anything else (an unread struct, -e raw)."""
    if name == "gettimeofday":
        clock = "CLOCK_REALTIME"
    elif name in CLOCK_CALLS:
        clock = args.split(",", 1)[0].strip()
        if not clock.startswith("CLOCK_"):
            return None
    else:
        return None
    m = _SEC.search(args)
    if m is None:
        return None
    sec, frac = parse_uint(m.group(1), 12), parse_uint(m.group(3), 9)
    if sec is None or frac is None:
        return None
    return clock, sec + frac / (1e9 if m.group(2) == "n" else 1e6)


class ProgramClock:
    """First and last reading of each clock (module doc)."""

    def __init__(self) -> None:
        self._clocks: Dict[str, List[float]] = {}    # clock -> [first, last, readings, back]

    def feed(self, name: str, args: str) -> None:
        """Keep the first and last reading of the clock this call read, in log order (at most 16
        clocks)."""
        r = clock_reading(name, args)
        if r is None:
            return
        c = self._clocks.get(r[0])
        if c is None:
            if len(self._clocks) < 16:
                self._clocks[r[0]] = [r[1], r[1], 1, 0]
            return
        if r[1] < c[1]:
            c[3] = 1                                 # it went back: no span from it
        c[1], c[2] = r[1], c[2] + 1

    def span(self) -> Optional[Tuple[float, str]]:
        """(seconds, clock) of the clock read most, the time between its first and last reading: a
        lower bound of the log's duration (the log may begin before the first reading and end after
        the last), or None with fewer than two readings of any clock. Readings of different clocks
        are never compared (their bases differ); a clock that went back (another process's
        namespace, a REALTIME step) gives no span."""
        if not self._clocks:
            return None
        clock, c = max(self._clocks.items(), key=lambda kv: kv[1][2])
        if c[2] < 2 or c[3]:
            return None
        return c[1] - c[0], clock
