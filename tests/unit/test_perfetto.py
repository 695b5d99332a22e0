"""The Perfetto timelines show the finding (tracer/render/export/timeline.py): flow arrows along
the wait-for graph, counter tracks that add up to the analyzer's own counts, GPU utilization as
sampled, the recording's notes on the tree's verdict; and the protobuf export (perfetto_proto.py)
carries the same timeline, passes the TrackEvent checks and is smaller."""
from __future__ import annotations

import gzip
import io
import json
from collections import defaultdict
from pathlib import Path

import pytest

from cli_run import hangtrace, one_line
from perfetto_check import check_chrome_json, check_track_events
from tracer import events as ev
from tracer.load.trace import analyze_trace
from tracer.render.export import exporter
from tracer.render.export.rates import BUCKET_S, GPU_PID, OUTPUT, SYSCALLS, WRITTEN
from tracer.render.export.timeline import TREE_TID, VERDICT_TID_BASE
from tracer.tracefile.format import TraceReader, make_header

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "fixtures" / "traces"
GPU_TRACES = ROOT / "fixtures" / "gpu" / "traces"


def json_doc(path: Path) -> dict:
    buf = io.StringIO()
    exporter("perfetto")(str(path), buf)
    doc = json.loads(buf.getvalue())
    check_chrome_json(doc)
    return doc


def proto_bytes(path: Path) -> bytes:
    pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2",
                        reason="the perfetto package is not installed (the test extra has it)")
    buf = io.BytesIO()
    exporter("perfetto-proto")(str(path), buf)
    return buf.getvalue()


def counters(doc: dict) -> dict:
    """(pid, series) -> [(ts_us, value)] in order."""
    out: dict = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "C":
            out[(e["pid"], e["name"])].append((e["ts"], e["args"][e["name"]]))
    return out


# --------------------------------------------------------------------------- flows
def test_a_lock_cycle_is_drawn_as_flows_between_the_threads():
    path = TRACES / "lock_order_deadlock.strace.htrace.gz"
    doc = json_doc(path)
    report = analyze_trace(str(path))
    ends = defaultdict(dict)
    for e in doc["traceEvents"]:
        if e["ph"] in "sf":
            ends[e["id"]][e["ph"]] = e
    arrows = {((f["s"]["pid"], f["s"]["tid"]), (f["f"]["pid"], f["f"]["tid"]), f["s"]["name"])
              for f in ends.values()}
    threads = {n["id"]: (n["pid"], n["tid"]) for n in report.wait_graph["nodes"]
               if n["kind"] == "thread"}
    want = {(threads[e["src"]], threads[e["dst"]], f"waits: {e['kind']}")
            for e in report.wait_graph["edges"] if e["dst"] in threads}
    assert arrows == want and len(want) == 3          # join, then the two mutexes of the cycle
    cycle = set(report.wait_graph["proof"]["cycle"])
    assert all(f["s"]["args"]["proof"] for f in ends.values())
    assert {threads[c] for c in cycle} <= {a[0] for a in arrows}
    # each arrow leaves the waiting thread's blocked futex call (the slice around it)
    for f in ends.values():
        s = f["s"]
        around = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "futex"
                  and (e["pid"], e["tid"]) == (s["pid"], s["tid"])
                  and e["ts"] <= s["ts"] <= e["ts"] + e["dur"]]
        assert around and around[0]["args"].get("ongoing"), s


def test_a_wait_on_a_process_arrives_on_its_verdict_track():
    path = TRACES / "dead_worker.strace.htrace.gz"
    doc = json_doc(path)
    report = analyze_trace(str(path))
    nodes = {n["id"]: n for n in report.wait_graph["nodes"]}
    to_process = [e for e in report.wait_graph["edges"]
                  if nodes[e["src"]]["kind"] == "thread" and nodes[e["dst"]]["kind"] == "process"]
    assert to_process
    finishes = {(e["pid"], e["tid"]) for e in doc["traceEvents"] if e["ph"] == "f"}
    for e in to_process:
        pid = nodes[e["dst"]]["pid"]
        assert (pid, VERDICT_TID_BASE + pid) in finishes


# --------------------------------------------------------------------------- counters
@pytest.mark.parametrize("name", ["healthy_worker.strace.htrace.gz", "sglang_like.ebpf.htrace.gz",
                                  "healthy_worker.ebpf.htrace.gz"])
def test_syscall_counters_add_up_to_the_analyzers_counts(name):
    path = TRACES / name
    doc = json_doc(path)
    report = analyze_trace(str(path))
    got = counters(doc)
    for p in report.processes:
        want = sum(t.counters.get("syscalls", 0) for t in p.threads)
        total = sum(v for _, v in got.get((p.pid, SYSCALLS), [])) * BUCKET_S
        assert total == pytest.approx(want, abs=0.51), (p.pid, total, want)
        points = [ts for ts, _ in got.get((p.pid, SYSCALLS), [])]
        assert points == sorted(points) and all(
            b - a == pytest.approx(BUCKET_S * 1e6) for a, b in zip(points, points[1:]))


def test_output_counters_follow_the_analyzers_rule():
    path = TRACES / "healthy_worker.strace.htrace.gz"
    report = analyze_trace(str(path))
    got = counters(json_doc(path))
    for p in report.processes:
        out = sum(v for _, v in got.get((p.pid, OUTPUT), [])) * BUCKET_S
        written = sum(v for _, v in got.get((p.pid, WRITTEN), [])) * BUCKET_S
        assert out <= written + 1e-6
        want = sum(t.counters.get("output_bytes", 0) for t in p.threads)
        assert out == pytest.approx(want, rel=1e-6, abs=1), (p.pid, out, want)
    assert any(v > 0 for (pid, name), pts in got.items() if name == OUTPUT for _, v in pts)


