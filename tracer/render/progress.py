"""A progress bar for long reads of one file (import-strace, analyze, export of large files).

Contract:
- ``FileProgress(path, label, passes=1, later_cost=1.0)`` is a context manager whose
  ``update(offset)`` is the work's callback (the offset reached in the file as stored). On a
  terminal stderr it draws a rich bar there, else nothing; it never raises into the work, and
  never reads /proc. ``clock`` and ``console`` are for tests: drawing depends on them only.
- ``passes``: how many times the work reads the whole file (``PassCounter``); the bar never
  goes beyond ``passes`` times the file's size, nor back. The ETA is the work left in every
  pass (``PassCounter.seconds_left``), later passes ``later_cost`` times slower per byte while
  in the first (the strace importer's conversion against its scan: ``LATER_PASS_COST``).
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Optional

__all__ = ["FileProgress", "PassCounter", "PASS_MIN_BYTES", "Progress", "LATER_PASS_COST",
           "eta_text"]

# A reader that got this far (or half the file) before it went back was a pass; less was a
# look at the first lines.
PASS_MIN_BYTES = 1 << 20
DEFAULT_DELAY_S = 0.5
# What a byte of the strace importer's conversion costs against one of its first scan: issue 43
# measured the scan at 54 MB/s and the conversion at 7-10 MB/s on a 1 GB log (the 2-core VM).
LATER_PASS_COST = 6.0

Progress = Callable[[int], None]          # the callback: the offset reached in the file


class PassCounter:
    """Offsets reported over time into bytes done over ``passes`` passes (the strace importer: a
    first scan, then the conversion). An offset lower than the one before begins a new pass once
    the last pass read at least ``PASS_MIN_BYTES`` or half the file; the total is ``passes`` times
    the file's size and the count never goes beyond it, nor back."""

    def __init__(self, size: int, passes: int) -> None:
        self.size, self.passes = max(size, 1), max(passes, 1)
        self.completed = 0
        self.last = 0                                  # offset reached in the current pass
        self.done = 0

    def update(self, offset: int) -> int:
        """Bytes done, given the offset the reader reached now."""
        if offset < self.last and self.last >= min(self.size // 2, PASS_MIN_BYTES):
            self.completed += 1                        # a new reader began from the start
            self.last = 0
        self.last = max(self.last, min(offset, self.size))
        self.done = max(self.done, min(self.completed * self.size + self.last,
                                       self.size * self.passes))
        return self.done

    def seconds_left(self, pass_seconds: float, later_cost: float = 1.0) -> Optional[float]:
        """The work left in every pass, in seconds, given how long the current pass has run
        (module doc); None before anything was read in it."""
        if pass_seconds <= 0 or self.last <= 0:
            return None
        rate = self.last / pass_seconds
        later = max(0, self.passes - self.completed - 1)
        cost = later_cost if self.completed == 0 else 1.0
        return (self.size - self.last) / rate + later * self.size * cost / rate


def eta_text(seconds: Optional[float]) -> str:
    """"0:01:40" (h:mm:ss, as rich's TimeRemainingColumn), "-:--:--" when unknown."""
    if seconds is None:
        return "-:--:--"
    minutes, secs = divmod(int(seconds + 0.5), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def _delay() -> float:
    try:
        return max(0.0, float(os.environ.get("HANGTRACE_PROGRESS_DELAY", DEFAULT_DELAY_S)))
    except ValueError:
        return DEFAULT_DELAY_S


class FileProgress:
    """Progress of reading ``path`` (module doc). The callers of ``update``: the trace reader
    (tracefile/format.TraceReader), the strace log reader (strace/log.LogFile) and the sharded
    importer's workers (through strace/parallel.py), with the offset they reached in the file as
    stored (compressed bytes for a .gz) after each block. On a terminal it draws the bar (label,
    bar, bytes done of the total, rate, ETA) from ``update``, in the caller's thread, at most every
    ``interval`` seconds and only once the work has taken ``delay`` seconds
    (``HANGTRACE_PROGRESS_DELAY`` overrides the default 0.5 s); on exit it draws the last frame
    (where the work ended) and clears it."""

    def __init__(self, path: str, label: str, *, passes: int = 1, later_cost: float = 1.0,
                 delay: Optional[float] = None, interval: float = 0.1,
                 force: Optional[bool] = None, clock: Callable[[], float] = time.monotonic,
                 console: Any = None) -> None:
        self.path, self.label, self.passes = path, label, passes
        self.later_cost = later_cost
        self._pass = 0                    # the pass in progress, and when it began
        self._pass_started = 0.0
        self.delay = _delay() if delay is None else delay
        self.interval = interval
        self.clock = clock
        self.console = console
        stderr = sys.stderr
        self.enabled = (stderr is not None and stderr.isatty()) if force is None else force
        self.counter: Optional[PassCounter] = None
        self.frames = 0                   # bars drawn (for tests)
        self._bar: Any = None
        self._task: Any = None
        self._started = 0.0
        self._next_draw = 0.0

    def __enter__(self) -> "FileProgress":
        if not self.enabled:
            return self
        try:
            self.size = os.path.getsize(self.path)
        except OSError:
            self.enabled = False    # the command reports the missing file itself
            return self
        self.counter = PassCounter(self.size, self.passes)
        self._started = self._pass_started = self.clock()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            try:
                if self.counter is not None:       # the last frame shows where it ended
                    self._bar.update(self._task, completed=self.counter.done)
                    self._bar.refresh()
                    self.frames += 1
                self._bar.stop()
            except Exception:  # a progress bar must never break the work it shows
                pass
            self._bar = None

    def update(self, offset: int) -> None:
        """The work's callback (module doc)."""
        if self.counter is None:
            return
        try:
            done = self.counter.update(offset)
            now = self.clock()
            if self.counter.completed != self._pass:        # a new pass began
                self._pass, self._pass_started = self.counter.completed, now
            if now < self._next_draw or now - self._started < self.delay:
                return
            self._next_draw = now + self.interval
            if self._bar is None:
                self._bar, self._task = self._make_bar()
            left = self.counter.seconds_left(now - self._pass_started, self.later_cost)
            self._bar.update(self._task, completed=done, eta=eta_text(left))
            self._bar.refresh()
            self.frames += 1
        except Exception:  # a progress bar must never break the work it shows
            self.counter = None

    def _make_bar(self):  # type: ignore[no-untyped-def]
        from rich.console import Console
        from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn,
                                   TransferSpeedColumn)
        bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                       DownloadColumn(binary_units=True), TransferSpeedColumn(),
                       TextColumn("ETA"), TextColumn("[cyan]{task.fields[eta]}"),
                       console=self.console or Console(stderr=True), transient=True,
                       auto_refresh=False, get_time=self.clock)
        name = os.path.basename(self.path)
        if self.passes > 1:
            name += f" ({self.passes} passes)"
        task = bar.add_task(f"{self.label} {name}", total=self.size * self.passes, eta=eta_text(None))
        bar.start()
        return bar, task
