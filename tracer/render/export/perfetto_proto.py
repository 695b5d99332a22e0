"""``hangtrace export FILE --format perfetto-proto``: the timeline (timeline.py) as Perfetto's
own protobuf trace of TrackEvents, for large traces (several times smaller than the JSON, and
read by Perfetto without its JSON importer's limits).

Contract:
- Needs the ``perfetto`` package (``pip install 'hangtrace[perfetto]'``: its TracePacket
  protos and its StreamingTraceProtoBuilder, which writes each packet as it is made, so memory
  stays bounded by threads); without it ``export`` raises ToolMissing with that line.
- One packet sequence of tracks, slices, instants, counters and flows, names interned
  (``ProtoSink``). Timestamps are nanoseconds since the epoch.
Returns the number of packets written.
"""
from __future__ import annotations

from typing import IO, Any, Callable, Dict, Optional, Tuple

from ...errors import BadInput, ToolMissing
from .timeline import Args, walk

__all__ = ["export", "BINARY", "ProtoSink", "SEQUENCE_ID"]

BINARY = True
SEQUENCE_ID = 1
_NS = 1000                  # timeline times are µs
_TIMESTAMP_MAX = (1 << 64) - 1      # TracePacket.timestamp: uint64 ns since 1970 (to 2554)


def _timestamp(ts_us: float) -> int:
    """A timeline time as TracePacket's timestamp; BadInput (one line) for a time the format
    cannot hold (before 1970 or after 2554: a trace's times may be any of years 1 to 9999)."""
    ns = round(ts_us * _NS)
    if not 0 <= ns <= _TIMESTAMP_MAX:
        raise BadInput(f"a time of {ts_us / 1e6:.0f} s since 1970 cannot be written in "
                       f"perfetto's protobuf format (nanoseconds from 1970 to 2554); "
                       f"-f perfetto writes it")
    return ns


def _pb() -> Any:
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
        from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder
    except ImportError as exc:
        raise ToolMissing(f"--format perfetto-proto needs the perfetto package ({exc}): "
                          "pip install 'hangtrace[perfetto]'") from None
    return pb, StreamingTraceProtoBuilder


def _annotate(ann: Any, value: Any, intern: Callable[[str], int]) -> None:
    """One debug annotation's value (nested dicts and lists as Perfetto's dict/array; names
    inside them are not interned, top-level string values are: ``intern``)."""
    if isinstance(value, bool):
        ann.bool_value = value
    elif isinstance(value, int) and -(1 << 63) <= value < (1 << 63):
        ann.int_value = value
    elif isinstance(value, float):
        ann.double_value = value
    elif isinstance(value, dict):
        for k, v in value.items():
            child = ann.dict_entries.add()
            child.name = str(k)
            _annotate(child, v, _plain)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _annotate(ann.array_values.add(), v, _plain)
    elif intern is _plain:
        ann.string_value = "" if value is None else str(value)
    else:
        ann.string_value_iid = intern("" if value is None else str(value))


def _plain(text: str) -> int:          # the marker: strings in nested values are not interned
    raise AssertionError("not called")


