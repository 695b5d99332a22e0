"""The timeline exports of a trace with hostile times (issue 35 item 4): one timestamp at
2**63 s or at 1 (1970), a count ``since`` 1970, a trace cut short whose last row is at 2**63:
every time drawn lies in the recording window (the header's start to the trace's end), the
counters keep their bucket bound, both Perfetto formats finish with a size near the clean
export's; and an export that grows past its bound (export/__init__.py) stops with one line.
Sizes, never times, are asserted: a runaway export hits the capped output and fails."""
from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

from perfetto_check import check_chrome_json, check_track_events
from tracer import events as ev
from tracer.errors import BadInput
from tracer.render import export as export_pkg
from tracer.render.export import export_to, exporter, output_limit
from tracer.render.export.rates import BUCKET_S, MAX_BUCKETS
from tracer.render.export.window import MAX_SPAN_S, Window

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "fixtures" / "traces"
SPIN = TRACES / "yield_spin.strace.htrace.gz"           # 40,000 syscalls
COUNTS = TRACES / "feeder_blocked.ebpf.htrace.gz"       # the kernel's counts ("cnt" rows)
CAP = 64 << 20                                          # a runaway fails here, fast


class _Capped:
    """An output that refuses to grow past CAP (the bug wrote 537 MB and went on)."""

    def __init__(self, binary: bool) -> None:
        self.buf = io.BytesIO() if binary else io.StringIO()

    def write(self, data):  # type: ignore[no-untyped-def]
        if self.buf.tell() + len(data) > CAP:
            raise AssertionError(f"the export went past {CAP >> 20} MiB")
        return self.buf.write(data)

    def flush(self) -> None:
        pass


def _rows(path: Path):
    data = path.read_bytes()
    text = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    lines = text.decode().splitlines()
    return json.loads(lines[0]), lines