def test_proc_alone_has_no_syscall_series_but_bytes_from_proc_io():
    path = TRACES / "evidence_silent_server.proc.htrace.gz"
    got = counters(json_doc(path))
    assert not any(name == SYSCALLS for _, name in got)        # not known: not drawn
    ios = [e for e in TraceReader(str(path)).events() if type(e) is ev.ProcessIO]
    if len({e.wchar for e in ios}) > 1:
        assert any(name == WRITTEN for _, name in got)


def test_gpu_utilization_is_a_counter_as_sampled():
    path = GPU_TRACES / "nccl.htrace.gz"
    samples = [e for e in TraceReader(str(path)).events()
               if type(e) is ev.GpuSample and e.util_pct is not None]
    got = counters(json_doc(path))
    for gpu in {s.gpu for s in samples}:
        series = got[(GPU_PID, f"GPU {gpu} utilization %")]
        assert [v for _, v in series] == [float(s.util_pct) for s in samples if s.gpu == gpu]


# --------------------------------------------------------------------------- notes
def test_the_recordings_notes_are_on_the_tree_verdict(tmp_path):
    start = 1_800_000_000.0
    procs = [ev.ProcessInfo(ts=start, pid=77, ppid=1, comm="w", cmdline=["w"], threads={77: "w"})]
    header = make_header(backends=["strace"], source="attach", targets=[77], start=start,
                         processes=procs, options={"errors": ["strace: attach of 78 failed"],
                                                   "notes": ["the log has no -T"]})
    path = tmp_path / "t.htrace.gz"
    with gzip.open(path, "wt") as f:
        f.write(json.dumps(header) + "\n")
        f.write(json.dumps(["sc", start + 0.1, 77, 77, "getpid", "", 77, None, 1e-6, None,
                            None, None, False]) + "\n")
        f.write(json.dumps(["end", start + 1.0, "complete", 1.0, 1]) + "\n")
    doc = json_doc(path)
    (tree,) = [e for e in doc["traceEvents"]
               if e["ph"] == "X" and (e["pid"], e["tid"]) == (GPU_PID, TREE_TID)]
    assert "strace: attach of 78 failed" in tree["args"]["notes"]
    assert "the log has no -T" in tree["args"]["notes"]
    assert tree["args"]["notes"] == analyze_trace(str(path)).notes


# --------------------------------------------------------------------------- protobuf
@pytest.mark.parametrize("path", sorted(TRACES.glob("*.htrace.gz"))[:8] +
                         [GPU_TRACES / "nccl.ebpf.htrace.gz"], ids=lambda p: p.name)
def test_the_protobuf_timeline_is_the_json_one(path):
    data = proto_bytes(path)
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
    trace = check_track_events(data)
    doc = json_doc(path)
    T = pb.TrackEvent
    kinds = [p.track_event.type for p in trace.packet if p.HasField("track_event")]
    xs = sum(1 for e in doc["traceEvents"] if e["ph"] == "X")
    assert kinds.count(T.TYPE_SLICE_BEGIN) == kinds.count(T.TYPE_SLICE_END) == xs
    assert kinds.count(T.TYPE_COUNTER) == sum(1 for e in doc["traceEvents"] if e["ph"] == "C")
    flows = sum(len(p.track_event.flow_ids) for p in trace.packet if p.HasField("track_event"))
    assert flows == sum(1 for e in doc["traceEvents"] if e["ph"] == "s")
    names = {p.track_descriptor.process.process_name for p in trace.packet
             if p.HasField("track_descriptor") and p.track_descriptor.HasField("process")}
    assert "hangtrace" in names


def test_the_protobuf_is_smaller_for_a_large_trace(tmp_path):
    from test_export import generate_trace
    path = tmp_path / "big.htrace.gz"
    generate_trace(path, 40_000)
    buf = io.StringIO()
    exporter("perfetto")(str(path), buf)
    size_json = len(buf.getvalue().encode())
    size_proto = len(proto_bytes(path))
    assert size_proto * 2.5 < size_json, (size_proto, size_json)     # 2.75x measured


def test_export_proto_from_the_command_line(tmp_path):
    pytest.importorskip("perfetto.trace_builder.proto_builder",
                        reason="the perfetto package is not installed (the test extra has it)")
    src = TRACES / "py_deadlock.strace.htrace.gz"
    out = tmp_path / "t.pftrace"
    p = hangtrace("export", str(src), "-f", "perfetto-proto", "-o", str(out))
    assert p.returncode == 0, p.stderr
    check_track_events(out.read_bytes())


def test_export_proto_without_the_perfetto_package_is_one_line(monkeypatch, capsys, tmp_path):
    import sys
    from tracer.cli import commands
    monkeypatch.setitem(sys.modules, "perfetto", None)
    monkeypatch.setitem(sys.modules, "perfetto.protos.perfetto.trace", None)
    code = commands.run(["export", str(TRACES / "py_deadlock.strace.htrace.gz"), "-f",
                         "perfetto-proto", "-o", str(tmp_path / "t.pftrace")])
    assert code == 1
    assert "pip install 'hangtrace[perfetto]'" in one_line(capsys.readouterr().err)
