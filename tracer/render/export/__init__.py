"""Exporters: a saved trace (and its analysis) in other tools' formats.

Contract: each format is one module with ``export(trace_path, out, progress=None) -> int``
(returns what it wrote, e.g. a count of records), reading the trace as a stream so that a large
trace exports in bounded memory; ``progress`` is the trace reader's callback
(render/progress.py). ``FORMATS`` maps the ``--format`` name to its module path; a module with
``BINARY = True`` writes bytes (``out`` is a binary stream), the others text. Exporters read
traces, never /proc. ``export_to(fmt, trace_path, out, progress=None)`` is how a command
exports: the format's ``export`` writing into ``out`` through a bound on what it writes
(``output_limit``); past it the export stops with BadInput (one line).
"""
from __future__ import annotations

import importlib
import os
import stat
from typing import IO, Any, Callable, Dict, Optional

from ...errors import BadInput

__all__ = ["FORMATS", "exporter", "is_binary", "export_to", "output_limit", "OUTPUT_RATIO",
           "OUTPUT_FLOOR", "PIPE_LIMIT"]

OUTPUT_RATIO = 256           # the JSON timeline of a gzip trace is about 30 times its size
OUTPUT_FLOOR = 64 << 20
PIPE_LIMIT = 4 << 30

FORMATS: Dict[str, str] = {
    "perfetto": "tracer.render.export.perfetto",        # Chrome trace event JSON (Perfetto, chrome://tracing)
    "perfetto-proto": "tracer.render.export.perfetto_proto",  # Perfetto's protobuf TrackEvent
    "json": "tracer.render.export.jsonl",               # JSON lines, one object per event
    "dot": "tracer.render.export.dot",                  # the wait-for graph for Graphviz
}


def exporter(fmt: str) -> Callable[..., int]:
    return importlib.import_module(FORMATS[fmt]).export  # type: ignore[no-any-return]


def is_binary(fmt: str) -> bool:
    return bool(getattr(importlib.import_module(FORMATS[fmt]), "BINARY", False))


def output_limit(trace_path: str) -> int:
    """The most an export of ``trace_path`` may write: at most ``OUTPUT_RATIO`` times the trace
    file's size, and never less than ``OUTPUT_FLOOR`` (a pipe, whose size is not known, gets
    ``PIPE_LIMIT``). A trace whose export grows without bound holds no recording's events."""
    try:
        st = os.stat(trace_path)
    except OSError:
        return OUTPUT_FLOOR
    if not stat.S_ISREG(st.st_mode):
        return PIPE_LIMIT
    return max(OUTPUT_FLOOR, OUTPUT_RATIO * st.st_size)


class _BoundedOutput:
    """``out`` counting what is written into it; BadInput once past ``limit``."""

    def __init__(self, out: IO, limit: int, trace_path: str) -> None:
        self._out, self._limit, self._trace = out, limit, trace_path
        self.written = 0

    def write(self, data: Any) -> int:
        self.written += len(data)
        if self.written > self._limit:
            raise BadInput(f"{self._trace}: its export grew past {self._limit >> 20} MiB "
                           f"({OUTPUT_RATIO} times the trace's size, at least "
                           f"{OUTPUT_FLOOR >> 20} MiB): stopped; the trace holds no "
                           "recording's events")
        return self._out.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._out, name)


def export_to(fmt: str, trace_path: str, out: IO,
              progress: Optional[Callable[[int], None]] = None) -> int:
    """Export ``trace_path`` as ``fmt`` into ``out``, bounded (module doc)."""
    bounded = _BoundedOutput(out, output_limit(trace_path), trace_path)
    return exporter(fmt)(trace_path, bounded, progress=progress)
