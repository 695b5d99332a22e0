"""Import an existing strace log (plain or gzip) into a hangtrace trace file.

Contract:
- ``import_strace(log_path, out_path, *, compress=None, workers=None) -> ImportResult``.
  ``compress`` None means "gzip when out_path ends in .gz" (TraceWriter's rule). ``workers``
  None converts logs of 20 MB and more in min(2, cpus) worker processes (strace_parallel.py),
  smaller ones here; a number forces that many (1: always here). Either way the trace holds
  the same rows in the same order.
- Any strace output format is accepted (see strace/lines.py); what the log lacked (timestamps,
  durations, fd paths, pids) is recorded in the header options and in the result.
- Memory stays bounded whatever the log size: a first pass over the log only counts lines per
  tid (to find the traced process's pid and to balance workers), the second streams events to
  a temporary file next to the output (gzip-compressed on the way for a .gz trace); the final
  file is the header, which lists every process, then that file's rows, then the end record.
  A .gz trace is three gzip members (header, rows, end record): one stream to every gzip
  reader (TraceReader, zcat).
- A gzip log cut short imports up to where it breaks (``ImportResult.truncated``).
- Trouble with the input (missing, unreadable, binary, not strace) raises ``ImportError_``
  with a one-line message for the CLI; no temporary file or worker process outlives the call.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import gzip
import io
import gc
import os
import re
import tempfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Set

from .. import events as ev
from ..errors import BadInput
from . import format as trace
from .strace.convert import StraceConverter
from .rows import RowEncoder, RowSink, write_trace
from .strace.lines import parse_line

__all__ = ["ImportError_", "ImportResult", "import_strace"]

_SNIFF_LINES = 200


class ImportError_(BadInput):
    """The log cannot be imported; the message is one line for the user (errors.py)."""


@dataclass
class ImportResult:
    out_path: str
    events: int
    lines: int
    unparsed: int
    capabilities: Dict[str, bool]
    processes: List[ev.ProcessInfo] = field(default_factory=list)
    start: Optional[float] = None
    end: Optional[float] = None
    truncated: bool = False
    warnings: List[str] = field(default_factory=list)

    @property
    def span(self) -> float:
        return (self.end - self.start) if self.start is not None and self.end is not None else 0.0


class _Log:
    """Line iterator over a plain or gzip log that stops (and says so) where a gzip breaks."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.truncated = False
        # Read two or three times (sniff, first pass, conversion): a regular file only.
        raw, self._stream = trace.open_input(path, ImportError_, pipes=False)
        self._raw = raw

    def __iter__(self) -> Iterator[bytes]:
        try:
            for line in self._stream:
                yield line
        except (EOFError, zlib.error, gzip.BadGzipFile, OSError):
            self.truncated = True

    def text_lines(self) -> Iterator[str]:
        """Decoded lines (bulk UTF-8 decoding in C; undecodable bytes survive as surrogates)."""
        text = io.TextIOWrapper(self._stream, encoding="utf-8",  # type: ignore[arg-type]
                                errors="surrogateescape", newline="")
        try:
            for line in text:
                yield line
        except (EOFError, zlib.error, gzip.BadGzipFile, OSError):
            self.truncated = True
        finally:
            text.detach()

    def close(self) -> None:
        self._stream.close()
        self._raw.close()


def _sniff(path: str) -> None:
    """Refuse binary files and files where nothing looks like strace output."""
    log = _Log(path)
    seen = parsed = 0
    try:
        for raw in log:
            if b"\0" in raw:
                raise ImportError_(f"{path}: binary data, not a strace text log")
            seen += 1
            if parse_line(raw.decode("utf-8", "surrogateescape")) is not None:
                parsed += 1
                break
            if seen >= _SNIFF_LINES:
                break
    finally:
        log.close()
    if seen == 0:
        raise ImportError_(f"{path}: empty log" if not log.truncated
                           else f"{path}: gzip data is corrupt from the start")
    if parsed == 0:
        raise ImportError_(f"{path}: does not look like strace output "
                           f"(none of the first {seen} lines parse)")


# First pass, at C speed over 4 MiB blocks: the tid column ("1234  " or "[pid  1234] ") at the
# start of each line. Blocks begin at a line start; searching for the newline (a literal the
# regex engine skips to) is ~3x faster than a multi-line "^".
_TID_FIRST = re.compile(rb"(?:\[pid +)?(\d+)[ \]]")
_TID_NEXT = re.compile(rb"\n(?:\[pid +)?(\d+)[ \]]")
_CLONE_NAMES = ("clone", "clone3", "fork", "vfork")


