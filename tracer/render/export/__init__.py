"""Exporters: a saved trace (and its analysis) in other tools' formats.

Contract: each format is one module with ``export(trace_path: str, out: TextIO) -> int``
(returns what it wrote, e.g. a count of records), reading the trace as a stream so that a large
trace exports in bounded memory. ``FORMATS`` maps the ``--format`` name to its module path.
Exporters read traces, never /proc.
"""
from __future__ import annotations

import importlib
from typing import Callable, Dict, TextIO

FORMATS: Dict[str, str] = {}   # filled as formats land: {"perfetto": "tracer.render.export.perfetto"}

FORMATS["perfetto"] = "tracer.render.export.perfetto"   # Chrome trace event JSON (Perfetto, chrome://tracing)
FORMATS["json"] = "tracer.render.export.jsonl"          # JSON lines, one object per event
FORMATS["dot"] = "tracer.render.export.dot"            # the wait-for graph for Graphviz

def exporter(fmt: str) -> Callable[[str, TextIO], int]:
    return importlib.import_module(FORMATS[fmt]).export  # type: ignore[no-any-return]
