"""Every field bounded at the edge (issue 35 item 5): the trace codec refuses an int past 64
bits, a time past year 9999, an unknown enum and a nested value of the wrong shape as one bad
line (events/shapes.py), so no rule meets them; Flight Recorder dumps and NCCL RAS answers
keep numbers of 64 bits only, and the pickle reader refuses a memo bomb fast (its node bound
is about a million: at 20 million, a 658-byte pickle took 5.7 s of CPU to refuse)."""
from __future__ import annotations

import json
import pickle
import time
import typing

import pytest

from tracer import events as ev
from tracer.analysis.job.nccl_ras import parse_ras
from tracer.events import evidence as xe, shapes
from tracer.tracefile import format as fmt  # noqa: F401  (registers every event class)
from tracer.tracefile import fr_pickle
from tracer.tracefile.codec import BAD, RowCodec, encode_row
from tracer.tracefile.fr_dump import FlightRecorderDump, dump_from_bytes, rank_of

CODEC = RowCodec(ev.schema())
BIG = "9" * 5000


SAMPLES = {
    "sc": ev.Syscall(ts=1.0, pid=10, tid=11, name="read"),
    "wr": ev.WriteCall(ts=1.0, pid=10, tid=11, name="write"),
    "cpu": ev.ThreadCpu(ts=1.0, pid=10, tid=11, since=0.5, on_cpu_ns=100),
    "gpu": ev.GpuSample(ts=1.0, gpu=0),
    "ts": ev.ThreadSample(ts=1.0, pid=10, tid=11, comm="x", state="S", utime=1, stime=2),
    "cap": xe.CaptureSite(ts=1.0, pid=10, tid=11, how="runner"),
    "klog": xe.KernelLog(ts=1.0), "ras": ev.NcclRasStatus(ts=1.0, pid=10),
    "logs": xe.LogTargets(ts=1.0, pid=10), "memp": xe.MemoryProgress(ts=1.0, pid=10),
}


def _row(tag: str, field: str, raw: str) -> bytes:
    """The row of SAMPLES[tag] with ``field`` replaced by the raw JSON text ``raw``."""
    row = json.loads(encode_row(SAMPLES[tag]))
    row[ev.field_names(type(SAMPLES[tag])).index(field) + 1] = "\u0000mark"
    return json.dumps(row).replace(json.dumps("\u0000mark"), raw).encode()


@pytest.mark.parametrize("tag, field, value, ok", [
    ("sc", "pid", str(2 ** 63 - 1), True), ("sc", "pid", str(2 ** 63), False),
    ("sc", "pid", str(-2 ** 63), True), ("sc", "pid", str(-2 ** 63 - 1), False),
    ("sc", "ret", BIG, False), ("wr", "nbytes", str(2 ** 64), False),
    ("wr", "nbytes", str(2 ** 40), True), ("cpu", "on_cpu_ns", BIG, False),
    ("cpu", "since", "1e308", False), ("gpu", "gpu", str(2 ** 64), False),
    ("gpu", "pids", f"[1,{2 ** 64}]", False), ("gpu", "mem_used", str(2 ** 62), True),
    ("ts", "utime", "-" + BIG, False), ("ts", "ts", "1e308", False),
    ("ts", "ts", str(shapes.TIME_MAX), True), ("ts", "ts", str(shapes.TIME_MAX + 1), False),
    ("ts", "ts", "-1e6", True), ("ts", "ts", "-1e12", False),
    ("cap", "how", '"not-a-kind"', False), ("cap", "how", '"with-block"', True),
    ("klog", "since", "1e308", False), ("klog", "since", "1.5e9", True),
    ("klog", "lines", '[[1.5e9,"NVRM: x"]]', True), ("klog", "lines", '[["x",1]]', False),
    ("klog", "lines", '[[1.5e9]]', False), ("klog", "lines", '[[1.5e9,"a","b"]]', False),
    ("klog", "lines", '[1]', False),
    ("ras", "port", str(2 ** 64), False),
    ("logs", "targets", '[{"fd":1,"role":"stdout","size":null}]', True),
    ("logs", "targets", '[{"role":"stdout"}]', False),
    ("logs", "targets", '[{"fd":1,"mtime":"x"}]', False),
    ("memp", "faults", '{"11":[1,2]}', True), ("memp", "faults", '{"11":[1]}', False),
    ("memp", "files", '[["/m",1,2]]', True), ("memp", "files", f'[["/m",1,{BIG}]]', False),
])
def test_rows_are_bounded_at_the_edge(tag, field, value, ok) -> None:
    row = _row(tag, field, value)
    got = CODEC.line(row)
    assert (got is not BAD) is ok, row[:200]
    if ok:
        assert type(got) is ev.EVENT_CLASSES[tag]


