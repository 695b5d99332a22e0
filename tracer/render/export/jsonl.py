"""``hangtrace export FILE --format json``: the trace as JSON lines, for scripts.

Contract: one JSON object per line, streamed (memory bounded by one event):
- first ``{"event": "header", ...}``: the trace header without its schema and process table
  (magic, version, backends, host, kernel, start, targets, options, roles);
- then ``{"event": "ProcessInfo", ...}`` for each process of the header's table;
- then one object per event, ``{"event": <class name>, "tag": <trace tag>, <field>: <value>...}``
  with the field names of tracer/events/__init__.py (fds as objects, thread tables keyed by tid text);
- last the end record ``{"event": "RecordingEnd", ...}``, or ``{"event": "truncated",
  "bad_lines": n}`` when the trace was cut short.
Returns the number of event lines written (header and end lines not counted).
"""
from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional, TextIO, Type

from ... import events as ev
from ...tracefile.format import TraceReader

_ENCODE = json.JSONEncoder(separators=(",", ":")).encode
_NAMES: Dict[Type[ev.Event], List[str]] = {}


def event_dict(e: ev.Event) -> Dict[str, Any]:
    """One event as a JSON-able dict with named fields (module doc)."""
    cls = type(e)
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = ev.field_names(cls)
    out: Dict[str, Any] = {"event": cls.__name__, "tag": cls.TAG}
    for name in names:
        v = getattr(e, name)
        if name == "fds":
            v = [{"fd": f.fd, "kind": f.kind, "target": f.target, "mode": f.mode, "pos": f.pos,
                  "inode": f.inode} for f in v]
        elif name == "threads":
            v = {str(k): c for k, c in v.items()}
        elif isinstance(v, tuple):
            v = list(v)
        out[name] = v
    return out


def export(trace_path: str, out: TextIO, progress: Optional[Callable[[int], None]] = None) -> int:
    reader = TraceReader(trace_path, progress)
    header = {k: v for k, v in reader.info.header.items() if k not in ("schema", "processes")}
    out.write(_ENCODE({"event": "header", **header}) + "\n")
    n = 0
    for p in reader.info.processes:
        out.write(_ENCODE(event_dict(p)) + "\n")
        n += 1
    for e in reader.events():
        out.write(_ENCODE(event_dict(e)) + "\n")
        n += 1
    info = reader.info
    if info.end is not None and not info.truncated:
        out.write(_ENCODE(event_dict(info.end)) + "\n")
    else:
        out.write(_ENCODE({"event": "truncated", "bad_lines": info.bad_lines}) + "\n")
    return n
