"""What the importer reads: one strace log, or the files of ``strace -ff -o PREFIX`` as one.

Contract:
- ``open_source(path)`` -> a source with ``sniff()``, ``scan()`` (the first pass: LogFacts),
  ``line_batches()`` (the lines in order, in lists; one log: ``line_blocks()``, as bytes),
  ``mtime()``, ``truncated``, ``name``, ``single_file`` and ``close()``. Raises ImportError_
  with a one-line message for a missing path or an unusable set of files.
- A path that is a file is one log. A directory, or a prefix that is no file but has
  PREFIX.TID files next to it, is an ``-ff`` set (``ff_files``). A directory holding several
  prefixes is refused (the message names them: give one as PREFIX).
- An ``-ff`` set reads as one log in time order, merged by timestamp, in memory that grows
  with the threads alive at once, never with the log (``FFLogs``).
"""
from __future__ import annotations

import heapq
import os
import re
import resource
from typing import Callable, Iterator, List, Optional, Tuple

from .lines import TS_SECONDS, TS_TIME_OF_DAY, timestamp_shape
from .log import LINE_BLOCK, ImportError_, LogFile, sniff
from .scan import LogFacts, LogScan

__all__ = ["open_source", "SingleLog", "FFLogs", "ff_files"]

_FF_NAME = re.compile(r"^(.+)\.([0-9]{1,10})(?:\.gz)?$")


class SingleLog:
    single_file = True

    def __init__(self, path: str, progress: Optional[Callable[[int], None]] = None) -> None:
        self.path = path
        self.progress = progress          # both passes report their offset (LogFile)
        self.name = os.path.basename(path)
        self.truncated = False
        self.notes: List[str] = []
        self._open: List[LogFile] = []

    def sniff(self) -> None:
        sniff(self.path)

    def scan(self) -> LogFacts:
        scan = LogScan()
        with LogFile(self.path, self.progress) as log:
            for block in log.blocks(reuse=True):        # (feed keeps nothing of a block)
                scan.feed(block)
        return scan.facts

    def mtime(self) -> float:
        return os.stat(self.path).st_mtime

    def line_batches(self) -> Iterator[List[str]]:
        return self._read(LogFile.line_batches)

    def line_blocks(self) -> Iterator[bytes]:
        """The blocks ``line_batches`` decodes and splits (batch.py block_lines): one
        bytearray, refilled (LogFile.blocks reuse: a block is read before the next)."""
        return self._read(LogFile.blocks, LINE_BLOCK, True)

    def _read(self, how: Callable, *args: object) -> Iterator:
        log = LogFile(self.path, self.progress)
        self._open.append(log)
        try:
            yield from how(log, *args)
        finally:
            self.truncated = self.truncated or log.truncated
            log.close()

    def close(self) -> None:
        for log in self._open:
            log.close()


def ff_files(path: str) -> Tuple[str, List[Tuple[int, str]]]:
    """(prefix, [(tid, file)]) of the -ff set at ``path`` (module doc); raises ImportError_.
    The set is every file named PREFIX.TID (or PREFIX.TID.gz) in it, one tid per file, no pid
    column in the lines."""
    if os.path.isdir(path):
        groups: dict = {}
        for entry in sorted(os.listdir(path)):
            m = _FF_NAME.match(entry)
            full = os.path.join(path, entry)
            if m and os.path.isfile(full):
                groups.setdefault(m.group(1), []).append((int(m.group(2)), full))
        if not groups:
            raise ImportError_(f"{path}: is a directory without strace -ff files (PREFIX.TID)")
        if len(groups) > 1:
            names = ", ".join(f"{p}.*" for p in sorted(groups)[:4])
            raise ImportError_(f"{path}: several strace -ff sets ({names}): give one as "
                               f"{os.path.join(path, 'PREFIX')}")
        prefix, files = next(iter(groups.items()))
        return os.path.join(path, prefix), sorted(files)
    directory = os.path.dirname(path) or "."
    base = os.path.basename(path)
    files = []
    try:
        entries = os.listdir(directory)
    except OSError:
        entries = []
    for entry in entries:
        m = _FF_NAME.match(entry)
        if m and m.group(1) == base and os.path.isfile(os.path.join(directory, entry)):
            files.append((int(m.group(2)), os.path.join(directory, entry)))
    if not files:
        raise ImportError_(f"{path}: no such file (nor strace -ff files {base}.TID)")
    return path, sorted(files)


def open_source(path: str, progress: Optional[Callable[[int], None]] = None):
    """One log, or an -ff set; ``progress`` (offsets, render/progress.py) for one log only."""
    if os.path.isfile(path) or (os.path.exists(path) and not os.path.isdir(path)):
        return SingleLog(path, progress)
    prefix, files = ff_files(path)
    return FFLogs(prefix, files)


