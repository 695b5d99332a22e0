"""strace's timestamps into seconds, in log order.

Contract: ``LogTimes(base_date, relative=False)``; ``seconds(ts, time_of_day)`` takes each timestamped line's
``ts`` as lines.py read it, in log order, and returns the line's time:
- -t/-tt (``time_of_day``): seconds since the local midnight of ``base_date`` (today when
  None), a jump back by more than 12 h being the log running past midnight (strace output is
  in time order, give or take microseconds);
- -ttt: epoch seconds, as they are;
- -r (``relative``): deltas to the line before, summed: the time since the log's first line.
``relative_shape(text, ts)``: the first timestamped line of a log shows -r: a time below
``lines.RELATIVE_BELOW`` (no -ttt epoch time is), printed as strace -r prints it, six digits
after the point, right-aligned to six before it ("     0.000028").
"""
from __future__ import annotations

import datetime as _dt
import time
from typing import Optional

from .lines import RELATIVE_BELOW

__all__ = ["LogTimes"]


def relative_shape(text: str, ts: float) -> bool:
    """The line's time is printed as strace -r prints it (module doc)."""
    if not 0.0 <= ts < RELATIVE_BELOW:
        return False
    token = f"{ts:.6f}"
    return " " * max(0, 6 - token.index(".")) + token + " " in text


class LogTimes:
    """The times of one log's lines (module doc)."""

    def __init__(self, base_date: Optional[_dt.date] = None, relative: bool = False) -> None:
        day = base_date or _dt.date.today()
        self._midnight = time.mktime((day.year, day.month, day.day, 0, 0, 0, 0, 0, -1))
        self._day_offset = 0.0
        self._last_tod: Optional[float] = None
        self.relative = relative
        self._sum = 0.0                          # -r: the deltas so far

    def seconds(self, ts: float, time_of_day: bool) -> float:
        """The line's time (module doc)."""
        if time_of_day:
            return self._from_time_of_day(ts)
        if not self.relative:
            return ts
        self._sum += ts
        return self._sum

    def _from_time_of_day(self, tod: float) -> float:
        if self._last_tod is not None and tod < self._last_tod - 43200:
            self._day_offset += 86400.0
        self._last_tod = tod
        return self._midnight + self._day_offset + tod
