"""``hangtrace export FILE --format perfetto``: the timeline (timeline.py) as Chrome trace event
JSON, which Perfetto (ui.perfetto.dev) and chrome://tracing open.

Contract:
- One JSON object ``{"displayTimeUnit": "ms", "traceEvents": [...], "otherData": {...}}``,
  written as it is made: memory stays bounded by threads whatever the trace's size (the file
  does not: Perfetto's protobuf, perfetto_proto.py, is several times smaller for large traces).
- Events of the Chrome trace event format: slices, instants, counters, metadata and flows
  (``JsonSink``). Returns the number of trace events written.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Dict, Optional, TextIO, Tuple

from .timeline import Args, walk

__all__ = ["export", "JsonSink"]

_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


class JsonSink:
    """timeline.Sink writing the traceEvents array one event at a time: complete slices ("X",
    ``ts``/``dur`` in µs since the epoch), instants ("i", scope ``t`` or ``g``), counters ("C", one
    series per name in ``args``), metadata ("M": ``process_name``, ``process_sort_index``,
    ``thread_name``), flows ("s" then "f" with ``bp: "e"``, the same ``id``, ``cat`` and ``name``:
    each binds to the slice that encloses it on its thread, which timeline.py guarantees)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.count = 0
        self._named: Dict[Tuple[int, int], str] = {}     # a name is written again only changed
        out.write('{"displayTimeUnit":"ms","traceEvents":[\n')

    def emit(self, event: Dict[str, Any]) -> None:
        self.out.write((",\n" if self.count else "") + _ENCODE(event))
        self.count += 1

    def process(self, pid: int, name: str, sort_index: int) -> None:
        if self._named.get((pid, -1)) == name:
            return
        self._named[(pid, -1)] = name
        self.emit({"ph": "M", "name": "process_name", "pid": pid, "tid": pid,
                   "args": {"name": name}})
        self.emit({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": pid,
                   "args": {"sort_index": sort_index}})

    def thread(self, pid: int, tid: int, name: str) -> None:
        if self._named.get((pid, tid)) == name:
            return
        self._named[(pid, tid)] = name
        self.emit({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                   "args": {"name": name}})

    def slice(self, pid: int, tid: int, ts: float, dur: float, name: str, cat: str,
              args: Args) -> None:
        self.emit({"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid,
                   "tid": tid, "args": args})

    def instant(self, pid: int, tid: int, ts: float, name: str, cat: str, args: Args,
                scope: str = "t") -> None:
        d: Dict[str, Any] = {"ph": "i", "name": name, "cat": cat, "ts": ts, "s": scope,
                             "pid": pid, "tid": tid}
        if args:
            d["args"] = args
        self.emit(d)

    def counter(self, pid: int, name: str, ts: float, value: float) -> None:
        self.emit({"ph": "C", "name": name, "pid": pid, "tid": pid, "ts": round(ts * 1e6, 3),
                   "args": {name: round(value, 3)}})

    def flow(self, flow_id: int, name: str, src: Tuple[int, int, float],
             dst: Tuple[int, int, float], args: Args) -> None:
        self.emit({"ph": "s", "id": flow_id, "name": name, "cat": "wait", "ts": src[2],
                   "pid": src[0], "tid": src[1], "args": args})
        self.emit({"ph": "f", "bp": "e", "id": flow_id, "name": name, "cat": "wait",
                   "ts": dst[2], "pid": dst[0], "tid": dst[1]})

    def close(self, other: Dict[str, Any]) -> None:
        self.out.write('\n],"otherData":' + _ENCODE(other) + "}\n")


def export(trace_path: str, out: TextIO, progress: Optional[Callable[[int], None]] = None) -> int:
    sink = JsonSink(out)
    report = walk(trace_path, sink, progress)
    sink.close({"source": "hangtrace", "trace": trace_path, "start_s": report.window["start"],
                "end_s": report.window["end"], "backends": report.backends,
                "verdict": report.verdict, "rule": report.rule, "truncated": report.truncated,
                "notes": report.notes})
    return sink.count
