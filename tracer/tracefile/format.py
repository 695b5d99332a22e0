"""Trace file format v1: write and read recordings (the layout: docs/ARCHITECTURE.md, "The
trace file").

Contract:
- ``make_header`` and ``TraceWriter`` write a trace: a header line, one event row per line,
  an end record; events are streamed to disk as they come and flushed at least once a second,
  so Ctrl-C, SIGTERM or a crash keep what was recorded. ``create_output`` makes the file.
- ``TraceReader`` (``open_trace``) reads up to the last complete event of a truncated file
  (plain or gzip) and says so in ``TraceInfo.truncated``; what is not a trace raises
  ``NotATrace``, an unknown version or a bad header ``CorruptTrace`` (errors.py), one line.
  For the analysis, ``batches(parse)`` gives blocks read in place (csrc/rows.c) where it can.
- ``trace_end(path)``: when a trace ends, before its events are read (None for a pipe).
"""
from __future__ import annotations

import gzip
import io
import itertools
import json
import math
import os
import platform
import stat
import time
import zlib
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Type, Union

from .. import events as ev
from ..events import counts as count_events, evidence as evidence_events  # noqa: F401  (register)
from ..events import stacks as stack_events, states as state_events  # noqa: F401  (register)
from ..events.shapes import TIME_MAX, TIME_MIN
from ..errors import BadInput, CorruptTrace, NotATrace, OutputError, shown
from .codec import BAD, RowCodec, encode_row, end_line, header_line, refused
from .validate import check_header
from .blocks import (BROKEN, MAX_LINE_CHARS, LineTooLong, byte_blocks,  # noqa: F401 (re-exported)
                     offset_reporter)
from .inputs import open_raw
from ..outputs import FreshName, open_streamed, stdout_closed

MAGIC = "hangtrace-trace"
_IN_PLACE = ("sc", "rd", "io")         # the rows csrc/rows.c reads in place
VERSION = 1
SUFFIX = ".htrace"


# A trace file that cannot be read (errors.py): BadInput for the file itself (missing, a
# directory, a device), CorruptTrace for its content, NotATrace when it is no trace at all.
TraceError = BadInput


@dataclass
class TraceInfo:
    header: Dict[str, Any]
    path: str
    truncated: bool = False
    bad_lines: int = 0
    events: int = 0
    end: Optional[ev.RecordingEnd] = None
    processes: List[ev.ProcessInfo] = field(default_factory=list)