def _children(block: bytes, into: Set[int]) -> None:
    """Add the tids that clone/fork/vfork results in ``block`` created (complete or resumed)."""
    for word in (b"clone", b"fork"):
        i = block.find(word)
        while i >= 0:
            start = block.rfind(b"\n", 0, i) + 1
            end = block.find(b"\n", i)
            end = len(block) if end < 0 else end
            line = parse_line(block[start:end].decode("utf-8", "surrogateescape"))
            if (line is not None and line.name in _CLONE_NAMES and line.ret is not None
                    and line.ret > 0):
                into.add(line.ret)
            i = block.find(word, end)


def _blocks(log: _Log, size: int = 4 << 20) -> Iterator[bytes]:
    """The log in blocks of whole lines."""
    rest = b""
    stream = log._stream
    try:
        while True:
            chunk = stream.read(size)
            if not chunk:
                break
            chunk = rest + chunk
            cut = chunk.rfind(b"\n") + 1
            rest = chunk[cut:]
            if cut:
                yield chunk[:cut]
    except (EOFError, zlib.error, gzip.BadGzipFile, OSError):
        log.truncated = True
    if rest:
        yield rest


@dataclass
class _FirstPass:
    root_pid: Optional[int]         # smallest tid of unknown origin
    first_tod: Optional[float]      # time of day of the first line of a -t/-tt log
    tid_lines: Dict[bytes, int]     # tid column text -> lines (shard balancing)
    size: int                       # uncompressed bytes


def _first_pass(path: str) -> _FirstPass:
    """Root pid, time format and lines per tid from a cheap scan of the log.

    Unknown origin = a tid that no clone/fork/vfork in the log created: for ``strace -f -p PID``
    these are the threads that existed at attach time, and the smallest is the leader (pid).
    """
    counts: Counter = Counter()
    children: Set[int] = set()
    first_tod: Optional[float] = None
    decided = False
    size = 0
    log = _Log(path)
    try:
        for block in _blocks(log):
            if not decided:
                for text in block[:1 << 16].decode("utf-8", "surrogateescape").splitlines():
                    line = parse_line(text)
                    if line is not None:     # the first parseable line tells the time format
                        decided = True
                        first_tod = line.ts if line.time_of_day else None
                        break
            size += len(block)
            m = _TID_FIRST.match(block)
            if m is not None:
                counts[m[1]] += 1
            counts.update(_TID_NEXT.findall(block))
            _children(block, children)
    finally:
        log.close()
    # (a tid column of more than 10 digits is no tid: parse_line refuses such lines too)
    unknown = {int(t) for t in counts if len(t) <= 10} - children
    return _FirstPass(min(unknown) if unknown else None, first_tod, dict(counts), size)


def _base_date(path: str, first_tod: Optional[float]) -> Optional[_dt.date]:
    """The date of a -t/-tt log: the log was last written when it ended, so it began on the
    file's modification date unless that would put its start after the modification time."""
    if first_tod is None:
        return None
    mtime = _dt.datetime.fromtimestamp(os.stat(path).st_mtime)
    day = mtime.date()
    start = _dt.datetime.combine(day, _dt.time()) + _dt.timedelta(seconds=first_tod)
    if start > mtime + _dt.timedelta(minutes=1):
        day -= _dt.timedelta(days=1)
    return day


@dataclass
class _Converted:
    """What a conversion (sequential or sharded) leaves for the header and the result."""
    rows: int
    lines: int                      # parsed lines
    unparsed: int
    capabilities: Dict[str, bool]
    processes: Dict[int, ev.ProcessInfo]
    first_ts: Optional[float]
    last_ts: Optional[float]
    truncated: bool