def _plain_ints(tp, where: str):
    """Where a type holds a bare ``int`` or ``float`` time (not through shapes.Int)."""
    if tp is int:
        yield where
        return
    if typing.get_origin(tp) is typing.Annotated:
        return                                # Int, Time: bounded by their Meta
    if typing.is_typeddict(tp):
        for k, v in typing.get_type_hints(tp, include_extras=True).items():
            yield from _plain_ints(v, f"{where}.{k}")
        return
    for arg in typing.get_args(tp):
        yield from _plain_ints(arg, where)


def test_every_int_field_of_every_class_is_bounded() -> None:
    """One rule in one place: no event class declares a plain ``int`` (unbounded), in
    Optional, List, Dict, Tuple or a nested shape either; times are shapes.Time."""
    bare, times = [], []
    for tag, cls in ev.EVENT_CLASSES.items():
        hints = typing.get_type_hints(cls, include_extras=True)
        for name in ev.field_names(cls):
            bare += list(_plain_ints(hints[name], f"{tag}.{name}"))
            if name in ("ts", "since", "start_time", "mtime") and "Annotated" not in str(
                    hints[name]):
                times.append(f"{tag}.{name}")
    assert not bare and not times, (bare, times)
    assert list(_plain_ints(typing.Optional[typing.List[int]], "x")) == ["x"]  # it can fail


def test_flight_recorder_numbers_and_keys_are_bounded() -> None:
    dump = {"version": 10 ** 5000, "pg_config": {10 ** 5000: {"ranks": 10 ** 5000}},
            "pg_status": {"k" * 100_000: {"last_started_collective": 2 ** 64,
                                          "last_completed_collective": BIG}},
            "entries": [{"collective_seq_id": 10 ** 5000, "record_id": BIG, "pg_id": 2 ** 63,
                         "op_id": str(2 ** 63 - 1), "profiling_name": 10 ** 5000,
                         "input_sizes": [[1, 10 ** 5000, 2 ** 64, 3]], "frames": [
                             {"name": "f", "line": 10 ** 5000}]}]}
    ev_ = dump_from_bytes(pickle.dumps(dump, protocol=2), FlightRecorderDump(ts=1.0, path="x"))
    assert ev_.error == ""
    e = ev_.entries[0]
    assert (e["collective_seq_id"], e["record_id"], e["pg_id"], e["op_id"]) == (
        None, None, None, 2 ** 63 - 1)
    assert e["profiling_name"] == "" and e["input_sizes"] == [[1, 3]]
    assert e["frames"][0]["line"] is None
    assert ev_.version == "" and ev_.pg_config[0]["key"] == ""
    assert len(ev_.pg_status[0]["pg_id"]) == 512
    assert ev_.pg_status[0]["last_started_collective"] is None
    # the event as a trace row reads back: nothing in it is past the edge's bounds
    assert CODEC.line(encode_row(ev_).rstrip(b"\n")) == ev_
    assert rank_of("/tmp/fr_rank_" + BIG) is None and rank_of("/tmp/fr_rank_3") == 3


def test_a_memo_bomb_is_refused_within_a_second() -> None:
    a: list = [0] * 60
    for _ in range(4):
        a = [a] * 60                          # 60**5 values from 658 bytes
    data = pickle.dumps({"entries": a, "pg_status": {}}, protocol=2)
    assert len(data) < 4096 and fr_pickle.MAX_NODES <= 1 << 20
    t0 = time.process_time()
    with pytest.raises(fr_pickle.UnsafePickle, match="values"):
        fr_pickle.load_plain(data)
    assert time.process_time() - t0 < 2.0    # 0.27 s measured (5.7 s at 20 M nodes)


@pytest.mark.parametrize("text", [
    '{"communicators": [{"hash": "a", "size": %s, "ranks": [{"rank": %s, "pid": 5}]}]}'
    % (BIG, BIG),
    '{"communicators": [{"hash": "a", "size": 1e400, "ranks": [{"rank": 1e308}]}]}',
    '{"communicators": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "#0-0 (abc) INCOMPLETE\n  Rank %s -- GPU %s managed by process %s on node h\n"
    % (BIG, BIG, BIG),
    "DEAD\n  Process %s on node h managing GPU 1\n" % BIG,
])
def test_ras_answers_with_huge_numbers_read_without_raising(text) -> None:
    st = parse_ras(text, "json" if text.startswith("{") else "text")
    for c in (st.comms if st else []):
        assert all(r.rank is None or r.rank < 2 ** 63 for r in c.ranks)
        assert all(r.rank is None or r.rank < 2 ** 63 for r in c.missing)
    assert all(p < 2 ** 63 for p in (st.dead_pids if st else []))
