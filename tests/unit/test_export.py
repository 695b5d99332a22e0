"""Exporters: Chrome trace event JSON (perfetto), Perfetto's protobuf (perfetto-proto) and JSON
lines, on the recorded scenario traces and on a large generated trace (bounded memory, size);
both timelines pass the validators of tests/perfetto_check.py (the two formats' specifications)
and show the finding: flows along the wait-for graph, counter tracks, the recording's notes."""
from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Dict

import pytest

from tracer import events as ev
from tracer.load.trace import analyze_trace
from tracer.render.export import FORMATS, exporter
from tracer.render.export.jsonl import event_dict
from tracer.render.export.rates import GPU_PID
from tracer.render.export.timeline import TREE_TID, VERDICT_TID_BASE
from tracer.tracefile.format import TraceReader, make_header
from perfetto_check import check_chrome_json  # noqa: E402 (tests/)

ROOT = Path(__file__).resolve().parents[2]
TRACES = sorted((ROOT / "fixtures" / "traces").glob("*.htrace.gz"))


def check_chrome_trace(doc: Dict[str, Any]) -> Dict[str, int]:
    return check_chrome_json(doc)          # tests/perfetto_check.py: the format's rules


def export_doc(path: Path, fmt: str = "perfetto") -> str:
    buf = io.StringIO()
    exporter(fmt)(str(path), buf)
    return buf.getvalue()


def test_formats_registered() -> None:
    assert FORMATS["perfetto"] == "tracer.render.export.perfetto"
    assert FORMATS["json"] == "tracer.render.export.jsonl"


@pytest.mark.parametrize("path", TRACES, ids=[p.name for p in TRACES])
def test_perfetto_export_of_recorded_traces(path: Path) -> None:
    doc = json.loads(export_doc(path))
    phases = check_chrome_trace(doc)
    reader = TraceReader(str(path))
    events = list(reader.events())
    calls = [e for e in events if isinstance(e, ev.Syscall)]
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] != "verdict"]
    # every syscall is one slice on its own thread's track, ids as in the trace
    assert len(xs) == len(calls)
    assert Counter((e["pid"], e["tid"]) for e in xs) == Counter((c.pid, c.tid) for c in calls)
    named = {(e["pid"], e["tid"]) for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {(c.pid, c.tid) for c in calls} <= named
    # eventfd writes are instants, one per successful write
    efd = [e for e in doc["traceEvents"] if e["ph"] == "i" and e["cat"] == "eventfd"]
    assert len(efd) == sum(1 for c in calls if type(c) is ev.WriteCall
                           and c.fd_kind == "eventfd" and c.err is None)
    # calls still blocked at the end run to the end of the window
    end_us = doc["otherData"]["end_s"] * 1e6
    for e in xs:
        if e["args"].get("ongoing"):
            assert abs(e["ts"] + e["dur"] - end_us) < 2.0, e
    # verdicts: the same as analyze, a window-long slice per process on its verdict track, a
    # slice per thread around all of its calls, one for the tree
    report = analyze_trace(str(path))
    verdict = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "verdict"]
    procs = {e["pid"]: e["args"]["verdict"] for e in verdict
             if e["tid"] == VERDICT_TID_BASE + e["pid"]}
    assert procs == {p.pid: p.verdict for p in report.processes}
    threads = {(e["pid"], e["tid"]): e["args"]["verdict"] for e in verdict
               if e["tid"] < VERDICT_TID_BASE}
    assert threads == {(p.pid, t.tid): t.verdict for p in report.processes for t in p.threads}
    (tree,) = [e for e in verdict if (e["pid"], e["tid"]) == (GPU_PID, TREE_TID)]
    assert tree["name"] == f"tree verdict: {report.verdict}"
    assert tree["args"]["notes"] == report.notes and tree["args"]["root_cause"] == \
        json.loads(json.dumps(report.root_cause))
    assert doc["otherData"]["verdict"] == report.verdict
    assert phases.get("M", 0) >= 2
    # flows: one per wait-for edge between tracks, from the waiting thread
    g = report.wait_graph or {"nodes": [], "edges": []}
    kinds = {n["id"]: n["kind"] for n in g["nodes"]}
    between = [e for e in g["edges"] if kinds.get(e["src"]) == "thread"
               and kinds.get(e["dst"]) in ("thread", "process")]
    starts = [e for e in doc["traceEvents"] if e["ph"] == "s"]
    assert len(starts) == len(between)
    assert sorted(e["args"]["text"] for e in starts) == sorted(e["text"] for e in between)



