"""Validators of the Perfetto exports, for the tests: Perfetto's own trace processor cannot be had
offline here (the ``perfetto`` package downloads ``trace_processor_shell`` at run time), so the
files are checked against the two specifications instead.

- ``check_chrome_json(doc)``: the Chrome trace event format ("Trace Event Format", the JSON
  object form): the phases hangtrace writes (X, i, C, M, s, f) with the fields each requires and
  their types; slices of one thread properly nested; instants' scope; counters' numeric args;
  metadata names; every flow one "s" and one "f" of the same id, cat and name, the end not
  before the start, each bound to a slice that encloses it on its own thread ("s", and "f"
  with ``bp: "e"``); every thread and process that has events named. Returns the phase counts.
- ``check_track_events(data)``: Perfetto's protobuf (perfetto_trace.proto, decoded with the
  ``perfetto`` package's generated classes): one trusted sequence whose first packet clears
  incremental state; interned names defined once, before use, in packets that need incremental
  state; TrackDescriptors before use, parents before children, a uuid always
  describing the same thread or process; TrackEvents of known types on known tracks, counters
  only on counter tracks and with a value, BEGIN/END balanced and nested per track in time
  order; every flow id started once and terminated once, not earlier. Returns the trace.
AssertionError says what is wrong and where.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Dict, List, Tuple

PHASES = {"X", "i", "C", "M", "s", "f"}
METADATA = {"process_name", "process_sort_index", "thread_name", "thread_sort_index"}


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _nested(slices: List[Tuple[float, float, str]], where: Any) -> None:
    stack: List[float] = []
    for start, end, name in sorted(slices, key=lambda s: (s[0], -s[1])):
        while stack and start >= stack[-1] - 1e-3:
            stack.pop()
        assert not stack or end <= stack[-1] + 1e-3, \
            f"slice {name} [{start}, {end}] crosses its parent on {where}"
        stack.append(end)


def _encloses(slices: List[Tuple[float, float, str]], ts: float) -> bool:
    return any(start <= ts <= end for start, end, _ in slices)


def check_chrome_json(doc: Any) -> Dict[str, int]:
    assert isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list), "no traceEvents"
    assert doc.get("displayTimeUnit", "ms") in ("ms", "ns")
    assert isinstance(doc.get("otherData", {}), dict)
    phases: Counter = Counter()
    slices: Dict[Tuple[int, int], List[Tuple[float, float, str]]] = defaultdict(list)
    flows: Dict[Any, Dict[str, dict]] = defaultdict(dict)
    named_threads, named_procs, used = set(), set(), set()
    for i, e in enumerate(doc["traceEvents"]):
        where = f"event {i} {e!r:.200}"
        assert isinstance(e, dict) and e.get("ph") in PHASES, where
        ph = e["ph"]
        phases[ph] += 1
        assert isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int), where
        if ph == "M":
            assert e.get("name") in METADATA and isinstance(e.get("args"), dict), where
            if e["name"].endswith("_name"):
                assert isinstance(e["args"].get("name"), str), where
                (named_procs if e["name"] == "process_name" else named_threads).add(
                    e["pid"] if e["name"] == "process_name" else (e["pid"], e["tid"]))
            else:
                assert isinstance(e["args"].get("sort_index"), int), where
            continue
        assert _num(e.get("ts")) and e["ts"] >= 0, where
        assert isinstance(e.get("name"), str) and e["name"], where
        used.add((e["pid"], e["tid"]) if ph != "C" else (e["pid"], None))
        if ph == "X":
            assert _num(e.get("dur")) and e["dur"] >= 0, where
            assert isinstance(e.get("cat"), str) and isinstance(e.get("args", {}), dict), where
            slices[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["name"]))
        elif ph == "i":
            assert e.get("s", "t") in ("g", "p", "t"), where
        elif ph == "C":
            args = e.get("args")
            assert isinstance(args, dict) and args and all(_num(v) for v in args.values()), where
        else:                                                  # s, f
            assert isinstance(e.get("id"), (int, str)) and isinstance(e.get("cat"), str), where
            assert ph == "s" or e.get("bp", "e") == "e", where
            assert ph not in flows[e["id"]], f"flow {e['id']} has two {ph!r}: {where}"
            flows[e["id"]][ph] = e
    for track, items in slices.items():
        _nested(items, f"track {track}")
    for fid, ends in flows.items():
        assert set(ends) == {"s", "f"}, f"flow {fid} is not one s and one f: {sorted(ends)}"
        s, f = ends["s"], ends["f"]
        assert (s["cat"], s["name"]) == (f["cat"], f["name"]), f"flow {fid}: cat/name differ"
        assert f["ts"] >= s["ts"], f"flow {fid} ends before it starts"
        for end in (s, f):
            assert _encloses(slices.get((end["pid"], end["tid"]), []), end["ts"]), \
                f"flow {fid} {end['ph']} at {end['ts']} has no slice around it on its thread"
    for pid, tid in used:
        if pid == 0:                                  # global instants (lost events)
            continue
        assert pid in named_procs, f"pid {pid} has events but no process_name"
        assert tid is None or (pid, tid) in named_threads, f"({pid}, {tid}) has no thread_name"
    return dict(phases)


def check_track_events(data: bytes) -> Any:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
    trace = pb.Trace()
    trace.ParseFromString(data)
    assert trace.packet, "no packets"
    first = trace.packet[0]
    assert first.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED, "first packet"
    tracks: Dict[int, Any] = {}
    events: Dict[int, List[Tuple[int, int, int, str]]] = defaultdict(list)
    starts: Dict[int, int] = {}
    ends: Dict[int, int] = {}
    interned: Dict[Tuple[str, int], str] = {}
    T = pb.TrackEvent
    for i, p in enumerate(trace.packet):
        where = f"packet {i}"
        assert p.trusted_packet_sequence_id == first.trusted_packet_sequence_id != 0, where
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            assert d.uuid, where
            assert not d.parent_uuid or d.parent_uuid in tracks, f"{where}: parent unknown"
            if d.HasField("thread"):
                assert d.thread.pid and d.thread.tid, where
            if d.uuid in tracks:
                old = tracks[d.uuid]
                assert (old.HasField("thread"), old.HasField("process"),
                        old.HasField("counter")) == (d.HasField("thread"), d.HasField("process"),
                                                     d.HasField("counter")), where
                assert old.thread.tid == d.thread.tid and old.process.pid == d.process.pid, where
            tracks[d.uuid] = d
            continue
        assert p.HasField("track_event") and p.timestamp > 0, where
        te = p.track_event
        assert te.track_uuid in tracks, f"{where}: track {te.track_uuid} not described before"
        assert te.type in (T.TYPE_SLICE_BEGIN, T.TYPE_SLICE_END, T.TYPE_INSTANT,
                           T.TYPE_COUNTER), where
        is_counter = tracks[te.track_uuid].HasField("counter")
        assert (te.type == T.TYPE_COUNTER) == is_counter, f"{where}: counter on a slice track"
        if te.type == T.TYPE_COUNTER:
            assert te.HasField("double_counter_value") or te.HasField("counter_value"), where
        for table in ("event_names", "event_categories", "debug_annotation_names",
                      "debug_annotation_string_values"):
            for entry in getattr(p.interned_data, table):
                assert entry.iid and (table, entry.iid) not in interned, f"{where}: {table}"
                interned[(table, entry.iid)] = getattr(entry, "name", None) or entry.str
        if p.interned_data.ByteSize():
            assert p.sequence_flags & pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE or i == 0, where
        name = te.name or interned.get(("event_names", te.name_iid), "")
        if te.name_iid:
            assert ("event_names", te.name_iid) in interned, f"{where}: name iid unknown"
        assert all(("event_categories", c) in interned for c in te.category_iids), where
        assert all(not a.name_iid or ("debug_annotation_names", a.name_iid) in interned
                   for a in te.debug_annotations), f"{where}: annotation name iid unknown"
        assert all(not a.string_value_iid or ("debug_annotation_string_values",
                                              a.string_value_iid) in interned
                   for a in te.debug_annotations), f"{where}: string value iid unknown"
        if te.type in (T.TYPE_SLICE_BEGIN, T.TYPE_INSTANT):
            assert name, f"{where}: unnamed"
        events[te.track_uuid].append((p.timestamp, i, te.type, name))
        for fid in te.flow_ids:
            assert fid not in starts, f"flow {fid} started twice"
            starts[fid] = p.timestamp
        for fid in te.terminating_flow_ids:
            assert fid not in ends, f"flow {fid} terminated twice"
            ends[fid] = p.timestamp
    for track, evs in events.items():
        depth = 0
        # stable sort by time: at one instant the order written is kept (END before BEGIN of
        # the next slice, as the exporter writes them)
        for ts, i, kind, name in sorted(evs, key=lambda x: (x[0], x[1])):
            if kind == T.TYPE_SLICE_BEGIN:
                depth += 1
            elif kind == T.TYPE_SLICE_END:
                assert depth > 0, f"track {track}: END without BEGIN at packet {i}"
                depth -= 1
        assert depth == 0, f"track {track}: {depth} slices never end"
    assert set(starts) == set(ends), f"flows not both ended: {set(starts) ^ set(ends)}"
    assert all(ends[f] >= starts[f] for f in starts), "a flow ends before it starts"
    return trace
