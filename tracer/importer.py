"""Import an existing strace log (plain or gzip) into a hangtrace trace file.

Contract:
- ``import_strace(log_path, out_path, *, compress=None) -> ImportResult``. ``compress`` None
  means "gzip when out_path ends in .gz" (TraceWriter's rule).
- Any strace output format is accepted (see strace/lines.py); what the log lacked (timestamps,
  durations, fd paths, pids) is recorded in the header options and in the result.
- Memory stays bounded whatever the log size: a first pass over the log only collects tids
  (to find the traced process's pid), the second streams events to a temporary file next to
  the output; the final file is that file's rows behind a header that lists every process.
- A gzip log cut short imports up to where it breaks (``ImportResult.truncated``).
- Trouble with the input (missing, unreadable, binary, not strace) raises ``ImportError_``
  with a one-line message for the CLI.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import gzip
import io
import gc
import json
import operator
import os
import re
import shutil
import tempfile
import zlib
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from typing import IO, Callable, Dict, Iterator, List, Optional, Set, Tuple

from . import events as ev
from . import trace
from .strace.convert import StraceConverter
from .strace.lines import parse_line

__all__ = ["ImportError_", "ImportResult", "import_strace"]

_SNIFF_LINES = 200


class ImportError_(Exception):
    """The log cannot be imported; the message is one line for the user."""


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
        try:
            raw = open(path, "rb")
        except FileNotFoundError:
            raise ImportError_(f"{path}: no such file") from None
        except PermissionError:
            raise ImportError_(f"{path}: permission denied") from None
        except IsADirectoryError:
            raise ImportError_(f"{path}: is a directory") from None
        except OSError as e:
            raise ImportError_(f"{path}: cannot open: {e.strerror}") from None
        magic = raw.read(2)
        raw.seek(0)
        # Detect compression by content, not by name: logs get renamed and piped around.
        self._stream: IO[bytes] = (gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
                                   if magic == b"\x1f\x8b" else raw)
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


# First pass, at C speed over 4 MiB blocks: the tid column ("1234  " or "[pid  1234] ").
_TID_RE = re.compile(rb"^(?:\[pid +)?(\d+)[ \]]", re.M)
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


def _first_pass(path: str) -> Tuple[Optional[int], Optional[float]]:
    """(smallest tid of unknown origin, first time-of-day) from a cheap scan of the log.

    Unknown origin = a tid that no clone/fork/vfork in the log created: for ``strace -f -p PID``
    these are the threads that existed at attach time, and the smallest is the leader (pid).
    """
    tids: Set[bytes] = set()
    children: Set[int] = set()
    first_tod: Optional[float] = None
    decided = False
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
            tids.update(_TID_RE.findall(block))
            _children(block, children)
    finally:
        log.close()
    unknown = {int(t) for t in tids} - children
    return (min(unknown) if unknown else None), first_tod


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


def import_strace(log_path: str, out_path: str, *, compress: Optional[bool] = None
                  ) -> ImportResult:
    """Convert the strace log at ``log_path`` into a trace file at ``out_path``."""
    _sniff(log_path)
    root_pid, first_tod = _first_pass(log_path)
    conv = StraceConverter(base_date=_base_date(log_path, first_tod), root_pid=root_pid)
    out_dir = os.path.dirname(os.path.abspath(out_path))
    try:
        tmp = tempfile.NamedTemporaryFile("wb", dir=out_dir, prefix=".hangtrace-import-",
                                          delete=False)
    except OSError as e:
        raise ImportError_(f"{out_path}: cannot write here: {e.strerror}") from None
    count = 0
    log = _Log(log_path)
    try:
        count = _convert(log, conv, tmp)
        tail = conv.finish(conv.last_ts)
        encode = _RowEncoder().encode
        for e in tail:
            tmp.write(encode(e))
        count += len(tail)
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
                     "log_truncated": log.truncated})
        writer = trace.TraceWriter(out_path, header, compress=compress)
        try:
            _append_rows(writer, tmp.name, count)
        finally:
            writer.close("log-truncated" if log.truncated else "complete", end_ts=end)
    except OSError as e:
        raise ImportError_(f"{out_path}: write failed: {e.strerror}") from None
    finally:
        log.close()
        if not tmp.closed:
            tmp.close()
        try:
            os.unlink(tmp.name)
        except OSError:
            pass
    warnings = []
    if log.truncated:
        warnings.append("the gzip log is cut short; imported up to where it breaks")
    if conv.unparsed:
        warnings.append(f"{conv.unparsed} line(s) were not strace output and were skipped")
    for name, have in caps.items():
        if not have:
            warnings.append(f"the log has no {name.replace('_', ' ')}")
    return ImportResult(out_path, count, conv.lines + conv.unparsed, conv.unparsed, caps,
                        processes, conv.first_ts, conv.last_ts, log.truncated, warnings)


def _convert(log: _Log, conv: StraceConverter, out: IO[bytes]) -> int:
    """The hot loop: every log line through the converter, events as JSON rows to ``out``."""
    feed = conv.feed_text
    fmt = _RowEncoder().text
    write = out.write
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


# How each field type of the syscall event classes is written, as f-string code (with
# the value: "$"); the result must equal json.dumps(value, separators=(",", ":")).
_FIELD_CODE = {
    "int": "{$}",
    "float": "{F($)}",
    "str": "{E($)}",
    "bool": "{'true' if $ else 'false'}",
    "Optional[int]": "{'null' if $ is None else $}",
    "Optional[float]": "{'null' if $ is None else F($)}",
    "Optional[str]": "{'null' if $ is None else E($)}",
    "Tuple[str, ...]": "{T($)}",
}


class _RowEncoder:
    """``events.event_to_row`` + JSON, byte-identical to ``TraceWriter.write``, ~3x faster.

    For each Syscall-family class a formatter is generated from the dataclass field types (all
    scalars or a tuple of strings); other classes, rare, go through event_to_row + json.
    """

    def __init__(self) -> None:
        self._json = json.JSONEncoder(separators=(",", ":")).encode
        self._fmt: Dict[type, Callable[[ev.Event], str]] = {}

    def _compile(self, cls: type) -> Optional[Callable[[ev.Event], str]]:
        parts = [json.dumps(cls.TAG)]
        for f in dataclasses.fields(cls):
            code = _FIELD_CODE.get(str(f.type))
            if code is None:
                return None
            parts.append(code.replace("$", f"e.{f.name}"))
        src = "def fmt(e):\n    return f\"[" + ",".join(parts).replace('"', '\\"') + "]\\n\"\n"
        scope = {"F": float.__repr__, "E": encode_basestring_ascii,
                 "T": lambda t: "[" + ",".join(encode_basestring_ascii(x) for x in t) + "]"}
        exec(compile(src, f"<row formatter {cls.__name__}>", "exec"), scope)  # noqa: S102
        return scope["fmt"]  # type: ignore[return-value]

    def text(self, e: ev.Event) -> str:
        """The row as one line of text, newline included."""
        fmt = self._fmt.get(type(e))
        if fmt is None:
            cls = type(e)
            compiled = self._compile(cls) if issubclass(cls, ev.Syscall) else None
            fmt = self._fmt[cls] = compiled or (lambda x: self._json(ev.event_to_row(x)) + "\n")
        return fmt(e)

    def encode(self, e: ev.Event) -> bytes:
        return self.text(e).encode("utf-8", "surrogateescape")


def _append_rows(writer: trace.TraceWriter, rows_path: str, count: int) -> None:
    """Copy already-encoded event rows behind the writer's header.

    TraceWriter has no public bulk-row API; this uses its output stream directly (same
    encoding as ``TraceWriter.write``: one compact JSON array per line).
    """
    with open(rows_path, "rb") as rows:
        shutil.copyfileobj(rows, writer._out, 1 << 20)  # noqa: SLF001
    writer.count += count
    writer.flush()