def _tod_key(token: str) -> Optional[float]:
    """Seconds of a timestamp token: -ttt epoch, -t/-tt time of day; None when there is none
    (lines.py's shapes of a timestamp)."""
    shape = timestamp_shape(token)
    if shape == TS_TIME_OF_DAY:
        return int(token[0:2]) * 3600 + int(token[3:5]) * 60 + float(token[6:])
    return float(token) if shape == TS_SECONDS else None


class _FFFile:
    """One file of the set while it is being merged: its lines with merge keys."""

    def __init__(self, tid: int, path: str, day: float) -> None:
        self.tid = tid
        self.path = path
        self.prefix = f"{tid} "
        self.day = day              # seconds added to a time of day (past midnight: +86400)
        self.last = -1.0
        self.log: Optional[LogFile] = None
        self.iter: Optional[Iterator[Tuple[float, str]]] = None

    def lines(self) -> Iterator[Tuple[float, str]]:
        self.log = LogFile(self.path)
        key = self.day
        try:
            for text in self.log.text_lines():
                sp = text.find(" ")
                t = _tod_key(text[:sp]) if sp > 0 else None
                if t is not None:
                    if t < self.last - 43200:       # a time of day past midnight
                        self.day += 86400.0
                    self.last = t
                    key = self.day + t
                yield key, self.prefix + text if text[:1] != "\n" else text
        finally:
            self.log.close()


class FFLogs:
    """The files of one ``strace -ff -o PREFIX`` run as one log: each line gets its file's tid as
    the pid column ("TID TIMESTAMP call..."), and the files are merged by timestamp (heap merge,
    each file opened from its first line to its last only, so memory and open files grow with the
    threads alive at once, never with the log). -t/-tt times of day that run past midnight count on
    into the next day. Files without timestamps cannot be ordered in time: they are read whole, by
    ascending tid (a parent before the children it cloned), and a note says so."""
    single_file = False

    def __init__(self, prefix: str, files: List[Tuple[int, str]]) -> None:
        self.prefix = prefix
        self.files = files
        self.name = os.path.basename(prefix) + ".*"
        self.truncated = False
        self.notes: List[str] = []
        self._first: List[Optional[float]] = []     # first timestamp of each file
        self._open: List[_FFFile] = []

    def sniff(self) -> None:
        for _, path in self.files:
            sniff(path)

    def scan(self) -> LogFacts:
        scan = LogScan()
        for tid, path in self.files:
            scan.facts.ff_tids.append(tid)
            first: Optional[float] = None
            with LogFile(path) as log:
                for block in log.blocks(reuse=True):
                    if first is None:
                        sp = block.find(b" ")
                        first = _tod_key(block[:sp].decode("ascii", "replace")) if sp > 0 \
                            else None
                    scan.feed(block, tid=tid)
                self.truncated = self.truncated or log.truncated
            self._first.append(first)
        if any(f is None for f in self._first):
            self.notes.append("the -ff files have no timestamps: they were read one after the "
                              "other by tid, not merged in time order")
        return scan.facts

    def mtime(self) -> float:
        return max(os.stat(p).st_mtime for _, p in self.files)

    def text_lines(self) -> Iterator[str]:
        if not self._first:
            self.scan()
        _raise_open_file_limit(len(self.files))
        if any(f is None for f in self._first):
            for tid, path in self.files:          # sorted by tid
                f = _FFFile(tid, path, 0.0)
                self._open.append(f)
                for _, text in f.lines():
                    yield text
            return
        latest = max(self._first)  # type: ignore[type-var]
        heap: list = []
        for i, ((tid, path), first) in enumerate(zip(self.files, self._first)):
            # a file whose first time of day is 12 h before the latest start began past midnight
            day = 86400.0 if first is not None and latest - first > 43200 and \
                first < 86400 else 0.0
            heap.append((first + day, i, None, _FFFile(tid, path, day)))  # type: ignore
        heapq.heapify(heap)
        while heap:
            key, i, text, f = heap[0]
            if text is None:                    # not opened yet: its turn has come
                it = f.lines()
                f.iter = it
                self._open.append(f)
            else:
                yield text
                it = f.iter
            nxt = next(it, None)  # type: ignore[call-overload]
            if nxt is None:
                heapq.heappop(heap)
                self.truncated = self.truncated or bool(f.log and f.log.truncated)
            else:
                heapq.heapreplace(heap, (nxt[0], i, nxt[1], f))

    def line_batches(self, lines: int = 8192) -> Iterator[List[str]]:
        batch: List[str] = []
        for text in self.text_lines():
            batch.append(text)
            if len(batch) >= lines:
                yield batch
                batch = []
        if batch:
            yield batch

    def close(self) -> None:
        for f in self._open:
            if f.log is not None:
                f.log.close()


def _raise_open_file_limit(files: int) -> None:
    """Up to the hard limit, so that a set of many threads can be merged."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = files + 64
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        except (ValueError, OSError):
            pass