def import_strace(log_path: str, out_path: str, *, compress: Optional[bool] = None,
                  workers: Optional[int] = None) -> ImportResult:
    """Convert the strace log at ``log_path`` into a trace file at ``out_path``.

    ``workers``: None shards large logs over min(2, cpus) processes (strace_parallel.py); a
    number forces that many shards whenever the log can be sharded at all (1: sequential).
    """
    from .strace_parallel import convert_sharded, plan_shards, WorkerError
    _sniff(log_path)
    first = _first_pass(log_path)
    base_date = _base_date(log_path, first.first_tod)
    plan = plan_shards(first.tid_lines, size=first.size, first_tod=first.first_tod,
                       root_pid=first.root_pid, base_date=base_date, workers=workers)
    if compress is None:
        compress = out_path.endswith(".gz")      # TraceWriter's rule
    out_dir = os.path.dirname(os.path.abspath(out_path))
    try:
        tmp = tempfile.NamedTemporaryFile("wb", dir=out_dir, prefix=".hangtrace-import-",
                                          delete=False)
    except OSError as e:
        raise ImportError_(f"{out_path}: cannot write here: {e.strerror}") from None
    sink: Optional[RowSink] = None
    try:
        sink = RowSink(tmp, compress)
        if plan is not None:
            try:
                sharded = convert_sharded(log_path, plan, sink.write)
            except WorkerError as e:
                raise ImportError_(f"{log_path}: {e}") from None
            conv = _Converted(sharded.rows, sharded.lines, sharded.unparsed,
                              sharded.capabilities, sharded.processes, sharded.first_ts,
                              sharded.last_ts, sharded.truncated)
        else:
            conv = _convert_sequential(log_path, first.root_pid, base_date, sink.write)
        sink.close()
        tmp.close()
        processes = sorted(conv.processes.values(), key=lambda p: p.pid)
        caps = conv.capabilities
        start = conv.first_ts if conv.first_ts is not None else 0.0
        end = conv.last_ts if conv.last_ts is not None else start
        roots = [p.pid for p in processes if p.ppid not in conv.processes]
        header = trace.make_header(
            backends=["strace-log"], source="import-strace", targets=roots, start=start,
            processes=processes,
            options={"log": os.path.basename(log_path), "capabilities": caps,
                     "lines": conv.lines + conv.unparsed, "unparsed": conv.unparsed,
                     "log_truncated": conv.truncated})
        write_trace(out_path, header, tmp.name, conv.rows, compress=compress, end_ts=end,
                     reason="log-truncated" if conv.truncated else "complete")
    except OSError as e:
        raise ImportError_(f"{out_path}: write failed: {e.strerror}") from None
    finally:
        if sink is not None:             # after an error: end the member quietly
            with contextlib.suppress(OSError, ValueError):
                sink.close()
        if not tmp.closed:
            tmp.close()
        try:
            os.unlink(tmp.name)
        except OSError:
            pass
    warnings = []
    if conv.truncated:
        warnings.append("the gzip log is cut short; imported up to where it breaks")
    if conv.unparsed:
        warnings.append(f"{conv.unparsed} line(s) were not strace output and were skipped")
    for name, have in caps.items():
        if not have:
            warnings.append(f"the log has no {name.replace('_', ' ')}")
    return ImportResult(out_path, conv.rows, conv.lines + conv.unparsed, conv.unparsed, caps,
                        processes, conv.first_ts, conv.last_ts, conv.truncated, warnings)


def _convert_sequential(log_path: str, root_pid: Optional[int],
                        base_date: Optional[_dt.date], write: Callable[[bytes], None]
                        ) -> _Converted:
    """One converter over the whole log, in this process."""
    conv = StraceConverter(base_date=base_date, root_pid=root_pid)
    log = _Log(log_path)
    try:
        count = _convert(log, conv, write)
    finally:
        log.close()
    tail = conv.finish(conv.last_ts)
    encode = RowEncoder().encode
    for e in tail:
        write(encode(e))
    return _Converted(count + len(tail), conv.lines, conv.unparsed, conv.capabilities,
                      conv.processes, conv.first_ts, conv.last_ts, log.truncated)


def _convert(log: _Log, conv: StraceConverter, write: Callable[[bytes], None]) -> int:
    """The hot loop: every log line through the converter, events as JSON rows to ``write``."""
    feed = conv.feed_text
    fmt = RowEncoder().text
    count = 0
    # Millions of short-lived, acyclic objects: reference counting frees them all; the cyclic
    # collector would only rescan them over and over (about 15% of the run).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        buf: List[str] = []
        add = buf.append
        for text in log.text_lines():
            events = feed(text)
            for e in events:
                add(fmt(e))
            if len(buf) >= 4096:    # one encode + write per batch, not per event
                count += len(buf)
                write("".join(buf).encode("utf-8", "surrogateescape"))
                buf.clear()
        count += len(buf)
        write("".join(buf).encode("utf-8", "surrogateescape"))
    finally:
        if gc_was_enabled:
            gc.enable()
    return count
