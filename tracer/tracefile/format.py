"""Trace file format v1: write and read recordings.

Layout (text, UTF-8, one JSON value per line, optionally gzip-compressed as a whole):

    line 1   header object: {"magic": "hangtrace-trace", "version": 1, "backends": [...],
             "host": ..., "kernel": ..., "clock": "realtime", "start": <epoch s>,
             "source": "attach" | "import-strace", "targets": [pids], "options": {...},
             "processes": [ProcessInfo rows...], "roles": {pid: role label},
             "schema": {tag: [field names]}}
    line 2.. one event per line: [TAG, value, value, ...] in the field order the header's
             schema gives for TAG (events.py); the reader maps fields by name, so fields can be
             added in a later v1 writer without breaking older files.
    last     ["end", ts, reason, duration, events]: a trace without it was cut short.

Events are streamed to disk as they come and flushed at least once a second (``TraceWriter``),
so Ctrl-C, SIGTERM or a crash keep what was recorded. ``read_trace`` reads up to the last
complete event of a truncated file (plain or gzip) and says so in ``TraceInfo.truncated``;
an unknown magic or version raises ``TraceError`` with a one-line message.
"""
from __future__ import annotations

import gzip
import itertools
import json
import json.scanner
import os
import platform
import time
import zlib
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Dict, Iterator, List, Optional, Tuple, Type

from .. import events as ev
from .fastpath import compiled

MAGIC = "hangtrace-trace"
VERSION = 1
SUFFIX = ".htrace"


class TraceError(Exception):
    """A trace file that cannot be read; the message is one line for the user."""


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
                roles: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    uname = platform.uname()
    return {
        "magic": MAGIC, "version": VERSION, "backends": backends, "source": source,
        "host": uname.node, "kernel": uname.release, "machine": uname.machine,
        "clock": "realtime", "start": start, "targets": targets, "options": options or {},
        "processes": [ev.event_to_row(p) for p in processes], "roles": roles or {},
        "schema": ev.schema(),
        "writer": "hangtrace 0.1",
    }


# One encoder for all rows: json.dumps with non-default separators builds a new one per call.
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


class TraceWriter:
    """Streams events to a trace file. Use as a context manager; ``close`` writes the end record."""

    def __init__(self, path: str, header: Dict[str, Any], *, compress: Optional[bool] = None,
                 flush_interval: float = 1.0) -> None:
        self.path = path
        if compress is None:
            compress = path.endswith(".gz")
        raw = open(path, "wb")
        self._raw = raw
        self._gz = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=3) if compress else None
        self._out: IO[bytes] = self._gz if self._gz is not None else raw
        self._flush_interval = flush_interval
        self._last_flush = time.monotonic()
        self.count = 0
        self.start = float(header.get("start", time.time()))
        self.closed = False
        self._write_line(json.dumps(header, separators=(",", ":")))
        self.flush()

    def _write_line(self, text: str) -> None:
        self._out.write(text.encode("utf-8", "surrogateescape") + b"\n")

    def write(self, event: ev.Event) -> None:
        self._write_line(_ENCODE(ev.event_to_row(event)))
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

    def close(self, reason: str = "complete", end_ts: Optional[float] = None) -> None:
        if self.closed:
            return
        self.closed = True
        ts = end_ts if end_ts is not None else time.time()
        end = ev.RecordingEnd(ts=ts, reason=reason, duration=max(0.0, ts - self.start),
                              events=self.count)
        self._write_line(json.dumps(ev.event_to_row(end), separators=(",", ":")))
        if self._gz is not None:
            self._gz.close()
        self._raw.close()

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close("error" if exc[0] is not None else "complete")


