"""Exporters: a saved trace (and its analysis) in other tools' formats.

Contract: each format is one module with ``export(trace_path, out, progress=None) -> int``
(returns what it wrote, e.g. a count of records), reading the trace as a stream so that a large
trace exports in bounded memory; ``progress`` is the trace reader's callback
(render/progress.py). ``FORMATS`` maps the ``--format`` name to its module path; a module with
``BINARY = True`` writes bytes (``out`` is a binary stream), the others text. Exporters read
traces, never /proc.
"""
from __future__ import annotations

import importlib
from typing import Callable, Dict

__all__ = ["FORMATS", "exporter", "is_binary"]

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
