"""Fast trace rows: events encoded as trace-file lines without json.dumps per event, and a
trace file written from rows encoded ahead of its header.

Contract: ``RowEncoder().text(event)`` is byte-identical to what ``trace.TraceWriter.write``
writes for that event (tests compare them); ``write_trace`` writes header, rows and end record
exactly as TraceWriter does, from a file of rows (used by the importer, which can only write the
header once it has seen every process of the log).
"""
from __future__ import annotations

import dataclasses
import functools
import gzip
import json
import shutil
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from typing import IO, Callable, Dict, Optional

from .. import events as ev
from ..outputs import replacing

__all__ = ["RowEncoder", "RowSink", "write_trace"]


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


class RowEncoder:
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
            fmt = self.formatter(type(e))
        return fmt(e)

    def formatter(self, cls: type) -> Callable[[ev.Event], str]:
        """The row formatter of one event class (what ``text`` calls), memoised in ``_fmt``:
        the compiled encoder (fastpath.py) where it is built, falling back to the generated
        Python one for values it does not write (both give json.dumps's text)."""
        fmt = self._fmt.get(cls)
        if fmt is not None:
            return fmt
        compiled_fmt = self._compile(cls) if issubclass(cls, ev.Syscall) else None
        fmt = compiled_fmt or (lambda x: self._json(ev.event_to_row(x)) + "\n")
        from .fastpath import compiled
        fast = compiled()
        names = tuple(ev.field_names(cls))
        if fast is not None and "fds" not in names and "threads" not in names:
            fmt = functools.partial(fast.encode_row, "[" + json.dumps(cls.TAG) + ",", names,
                                    fmt)
        self._fmt[cls] = fmt
        return fmt

    def encode(self, e: ev.Event) -> bytes:
        return self.text(e).encode("utf-8", "surrogateescape")


class RowSink:
    """Where event rows go before the header can be written (it lists every process): a temp
    file next to the output, gzip-compressed on the way when the trace will be (level 3, as
    TraceWriter), so no second pass over the uncompressed rows is needed."""

    def __init__(self, tmp: IO[bytes], compress: bool) -> None:
        self._gz = (gzip.GzipFile(fileobj=tmp, mode="wb", compresslevel=3, mtime=0)
                    if compress else None)
        self.write: Callable[[bytes], object] = (self._gz or tmp).write

    def close(self) -> None:
        """End the gzip member; tmp itself stays open. A second call does nothing."""
        if self._gz is not None:
            self._gz.close()


def write_trace(out_path: str, header: Dict[str, object], rows_path: str, count: int, *,
                 compress: bool, end_ts: float, reason: str) -> None:
    """The trace file as TraceWriter writes it (header line, rows, end record), from rows
    already encoded in ``rows_path``. Compressed, the file is three gzip members (header,
    rows, end record): one stream to gzip.GzipFile (TraceReader), zcat and gzip -t."""
    head = (json.dumps(header, separators=(",", ":")) + "\n").encode("utf-8", "surrogateescape")
    start = float(header["start"])  # type: ignore[arg-type]
    end = ev.RecordingEnd(ts=end_ts, reason=reason, duration=max(0.0, end_ts - start),
                          events=count)
    tail = (json.dumps(ev.event_to_row(end), separators=(",", ":")) + "\n").encode()
    with replacing(out_path, text=False) as out:     # old file kept until it is whole
        out.write(gzip.compress(head, compresslevel=3) if compress else head)
        with open(rows_path, "rb") as rows:
            shutil.copyfileobj(rows, out, 1 << 20)
        out.write(gzip.compress(tail, compresslevel=3) if compress else tail)