# --------------------------------------------------------------------------- reading
def _decoder(tag: str, names: List[str]) -> Callable[[list], ev.Event]:
    cls = ev.EVENT_CLASSES[tag]
    current = ev.field_names(cls)
    if names == current and tag == "pl":
        def decode_poll(row: list) -> ev.Event:
            e = cls(*row[1:])
            e.fd_kinds = tuple(e.fd_kinds or ())  # type: ignore[attr-defined]
            return e
        return decode_poll
    if names == current and tag != "pi":
        return lambda row: cls(*row[1:])
    known = set(current)
    idx = [(i + 1, n) for i, n in enumerate(names) if n in known]

    def decode(row: list) -> ev.Event:
        kw = {n: row[i] for i, n in idx if i < len(row)}
        if "fds" in kw:
            kw["fds"] = [ev.FdInfo.from_list(f) for f in kw["fds"] or []]
        if "threads" in kw:
            kw["threads"] = {int(k): c for k, c in (kw["threads"] or {}).items()}
        if "fd_kinds" in kw:
            kw["fd_kinds"] = tuple(kw["fd_kinds"] or ())
        return cls(**kw)
    return decode


def open_input(path: str, error: Type[Exception]) -> Tuple[IO[bytes], IO[bytes]]:
    """(raw file, stream) for a plain or gzip file, compression told by content, not by name
    (files get renamed and piped around). Opening trouble raises ``error`` with one line."""
    try:
        raw = open(path, "rb")
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except PermissionError:
        raise error(f"{path}: permission denied") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory") from None
    except OSError as e:
        raise error(f"{path}: cannot open: {e.strerror}") from None
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return raw, gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    raw.seek(0)
    return raw, raw


BROKEN = (EOFError, zlib.error, gzip.BadGzipFile, OSError)
BLOCK = 1 << 20


def byte_blocks(stream: IO[bytes], size: int = BLOCK) -> Iterator[bytes]:
    """The stream in blocks of whole lines (bytes; the last may lack its newline). A gzip
    stream cut short raises one of ``BROKEN`` after every complete line before the break was
    yielded: reads go through read1, so the data of a failing read is all that is lost."""
    read = getattr(stream, "read1", None) or stream.read
    parts: List[bytes] = []           # what was read since the last block, in order
    have = 0
    try:
        while True:
            chunk = read(size)
            if not chunk:
                break
            parts.append(chunk)
            have += len(chunk)
            if have < size:              # read1 gives what one read gave: gather a block
                continue
            data = b"".join(parts) if len(parts) > 1 else chunk
            cut = data.rfind(b"\n") + 1
            if not cut:     # (no newline in a whole block: one overlong line grows here)
                parts = [data]
                continue
            rest = data[cut:]
            parts, have = ([rest], len(rest)) if rest else ([], 0)
            yield data if cut == len(data) else data[:cut]
    except BROKEN:
        data = b"".join(parts)
        cut = data.rfind(b"\n") + 1
        if cut:
            yield data[:cut]
        raise
    if parts:
        yield b"".join(parts)


def _raw_blocks(stream: IO[bytes], info: TraceInfo) -> Iterator[bytes]:
    """Blocks of whole lines; a stream cut short marks the trace truncated."""
    try:
        yield from byte_blocks(stream)
    except BROKEN:
        info.truncated = True


def open_trace(path: str) -> "TraceReader":
    return TraceReader(path)