class ProtoSink:
    """timeline.Sink writing TracePackets as they are made. One packet sequence
    (trusted_packet_sequence_id 1), the first packet clearing incremental state. Tracks are
    TrackDescriptors written before their first event: a process track per process (pid, name), a
    thread track per thread (pid, tid, name) under it, a track per process for its verdict, counter
    tracks under their process, the "hangtrace" process's tree verdict and GPU counters; a
    process's descriptor is written again at the end with its role in the name. Event names,
    categories, annotation names and their top-level string values are interned (InternedData in
    the packet that first uses one; those packets and the ones after are
    SEQ_NEEDS_INCREMENTAL_STATE). Slices are SLICE_BEGIN/SLICE_END pairs on their track, properly
    nested (timeline.py), their args as debug annotations (empty strings and None left out);
    instants are INSTANT events; counters COUNTER events with ``double_counter_value``; a flow is
    an INSTANT on the waiting thread's track carrying ``flow_ids`` and one on the track it waits on
    carrying ``terminating_flow_ids``."""

    def __init__(self, out: IO[bytes]) -> None:
        self.pb, builder = _pb()
        self.builder = builder(out)
        self.count = 0
        self._uuids: Dict[Tuple[str, int, int], int] = {}
        self._names: Dict[int, str] = {}         # pid -> process name given so far
        self._thread_names: Dict[int, str] = {}  # thread track uuid -> its name so far
        self._first = True
        self._iids: Dict[Tuple[str, str], int] = {}    # (table, text) -> interned id

    # ------------------------------------------------------------------ packets
    def _packet(self) -> Any:
        p = self.builder.create_packet()
        p.trusted_packet_sequence_id = SEQUENCE_ID
        if self._first:
            p.sequence_flags = self.pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
            p.first_packet_on_sequence = True
            self._first = False
        else:
            p.sequence_flags = self.pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        return p

    def _iid(self, p: Any, table: str, text: str, field: str = "name") -> int:
        """The interned id of ``text`` in InternedData.``table``, added to ``p`` when new
        (``field``: the entry's text field, "str" for string values, as bytes)."""
        iid = self._iids.get((table, text))
        if iid is None:
            iid = self._iids[(table, text)] = len(self._iids) + 1
            entry = getattr(p.interned_data, table).add()
            entry.iid = iid
            setattr(entry, field, text.encode("utf-8", "replace") if field == "str" else text)
        return iid

    def _write(self, p: Any) -> None:
        self.builder.write_packet(p)
        self.count += 1

    def _uuid(self, kind: str, pid: int, tid: int) -> int:
        return self._uuids.setdefault((kind, pid, tid), len(self._uuids) + 1)

    def _process_track(self, pid: int, name: Optional[str] = None) -> int:
        known = ("p", pid, 0) in self._uuids
        uuid = self._uuid("p", pid, 0)
        if not known or (name is not None and name != self._names.get(pid)):
            p = self._packet()
            d = p.track_descriptor
            d.uuid = uuid
            d.process.pid = pid
            d.process.process_name = name or self._names.get(pid) or f"pid {pid}"
            self._names[pid] = d.process.process_name
            self._write(p)
        return uuid

    def _thread_track(self, pid: int, tid: int, name: Optional[str] = None) -> int:
        known = self._uuids.get(("t", pid, tid))
        if known is not None and (name is None or name == self._thread_names.get(known)):
            return known
        parent = self._process_track(pid)
        uuid = self._uuid("t", pid, tid)
        p = self._packet()
        d = p.track_descriptor
        d.uuid, d.parent_uuid = uuid, parent
        d.thread.pid, d.thread.tid = pid, tid
        d.thread.thread_name = name or self._thread_names.get(uuid) or f"thread {tid}"
        self._thread_names[uuid] = d.thread.thread_name
        self._write(p)
        return uuid

    def _event(self, track: int, ts_us: float, kind: str, name: str = "", cat: str = "",
               args: Optional[Args] = None) -> Any:
        p = self._packet()
        p.timestamp = _timestamp(ts_us)
        te = p.track_event
        te.type = getattr(self.pb.TrackEvent, kind)
        te.track_uuid = track
        if name:
            te.name_iid = self._iid(p, "event_names", name)
        if cat:
            te.category_iids.append(self._iid(p, "event_categories", cat))
        for k, v in (args or {}).items():
            if v is None or v == "":
                continue
            ann = te.debug_annotations.add()
            ann.name_iid = self._iid(p, "debug_annotation_names", str(k))
            _annotate(ann, v, lambda text: self._iid(p, "debug_annotation_string_values", text,
                                                     "str"))
        return p

    # ------------------------------------------------------------------ timeline.Sink
    def process(self, pid: int, name: str, sort_index: int) -> None:
        self._process_track(pid, name)

    def thread(self, pid: int, tid: int, name: str) -> None:
        self._thread_track(pid, tid, name)

    def slice(self, pid: int, tid: int, ts: float, dur: float, name: str, cat: str,
              args: Args) -> None:
        track = self._thread_track(pid, tid)
        self._write(self._event(track, ts, "TYPE_SLICE_BEGIN", name, cat, args))
        self._write(self._event(track, ts + dur, "TYPE_SLICE_END"))

    def instant(self, pid: int, tid: int, ts: float, name: str, cat: str, args: Args,
                scope: str = "t") -> None:
        track = self._thread_track(pid, tid) if scope == "t" else self._process_track(pid)
        self._write(self._event(track, ts, "TYPE_INSTANT", name, cat, args))

    def counter(self, pid: int, name: str, ts: float, value: float) -> None:
        key = ("c:" + name, pid, 0)
        if key not in self._uuids:
            parent = self._process_track(pid)
            p = self._packet()
            d = p.track_descriptor
            d.uuid, d.parent_uuid, d.name = self._uuid(*key), parent, name
            d.counter.SetInParent()
            self._write(p)
        p = self._event(self._uuids[key], ts * 1e6, "TYPE_COUNTER")
        p.track_event.double_counter_value = float(value)
        self._write(p)

    def flow(self, flow_id: int, name: str, src: Tuple[int, int, float],
             dst: Tuple[int, int, float], args: Args) -> None:
        out = self._event(self._thread_track(src[0], src[1]), src[2], "TYPE_INSTANT",
                          name, "wait", args)
        out.track_event.flow_ids.append(flow_id)
        self._write(out)
        end = self._event(self._thread_track(dst[0], dst[1]), dst[2], "TYPE_INSTANT",
                          "awaited", "wait")
        end.track_event.terminating_flow_ids.append(flow_id)
        self._write(end)


def export(trace_path: str, out: IO[bytes],
           progress: Optional[Callable[[int], None]] = None) -> int:
    sink = ProtoSink(out)
    walk(trace_path, sink, progress)
    return sink.count