def test_perfetto_futex_waits_of_a_deadlock_are_slices_to_the_end() -> None:
    path = ROOT / "fixtures" / "traces" / "py_deadlock.strace.htrace.gz"
    doc = json.loads(export_doc(path))
    futex = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "futex"
             and e["args"].get("ongoing")]
    assert len(futex) >= 2          # both workers (and main in join) wait forever
    assert all(e["name"].startswith("futex WAIT") for e in futex)
    assert all(e["args"]["timeout"] is None for e in futex)
    thread_verdicts = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "verdict"
                       and e["tid"] < VERDICT_TID_BASE]
    assert any(e["args"]["verdict"] in ("deadlocked", "blocked") for e in thread_verdicts)


@pytest.mark.parametrize("path", TRACES, ids=[p.name for p in TRACES])
def test_json_lines_round_trip(path: Path) -> None:
    lines = export_doc(path, "json").splitlines()
    objs = [json.loads(line) for line in lines]
    assert objs[0]["event"] == "header" and objs[0]["magic"] == "hangtrace-trace"
    reader = TraceReader(str(path))
    expected = [event_dict(p) for p in reader.info.processes]
    expected += [event_dict(e) for e in reader.events()]
    body = objs[1:-1]
    assert body == json.loads(json.dumps(expected))
    for o in body:      # named fields, and each maps back to its event class
        cls = ev.EVENT_CLASSES[o["tag"]]
        assert cls.__name__ == o["event"]
        assert set(o) - {"event", "tag"} == set(ev.field_names(cls))
    assert objs[-1]["event"] == "RecordingEnd"
    assert objs[-1]["events"] == reader.info.events


def test_export_cli_writes_valid_file(tmp_path: Path) -> None:
    src = ROOT / "fixtures" / "traces" / "sglang_like.strace.htrace.gz"
    out = tmp_path / "t.json"
    p = subprocess.run([sys.executable, "-m", "tracer", "export", str(src), "--format",
                        "perfetto", "-o", str(out)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    check_chrome_trace(json.loads(out.read_text()))


# ---------------------------------------------------------------- a large trace
def generate_trace(path: Path, n: int, threads: int = 100, pid: int = 4242) -> None:
    """A strace-like trace of ``n`` events over ``threads`` threads, written row by row."""
    start = 1_700_000_000.0
    procs = [ev.ProcessInfo(ts=start, pid=pid, ppid=1, comm="gen", cmdline=["gen"],
                            threads={pid + i: f"w{i}" for i in range(threads)})]
    header = make_header(backends=["strace"], source="attach", targets=[pid], start=start,
                         processes=procs)
    enc = json.JSONEncoder(separators=(",", ":")).encode
    t = start
    with gzip.open(path, "wt", compresslevel=1) as f:
        f.write(json.dumps(header) + "\n")
        for i in range(n):
            tid = pid + i % threads
            t += 1e-5
            k = i % 4
            if k == 0:
                row = ["fx", t, pid, tid, "futex", "", 0, None, 2e-6, None, None, None, False,
                       "WAKE", 4096 + tid, 1, None, True]
            elif k == 1:
                row = ["wr", t, pid, tid, "write", "", 8, None, 1e-6, 5, "eventfd",
                       "anon_inode:[eventfd]", False, 8]
            elif k == 2:
                row = ["wr", t, pid, tid, "write", "", 100, None, 1e-6, 1, "file", "/tmp/log",
                       False, 100]
            else:
                row = ["sc", t, pid, tid, "getpid", "", pid, None, 1e-6, None, None, None, False]
            f.write(enc(row) + "\n")
        f.write(enc(["end", t + 0.1, "complete", t + 0.1 - start, n]) + "\n")


_MEASURE = """
import os, resource, sys
from tracer.render.export import exporter
with open(os.devnull, "w") as out:
    n = exporter(sys.argv[2])(sys.argv[1], out)
print(n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _export_rss(path: Path, fmt: str) -> tuple:
    p = subprocess.run([sys.executable, "-c", _MEASURE, str(path), fmt], capture_output=True,
                       text=True, timeout=1800, cwd=str(ROOT))   # bounds a hang, not a speed
    assert p.returncode == 0, p.stderr
    n, rss_kb = map(int, p.stdout.split())
    return n, rss_kb


@pytest.mark.slow
def test_large_trace_exports_in_bounded_memory(tmp_path: Path) -> None:
    small, large = tmp_path / "small.htrace.gz", tmp_path / "large.htrace.gz"
    generate_trace(small, 50_000)
    generate_trace(large, 1_000_000)
    n_small, rss_small = _export_rss(small, "perfetto")
    n_large, rss_large = _export_rss(large, "perfetto")
    # 1M syscalls + 250k eventfd and 250k output instants + metadata and verdicts
    assert n_large > 1_500_000
    assert n_large - n_small > 1_400_000
    # 20x the events, (almost) the same peak: memory does not grow with events.
    assert rss_large - rss_small < 16 * 1024, (rss_small, rss_large)
    n_json, rss_json = _export_rss(large, "json")
    assert n_json == 1_000_001                 # 1M events + the header's process
    assert rss_json - rss_small < 16 * 1024, (rss_small, rss_json)
