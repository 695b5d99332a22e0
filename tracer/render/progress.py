"""A progress bar for long reads of one file (import-strace, analyze, export of large files).

Contract:
- ``FileProgress(path, label, passes=1)`` is a context manager. When stderr is a terminal it
  shows a rich bar on stderr (label, bar, bytes done of the total, rate, ETA) once the work has
  taken ``delay`` seconds, and clears it on exit; when stderr is not a terminal it does nothing
  at all (no thread, no output). It never raises into the work it watches.
- It needs no hook in the code doing the work: like ``pv -d``, a thread reads, ten times a
  second, the file offset (/proc/PID/fdinfo/N "pos:") of every fd open on ``path`` in this
  process and in its child processes (the sharded strace importer reads in worker processes).
  Where several fds read it at once (one per worker), the slowest one is the progress. The
  offset is in bytes of the file as stored (compressed bytes for a .gz).
- ``passes``: how many times the work reads the whole file (the strace importer: a first scan,
  then the conversion). A pass ends when the file's fds close, are replaced by others, or their
  offset falls back, after reading 1 MiB or half of the file (a shorter look, such as sniffing
  the first lines, is not a pass). A pass that begins and ends between two looks is missed: the
  bar then ends short of its total, never beyond it.
  The total is ``passes`` times the file's size.
- fds are matched by their /proc link text against the file's real path: nothing here stat()s
  what an fd points to.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Dict, List, Optional, Tuple

__all__ = ["FileProgress", "fd_positions"]

# A reader that got this far (or half the file) before it closed was a pass; less was a look
# at the first lines (the importer sniffs the format first). A fast pass may be seen only once.
PASS_MIN_BYTES = 1 << 20


def _children(pid: int) -> List[int]:
    """Direct children of ``pid`` (from /proc/*/stat; /proc/PID/task/*/children needs
    CONFIG_PROC_CHILDREN)."""
    from ..linux import procfs
    out = []
    for p in procfs.list_pids():
        if p > 0 and p != pid:
            st = procfs.read_stat(p)
            if st is not None and st.ppid == pid:
                out.append(p)
    return out


def _fds_on(pid: int, target: str) -> List[int]:
    base = f"/proc/{pid}/fd"
    try:
        names = os.listdir(base)
    except OSError:
        return []
    out = []
    for n in names:
        try:
            if os.readlink(f"{base}/{n}") == target:
                out.append(int(n))
        except (OSError, ValueError):
            continue
    return out


def _pos(pid: int, fd: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/fdinfo/{fd}", "rb") as f:
            for line in f:
                if line.startswith(b"pos:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def fd_positions(target: str, pids: List[int]) -> Dict[Tuple[int, int], int]:
    """{(pid, fd): offset} of every fd of ``pids`` whose link text is ``target``."""
    out: Dict[Tuple[int, int], int] = {}
    for pid in pids:
        for fd in _fds_on(pid, target):
            pos = _pos(pid, fd)
            if pos is not None:
                out[(pid, fd)] = pos
    return out


class _PassCounter:
    """Turns offsets seen over time into bytes done over ``passes`` passes (module doc)."""

    def __init__(self, size: int, passes: int) -> None:
        self.size, self.passes = max(size, 1), max(passes, 1)
        self.completed = 0
        self.last = 0                                  # offset reached in the current pass
        self.seen: Dict[Tuple[int, int], int] = {}     # (pid, fd) -> offset at the last look

    def update(self, positions: Dict[Tuple[int, int], int]) -> int:
        """Bytes done, given the offsets of the fds open on the file now."""
        read_most = self.last >= min(self.size // 2, PASS_MIN_BYTES)
        common = positions.keys() & self.seen.keys()
        # A pass ended: its fds closed, or were all replaced by others (a new reader), or one
        # of them went back to the start (a rewind).
        ended = not positions or not common or any(positions[k] < self.seen[k] for k in common)
        if read_most and ended:
            self.completed += 1
            self.last = 0
        if positions:
            self.last = max(self.last, min(positions.values()))
        self.seen = dict(positions)
        return min(self.completed * self.size + min(self.last, self.size),
                   self.size * self.passes)


class FileProgress:
    """Progress of reading ``path`` (module doc)."""

    def __init__(self, path: str, label: str, *, passes: int = 1, delay: float = 0.5,
                 interval: float = 0.1, force: Optional[bool] = None) -> None:
        self.path, self.label, self.passes = path, label, passes
        self.delay, self.interval = delay, interval
        self.enabled = sys.stderr.isatty() if force is None else force
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._progress = None

    def __enter__(self) -> "FileProgress":
        if not self.enabled:
            return self
        try:
            self.size = os.path.getsize(self.path)
            self.target = os.path.realpath(self.path)
        except OSError:
            self.enabled = False    # the command reports the missing file itself
            return self
        self._thread = threading.Thread(target=self._run, name="hangtrace-progress",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    # ------------------------------------------------------------------ the poller thread
    def _run(self) -> None:
        try:
            self._poll()
        except Exception:  # a progress bar must never break the work it shows
            pass
        finally:
            if self._progress is not None:
                self._progress.stop()

    def _poll(self) -> None:
        counter = _PassCounter(self.size, self.passes)
        me = os.getpid()
        kids: List[int] = []
        started = time.monotonic()
        next_scan = 0.0
        task = None
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            if now >= next_scan:          # child processes come and go (import workers)
                kids = _children(me)
                next_scan = now + 0.5
            done = counter.update(fd_positions(self.target, [me] + kids))
            if self._progress is None:
                if now - started < self.delay:
                    continue
                self._progress, task = self._make_bar()
            self._progress.update(task, completed=done)

    def _make_bar(self):  # type: ignore[no-untyped-def]
        from rich.console import Console
        from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn,
                                   TimeRemainingColumn, TransferSpeedColumn)
        progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                            DownloadColumn(binary_units=True), TransferSpeedColumn(),
                            TextColumn("ETA"), TimeRemainingColumn(),
                            console=Console(stderr=True), transient=True)
        name = os.path.basename(self.path)
        if self.passes > 1:
            name += f" ({self.passes} passes)"
        task = progress.add_task(f"{self.label} {name}", total=self.size * self.passes)
        progress.start()
        return progress, task