def make_header(*, backends: List[str], source: str, targets: List[int], start: float,
                processes: List[ev.ProcessInfo], options: Optional[Dict[str, Any]] = None,
                roles: Optional[Dict[str, str]] = None,
                node: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The header object of a trace (line 1; its fields: docs/ARCHITECTURE.md, "The trace file"):
    magic, version, backends, host, kernel, clock, start, source, targets, options, processes,
    roles, the event schema and, for attach, the node it ran on. A process row the reader would
    refuse (codec.refused: a value beyond its type's bound) raises ValueError: a writer's bug."""
    for p in processes:         # the reader's bounds, at write (codec.refused)
        if (why := refused(p)) is not None:
            raise ValueError(f"process {p.pid}: a row the reader refuses: {why}")
    uname = platform.uname()
    header = {
        "magic": MAGIC, "version": VERSION, "backends": backends, "source": source,
        "host": uname.node, "kernel": uname.release, "machine": uname.machine,
        "clock": "realtime", "start": start, "targets": targets, "options": options or {},
        "processes": [ev.event_to_row(p) for p in processes], "roles": roles or {},
        "schema": ev.schema(),
        "writer": "hangtrace 0.1",
    }
    if node is not None:
        header["node"] = node
    return header


def create_output(path: str) -> IO[bytes]:
    """``path`` opened for streaming a trace into (outputs.open_streamed: a new file, mode
    0600, at ``path`` from the start; a link or a special file there is refused; a
    ``outputs.FreshName`` never replaces a file: the returned file's ``name`` is where it
    went). "-" is standard output (a launcher such as ssh or kubectl exec carries it back):
    the trace takes it over, and fd 1 then points to stderr, so that nothing else (a report,
    a child's output) can write into the trace. Raises OutputError (one line).
    Trace files are created new, 0600 (they hold command lines, paths and host names), never
    through a link."""
    if path == "-":
        if stdout_closed():
            raise OutputError("cannot write the trace to standard output: it is closed; give "
                              "a file (-o FILE)")
        try:
            fd = os.dup(1)
            os.dup2(2, 1)
            return os.fdopen(fd, "wb")
        except OSError as e:
            raise OutputError(f"cannot write the trace to standard output: {e.strerror}") \
                from None
    return open_streamed(path, "the trace")


class TraceWriter:
    """Streams events to a trace file. Use as a context manager; ``close`` writes the end record.

    ``raw``: the file already opened with ``create_output`` (a recording opens it before it
    attaches, so that an unwritable path fails before the target is touched)."""

    def __init__(self, path: str, header: Dict[str, Any], *, compress: Optional[bool] = None,
                 flush_interval: float = 1.0, raw: Optional[IO[bytes]] = None) -> None:
        self.path = path
        if compress is None:
            compress = path.endswith(".gz") or path == "-"
        if raw is None:
            raw = create_output(path)
        self._raw = raw
        self._gz = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=3) if compress else None
        self._out: IO[bytes] = self._gz if self._gz is not None else raw
        self._flush_interval = flush_interval
        self._last_flush = time.monotonic()
        self.count = 0
        self.start = float(header.get("start", time.time()))
        self.closed = False
        self._out.write(header_line(header))
        self.flush()

    def write(self, event: ev.Event) -> None:
        self._out.write(encode_row(event))
        self.count += 1
        now = time.monotonic()
        if now - self._last_flush >= self._flush_interval:
            self.flush()
            self._last_flush = now

    def flush(self) -> None:
        if self._gz is not None:
            # Z_SYNC_FLUSH: everything so far can be decompressed even if we die now.
            self._gz.flush(zlib.Z_SYNC_FLUSH)
        self._raw.flush()

    def close(self, reason: str = "complete", end_ts: Optional[float] = None,
              window_end: Optional[float] = None) -> None:
        """The end record (``RecordingEnd``: closed at ``end_ts``, now by default; the window
        closed at ``window_end``, where the writer knows it), then the file closed."""
        if self.closed:
            return
        self.closed = True
        ts = end_ts if end_ts is not None else time.time()
        self._out.write(end_line(self.start, self.count, reason, ts, window_end))
        if self._gz is not None:
            self._gz.close()
        self._raw.close()

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close("error" if exc[0] is not None else "complete")


# --------------------------------------------------------------------------- reading
class _Prefixed(io.RawIOBase):
    """The bytes already read from a pipe (to tell gzip from text), then the rest of it."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        super().__init__()
        self._head, self._rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._rest.read(len(b))
        b[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self._rest.close()
        super().close()


def open_input(path: str, error: Type[Exception] = BadInput, *,
               pipes: bool = True) -> Tuple[IO[bytes], IO[bytes]]:
    """(raw file, stream) for a plain or gzip file, compression told by content, not by name
    (files get renamed and piped around). Only regular files (and pipes, when ``pipes``) are
    read: a directory or a device (/dev/zero never ends) is refused; opening never blocks
    (inputs.py: a FIFO without a writer is refused after a wait). Opening trouble raises
    ``error`` with one line."""
    raw = open_raw(path, error, pipes)
    mode = os.fstat(raw.fileno()).st_mode
    if stat.S_ISFIFO(mode) and pipes:
        head = raw.read(2)
        while len(head) < 2:
            more = raw.read(2 - len(head))
            if not more:
                break
            head += more
        wrapped: IO[bytes] = io.BufferedReader(_Prefixed(head, raw))  # type: ignore[arg-type]
        if head == b"\x1f\x8b":
            return raw, gzip.GzipFile(fileobj=wrapped, mode="rb")  # type: ignore[return-value]
        return raw, wrapped
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return raw, gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    raw.seek(0)
    return raw, raw


def _raw_blocks(stream: IO[bytes], info: TraceInfo,
                on_block: Optional[Callable[[], None]] = None) -> Iterator[bytes]:
    """Blocks of whole lines; a stream cut short marks the trace truncated."""
    try:
        yield from byte_blocks(stream, on_block=on_block)
    except BROKEN:
        info.truncated = True


_END_TAIL = 64 * 1024                # the end record's line, or a few rows before a cut


def trace_end(path: str) -> Optional[float]:
    """When the trace at ``path`` ends, read before its events (the timeline export clamps to
    the recording window): the end record's time, or for a trace cut short the time of its
    last complete row; None for a pipe (read once) or when neither is a finite number. A gzip
    trace is decompressed once for it, in bounded memory; a plain one is read from its end.
    It is the timeline export's window (render/export/window.py)."""
    try:
        raw, stream = open_input(path, pipes=False)
    except BadInput:
        return None
    try:
        return _last_time(_tail(raw, stream, _END_TAIL))
    except (OSError, EOFError, zlib.error):
        return None
    finally:
        stream.close()
        raw.close()


def _tail(raw: IO[bytes], stream: IO[bytes], size: int) -> bytes:
    """The last ``size`` bytes of ``stream`` (seeking in a plain file, else reading through;
    a gzip cut short gives what it had)."""
    if stream is raw:
        end = raw.seek(0, os.SEEK_END)
        raw.seek(max(0, end - size))
        return raw.read(size)
    tail = b""
    try:
        while True:
            chunk = stream.read(1 << 20)
            if not chunk:
                return tail
            tail = (tail + chunk)[-size:]
    except BROKEN:
        return tail


def _last_time(tail: bytes) -> Optional[float]:
    """The time (field 1) of the last line of ``tail`` that is a whole row."""
    for line in reversed(tail.split(b"\n")[1:]):      # the first may be cut
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, list) and len(row) > 1 and isinstance(row[0], str):
            return _finite(row[1])
    return None


def _finite(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        ts = float(value)
    except OverflowError:            # an int beyond any float
        return None
    return ts if math.isfinite(ts) else None


def _header_or_reason(stream: IO[bytes], path: str) -> Union[Dict[str, Any], str]:
    """The first line of ``stream`` as a trace's header (a dict with the magic, not yet
    validated), or why the file is no trace at all (``NotATrace``'s line). A file that
    starts as a trace but is cut or broken in its first line raises ``CorruptTrace``."""
    try:
        first = stream.readline(MAX_LINE_CHARS)
    except BROKEN:
        raise CorruptTrace(f"{path}: corrupt trace: cut short inside its header") from None
    if not first:
        return f"{path}: empty file, not a hangtrace trace"
    if len(first) >= MAX_LINE_CHARS and not first.endswith(b"\n"):
        raise CorruptTrace(f"{path}: corrupt trace: line 1 is longer than "
                           f"{MAX_LINE_CHARS >> 20} MiB")
    try:
        header = json.loads(first.decode("utf-8", "surrogateescape"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        if MAGIC.encode() in first[:200] and not first.endswith(b"\n"):
            raise CorruptTrace(f"{path}: corrupt trace: cut short inside its header") from None
        return f"{path}: not a hangtrace trace (no header)"
    if not isinstance(header, dict) or header.get("magic") != MAGIC:
        return f"{path}: not a hangtrace trace (bad magic)"
    return header


def not_a_trace(path: str) -> Optional[str]:
    """Why the regular file ``path`` is no trace at all, or None when it is one (or starts as
    one): its first line, read through the reader's own opener and header check. A file that
    cannot be opened raises BadInput, one broken in its header CorruptTrace, as the reader
    would."""
    raw, stream = open_input(path, BadInput, pipes=False)
    try:
        header = _header_or_reason(stream, path)
    finally:
        stream.close()
        raw.close()
    return header if isinstance(header, str) else None


def open_trace(path: str) -> "TraceReader":
    return TraceReader(path)


class TraceReader:
    """Reads a trace: ``info`` after construction, then iterate ``events()`` once.
    ``progress(offset)``, when given, is called with the offset reached in the file as stored
    after each block of events (render/progress.py's callback).
    Every line read is bounded (``MAX_LINE_CHARS``); the header is checked by validate.py, the rows
    against the event classes' types by the codec (codec.py, msgspec): a row with wrong types is a
    corrupt line, counted and skipped."""

    def __init__(self, path: str, progress: Optional[Callable[[int], None]] = None) -> None:
        raw, self._stream = open_input(path, BadInput)
        self._on_block = offset_reporter(raw, progress)
        self.info = TraceInfo(header={}, path=path)
        try:
            self._read_header(path)
        except BaseException:
            self._stream.close()
            raise

    def _read_header(self, path: str) -> None:
        header = _header_or_reason(self._stream, path)
        if isinstance(header, str):
            raise NotATrace(header)
        version = header.get("version")
        if type(version) is int and version != VERSION:
            raise CorruptTrace(f"{path}: trace format version {shown(version)} is not supported "
                               f"(this hangtrace reads version {VERSION})")
        bad = check_header(header)
        if bad:
            raise CorruptTrace(f"{path}: corrupt trace: {bad}")
        self.info.header = header
        schema = dict(header.get("schema") or ev.schema())
        schema.setdefault("pi", ev.field_names(ev.ProcessInfo))
        self._codec = RowCodec(schema)
        processes = [self._codec.row(row) for row in header.get("processes", [])]
        if any(type(p) is not ev.ProcessInfo for p in processes):
            raise CorruptTrace(f"{path}: corrupt trace: header field 'processes' holds a "
                               f"row that is not a process")
        self.info.processes = processes  # type: ignore[assignment]

    def close(self) -> None:
        """Close the file without reading the events (``events()`` closes it at its end)."""
        self._stream.close()

    def events(self) -> Iterator[ev.Event]:
        """The events, in order (one pass). The iteration runs in C over lists of decoded
        events, a block at a time (codec.py); ``info`` is complete once it is exhausted."""
        return itertools.chain.from_iterable(self.batches())

    def batches(self, parse: Optional[Callable[..., Any]] = None
                ) -> Iterator[Sequence[ev.Event]]:
        """The events as ``events()`` gives them, in lists (a block of the file each; one
        pass, instead of ``events()``). ``parse``: the compiled reader of a block for the
        analysis (csrc/rows.c parse_rows): where it reads a block (the rows of the current
        layout), its RowBlock, a sequence of the block's events, stands for the list."""
        info = self.info
        block = self._codec.block
        end_cls = ev.RecordingEnd
        pending_bad = 0
        lines = 1                        # read so far, the header's included
        decode = self._codec.current(_IN_PLACE) if parse is not None else None
        try:
            for raw in _raw_blocks(self._stream, info, self._on_block):
                rows = decode and parse(raw, self._codec.line, BAD, end_cls,  # type: ignore
                                        decode, TIME_MIN, TIME_MAX)
                if rows is not None:              # no bad line in it, read in place
                    lines += rows.lines
                    if rows.lines and pending_bad:
                        info.bad_lines += pending_bad
                        pending_bad = 0
                    info.end = rows.end if rows.end is not None else info.end
                    info.events += len(rows)
                    yield rows
                    continue
                items, by_line = block(raw)
                lines += len(items)
                if not by_line:                   # every line an event: one C call
                    if items and pending_bad:
                        info.bad_lines += pending_bad
                        pending_bad = 0
                    info.events += len(items)
                    yield items
                    continue
                out: List[ev.Event] = []
                add = out.append
                for event in items:
                    if event is BAD:
                        # A bad line at the very end is a cut-off write; elsewhere corruption.
                        pending_bad += 1
                        continue
                    if pending_bad:
                        info.bad_lines += pending_bad
                        pending_bad = 0
                    if type(event) is end_cls:
                        info.end = event
                        continue
                    add(event)
                info.events += len(out)
                yield out
        except LineTooLong:
            raise CorruptTrace(f"{info.path}: corrupt trace: line {lines + 1} is longer than "
                               f"{MAX_LINE_CHARS >> 20} MiB") from None
        finally:
            self._stream.close()
        if pending_bad:
            info.truncated = True
            info.bad_lines += pending_bad - 1
        if info.end is None:
            info.truncated = True


def default_trace_path(pids: List[int], directory: str = ".") -> FreshName:
    """``hangtrace-PID-TIME.htrace.gz`` in ``directory``: a name others can predict, so it is
    created fresh (outputs.FreshName: never replacing a file, the next free name instead)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    who = "-".join(str(p) for p in pids[:3]) or "trace"
    return FreshName(os.path.join(directory, f"hangtrace-{who}-{stamp}{SUFFIX}.gz"))
