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
import io
import json
import json.scanner
import os
import platform
import time
import zlib
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Dict, Iterator, List, Optional, Tuple, Type

from .. import events as ev
from .. import evidence_events  # noqa: F401  (registers the evidence event classes)

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


def _lines(stream: IO[bytes], info: TraceInfo) -> Iterator[str]:
    """Yield text lines; a gzip stream cut short ends the iteration and marks it truncated."""
    text = io.TextIOWrapper(stream, encoding="utf-8", errors="surrogateescape")  # type: ignore
    try:
        for line in text:
            yield line
    except (EOFError, zlib.error, gzip.BadGzipFile, OSError):
        info.truncated = True


def open_trace(path: str) -> "TraceReader":
    return TraceReader(path)


class TraceReader:
    """Reads a trace: ``info`` after construction, then iterate ``events()`` once."""

    def __init__(self, path: str) -> None:
        _, self._stream = open_input(path, TraceError)
        self.info = TraceInfo(header={}, path=path)
        self._it = _lines(self._stream, self.info)
        first = next(self._it, None)
        if first is None:
            raise TraceError(f"{path}: empty file, not a hangtrace trace")
        try:
            header = json.loads(first)
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
        pi = self._decoders.get("pi") or _decoder("pi", ev.field_names(ev.ProcessInfo))
        self.info.processes = [pi(row) for row in header.get("processes", [])]  # type: ignore

    def events(self) -> Iterator[ev.Event]:
        info = self.info
        decoders = self._decoders
        # The C scanner behind json.loads, without its per-call wrappers (a 1M-event trace
        # spends most of its time here).
        scan = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[attr-defined]
        pending_bad = 0
        for line in self._it:
            try:
                row, _ = scan(line, 0)
                event = decoders[row[0]](row)
            except (ValueError, KeyError, TypeError, IndexError, StopIteration):
                # A bad line at the very end is a cut-off write; elsewhere it is corruption.
                pending_bad += 1
                continue
            if pending_bad:
                info.bad_lines += pending_bad
                pending_bad = 0
            if isinstance(event, ev.RecordingEnd):
                info.end = event
                continue
            info.events += 1
            yield event
        if pending_bad:
            info.truncated = True
            info.bad_lines += pending_bad - 1
        if info.end is None:
            info.truncated = True
        self._stream.close()


def default_trace_path(pids: List[int], directory: str = ".") -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    who = "-".join(str(p) for p in pids[:3]) or "trace"
    return os.path.join(directory, f"hangtrace-{who}-{stamp}{SUFFIX}.gz")