def _with_time(path: Path, out: Path, tags, which: str, field: int, value) -> Path:
    """``path`` with field ``field`` of one row of a tag in ``tags`` set to ``value``: the
    first such row, the one in the middle or the last."""
    header, lines = _rows(path)
    rows = [i for i, line in enumerate(lines[1:-1], 1) if json.loads(line)[0] in tags]
    i = {"first": rows[0], "middle": rows[len(rows) // 2], "last": rows[-1]}[which]
    row = json.loads(lines[i])
    row[field] = value
    lines[i] = json.dumps(row)
    out.write_text("\n".join(lines) + "\n")
    return out


def _json_export(path: Path) -> dict:
    out = _Capped(binary=False)
    exporter("perfetto")(str(path), out)
    doc = json.loads(out.buf.getvalue())
    check_chrome_json(doc)
    return doc


def _window_us(path: Path):
    header, lines = _rows(path)
    end = json.loads(lines[-1])
    assert end[0] == "end"
    return header["start"] * 1e6, end[1] * 1e6


def _times(doc: dict, bucket_us: float = BUCKET_S * 1e6):
    """(start, end) of everything drawn; a counter point is at its bucket's start, which may
    lie up to one bucket before the window's."""
    for e in doc["traceEvents"]:
        if "ts" in e:
            late = bucket_us if e["ph"] == "C" else 0.0
            yield e["ts"] + late, e["ts"] + e.get("dur", 0.0)


def _counter_points(doc: dict) -> int:
    return sum(1 for e in doc["traceEvents"] if e["ph"] == "C")


SYSCALL_TAGS = ("sc", "fx", "pl", "rd", "wt", "io")
HOSTILE = {
    "2**63-in-the-middle": (SPIN, SYSCALL_TAGS, "middle", 1, 2 ** 63),
    "2**63-last": (SPIN, SYSCALL_TAGS, "last", 1, 2 ** 63),
    "1-first": (SPIN, SYSCALL_TAGS, "first", 1, 1),
    "1-in-the-middle": (SPIN, SYSCALL_TAGS, "middle", 1, 1),
    "counts-since-1": (COUNTS, ("cnt",), "first", 4, 1),
    "counts-at-2**63": (COUNTS, ("cnt",), "last", 1, 2 ** 63),
}


@pytest.fixture(scope="module")
def clean_docs():
    return {path: _json_export(path) for path in (SPIN, COUNTS)}


@pytest.mark.parametrize("shape", sorted(HOSTILE))
def test_one_hostile_time_is_drawn_inside_the_window(tmp_path, clean_docs, shape):
    source, tags, which, field, value = HOSTILE[shape]
    path = _with_time(source, tmp_path / "hostile.htrace", tags, which, field, value)
    doc = _json_export(path)
    lo, hi = _window_us(path)
    edge = 2.0                                   # a thread's verdict slice: 1 µs either side
    assert all(lo - edge <= a and b <= hi + edge for a, b in _times(doc)), shape
    clean = clean_docs[source]
    assert _counter_points(doc) <= _counter_points(clean) + 8
    assert len(doc["traceEvents"]) <= len(clean["traceEvents"]) + 8


@pytest.mark.parametrize("shape", ["2**63-in-the-middle", "1-first"])
def test_the_protobuf_export_of_a_hostile_time_finishes_small(tmp_path, shape):
    pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2",
                        reason="the perfetto package is not installed (the test extra has it)")
    source, tags, which, field, value = HOSTILE[shape]
    path = _with_time(source, tmp_path / "hostile.htrace", tags, which, field, value)
    clean, out = _Capped(binary=True), _Capped(binary=True)
    exporter("perfetto-proto")(str(source), clean)
    exporter("perfetto-proto")(str(path), out)
    data = out.buf.getvalue()
    check_track_events(data)
    assert len(data) <= len(clean.buf.getvalue()) * 1.1 + 4096


def test_a_trace_cut_short_at_2_63_keeps_the_bucket_bound(tmp_path):
    """No end record: the window ends at the last row, at most MAX_SPAN_S after the start;
    its counters widen their buckets instead of giving one per 0.5 s."""
    header, lines = _rows(SPIN)
    last = json.loads(lines[-2])
    last[1] = 2 ** 63
    path = tmp_path / "cut.htrace"
    path.write_text("\n".join(lines[:-2] + [json.dumps(last)]) + "\n")
    doc = _json_export(path)
    lo = header["start"] * 1e6
    bucket_us = MAX_SPAN_S / MAX_BUCKETS * 1e6
    assert all(lo - 2 <= a and b <= lo + MAX_SPAN_S * 1e6 + 2
               for a, b in _times(doc, bucket_us))
    per_series: dict = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "C":
            per_series[(e["pid"], e["name"])] = per_series.get((e["pid"], e["name"]), 0) + 1
    assert per_series and max(per_series.values()) <= MAX_BUCKETS + 1


# ----------------------------------------------------------------- the window itself
def test_the_window_clamps_times_and_keeps_what_is_inside():
    w = Window.of_trace(100.0, 110.0)
    inside = ev.Syscall(ts=101.0, pid=1, tid=1, name="read", args="", dur=2.0)
    assert w.event(inside) is inside
    late = ev.Syscall(ts=2.0 ** 63, pid=1, tid=1, name="read", args="", dur=5.0)
    early = ev.Syscall(ts=1.0, pid=1, tid=1, name="read", args="", dur=1e30)
    assert (w.event(late).ts, w.event(late).dur) == (110.0, 0.0)
    assert (w.event(early).ts, w.event(early).dur) == (100.0, 10.0)
    assert (late.ts, late.dur) == (2.0 ** 63, 5.0)            # the analyzer's is untouched
    assert w.bucket_s() == BUCKET_S


def test_the_window_of_a_trace_without_a_usable_end():
    assert Window.of_trace(100.0, 50.0) == Window(100.0, 100.0)
    far = Window.of_trace(100.0, 2.0 ** 63)
    assert far.end == 100.0 + MAX_SPAN_S and far.bucket_s() == MAX_SPAN_S / MAX_BUCKETS
    pipe = Window.of_trace(100.0, None)
    assert pipe.end == 100.0 + MAX_SPAN_S and pipe.bucket_s() == BUCKET_S


# ----------------------------------------------------------------- the bound on output size
def test_output_limit_follows_the_trace_size(tmp_path):
    small = tmp_path / "small.htrace"
    small.write_text("x")
    assert output_limit(str(small)) == export_pkg.OUTPUT_FLOOR
    assert output_limit(str(SPIN)) == max(export_pkg.OUTPUT_FLOOR,
                                          export_pkg.OUTPUT_RATIO * SPIN.stat().st_size)


def test_an_export_past_its_bound_stops_with_one_line(monkeypatch, capsys, tmp_path):
    from tracer.cli import commands
    monkeypatch.setattr(export_pkg, "OUTPUT_FLOOR", 4096)
    monkeypatch.setattr(export_pkg, "OUTPUT_RATIO", 0)
    with pytest.raises(BadInput, match="its export grew past 0 MiB"):
        export_to("perfetto", str(SPIN), io.StringIO())
    keep = tmp_path / "keep.json"
    keep.write_text("keep me")
    assert commands.run(["export", str(SPIN), "-f", "json", "-o", str(keep)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"hangtrace: {SPIN}: its export grew past")
    assert keep.read_text() == "keep me" and sorted(p.name for p in tmp_path.iterdir()) == [
        "keep.json"]