class TraceReader:
    """Reads a trace: ``info`` after construction, then iterate ``events()`` once."""

    def __init__(self, path: str) -> None:
        _, self._stream = open_input(path, TraceError)
        self.info = TraceInfo(header={}, path=path)
        try:
            first = self._stream.readline()
        except BROKEN:
            first = b""
        if not first:
            raise TraceError(f"{path}: empty file, not a hangtrace trace")
        try:
            header = json.loads(first.decode("utf-8", "surrogateescape"))
        except (ValueError, UnicodeDecodeError):
            raise TraceError(f"{path}: not a hangtrace trace (no header)") from None
        if not isinstance(header, dict) or header.get("magic") != MAGIC:
            raise TraceError(f"{path}: not a hangtrace trace (bad magic)")
        version = header.get("version")
        if version != VERSION:
            raise TraceError(f"{path}: trace format version {version!r} is not supported "
                             f"(this hangtrace reads version {VERSION})")
        self.info.header = header
        schema = header.get("schema") or ev.schema()
        self._decoders = {t: _decoder(t, n) for t, n in schema.items() if t in ev.EVENT_CLASSES}
        self._fast_table = _fast_table(schema)
        pi = self._decoders.get("pi") or _decoder("pi", ev.field_names(ev.ProcessInfo))
        self.info.processes = [pi(row) for row in header.get("processes", [])]  # type: ignore

    def events(self) -> Iterator[ev.Event]:
        """The events, in order (one pass). The iteration runs in C over lists of decoded
        events, a block at a time; ``info`` is complete once it is exhausted."""
        return itertools.chain.from_iterable(self._batches())

    def _batches(self) -> Iterator[List[ev.Event]]:
        info = self.info
        decoders = self._decoders
        # The C scanner behind json.loads, without its per-call wrappers, for what the compiled
        # row decoder (fastpath.py) leaves: other rows, odd values, bad lines.
        scan = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[attr-defined]
        fast = compiled()
        table = self._fast_table
        decode_rows = fast.decode_rows if fast is not None and table else None
        pending_bad = 0
        for raw in _raw_blocks(self._stream, info):
            if decode_rows is not None and raw.isascii():
                items, odd = decode_rows(raw, table)
                if not odd:                   # every line an event decoded in C
                    if items and pending_bad:
                        info.bad_lines += pending_bad
                        pending_bad = 0
                    info.events += len(items)
                    yield items
                    continue
            else:
                items = raw.decode("utf-8", "surrogateescape").split("\n")
                if items[-1] == "":
                    items.pop()
            out: List[ev.Event] = []
            add = out.append
            for item in items:
                if type(item) is not str:    # an event decoded in C
                    if pending_bad:
                        info.bad_lines += pending_bad
                        pending_bad = 0
                    add(item)
                    continue
                try:
                    row, _ = scan(item, 0)
                    event = decoders[row[0]](row)
                except (ValueError, KeyError, TypeError, IndexError, StopIteration):
                    # A bad line at the very end is a cut-off write; elsewhere corruption.
                    pending_bad += 1
                    continue
                if pending_bad:
                    info.bad_lines += pending_bad
                    pending_bad = 0
                if isinstance(event, ev.RecordingEnd):
                    info.end = event
                    continue
                add(event)
            info.events += len(out)
            yield out
        if pending_bad:
            info.truncated = True
            info.bad_lines += pending_bad - 1
        if info.end is None:
            info.truncated = True
        self._stream.close()


def _fast_table(schema: Dict[str, List[str]]) -> Dict[str, tuple]:
    """{tag: (class, fields, index of a field read as a tuple or -1, slot offsets or None)}
    for the rows the compiled decoder builds as ``class(*values)``: those _decoder builds that
    way too. With the offsets it fills the slots itself: the dataclass __init__ of an event
    class only stores each field (none has a __post_init__)."""
    fast = compiled()
    table = {}
    for tag, names in schema.items():
        cls = ev.EVENT_CLASSES.get(tag)
        if fast is None or cls is None or tag in ("pi", "end") or names != ev.field_names(cls):
            continue
        plain = not hasattr(cls, "__post_init__") and not cls.__dataclass_params__.frozen
        offsets = fast.slot_offsets(cls, tuple(names)) if plain else None
        table[tag] = (cls, len(names), names.index("fd_kinds") if tag == "pl" else -1, offsets)
    return table


def default_trace_path(pids: List[int], directory: str = ".") -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    who = "-".join(str(p) for p in pids[:3]) or "trace"
    return os.path.join(directory, f"hangtrace-{who}-{stamp}{SUFFIX}.gz")
