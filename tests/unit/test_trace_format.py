"""Trace format v1: round trip, gzip, truncation, corruption, unknown versions."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

from tracer import events as ev
from tracer.tracefile.format import TraceError, TraceReader, TraceWriter, make_header


def _header(pids=(10,)):
    info = ev.ProcessInfo(ts=1.0, pid=10, ppid=1, comm="w", cmdline=["w", "--x"],
                          threads={10: "w", 11: "pool"},
                          fds=[ev.FdInfo(1, "pipe", "pipe:[5]", "w", None, 5)])
    return make_header(backends=["strace"], source="attach", targets=list(pids), start=1.0,
                       processes=[info])


def _sample_events():
    return [
        ev.FutexCall(ts=1.5, pid=10, tid=11, name="futex", args="0x7f, FUTEX_WAIT", op="WAIT",
                     addr=0x7F00, timeout=None, ongoing=True, dur=2.0),
        ev.PollCall(ts=2.0, pid=10, tid=10, name="poll", ret=0, dur=1.0, timeout=1.0,
                    fd_kinds=("eventfd", "unix"), timed_out=True),
        ev.WriteCall(ts=2.5, pid=10, tid=10, name="write", fd=1, fd_kind="pipe",
                     fd_target="pipe:[5]", ret=12, nbytes=12),
        ev.ThreadSample(ts=3.0, pid=10, tid=10, comm="w", state="S", utime=5, stime=1,
                        syscall="7 0x1 0x2 0x3e8 0 0 0 0x7ff 0x7f1", run_count=4),
        ev.ProcessExit(ts=3.5, pid=10, status=3),
    ]


@pytest.mark.parametrize("name", ["t.htrace", "t.htrace.gz"])
def test_round_trip(tmp_path, name):
    path = str(tmp_path / name)
    with TraceWriter(path, _header()) as w:
        for e in _sample_events():
            w.write(e)
    r = TraceReader(path)
    assert r.info.processes[0].threads == {10: "w", 11: "pool"}
    assert r.info.processes[0].fds[0].target == "pipe:[5]"
    got = list(r.events())
    assert got == _sample_events()
    assert not r.info.truncated and r.info.end is not None and r.info.end.events == 5


def test_gzip_truncated_mid_stream_keeps_complete_events(tmp_path):
    path = str(tmp_path / "t.htrace.gz")
    w = TraceWriter(path, _header())
    for i in range(2000):
        w.write(ev.Syscall(ts=2.0 + i, pid=10, tid=10, name="getpid", ret=10, dur=1e-6))
    w.flush()
    size = os.path.getsize(path)
    w.close()
    data = open(path, "rb").read()
    cut = str(tmp_path / "cut.htrace.gz")
    open(cut, "wb").write(data[: size - 7])          # cut inside the deflate stream
    r = TraceReader(cut)
    got = list(r.events())
    assert r.info.truncated
    assert 1000 < len(got) <= 2000
    assert all(isinstance(e, ev.Syscall) and e.name == "getpid" for e in got)


def test_plain_truncated_last_line(tmp_path):
    path = str(tmp_path / "t.htrace")
    with TraceWriter(path, _header()) as w:
        for e in _sample_events():
            w.write(e)
    text = open(path).read().splitlines()
    open(path, "w").write("\n".join(text[:-2]) + "\n" + text[-2][:10])
    r = TraceReader(path)
    got = list(r.events())
    assert len(got) == 4 and r.info.truncated and r.info.bad_lines == 0


def test_corrupt_line_in_the_middle_is_skipped_and_counted(tmp_path):
    path = str(tmp_path / "t.htrace")
    with TraceWriter(path, _header()) as w:
        for e in _sample_events():
            w.write(e)
    lines = open(path).read().splitlines()
    lines.insert(3, "{not json")
    open(path, "w").write("\n".join(lines) + "\n")
    r = TraceReader(path)
    assert len(list(r.events())) == 5
    assert r.info.bad_lines == 1 and not r.info.truncated


def test_unknown_version_is_refused_with_one_line(tmp_path):
    path = str(tmp_path / "t.htrace")
    h = _header()
    h["version"] = 99
    open(path, "w").write(json.dumps(h) + "\n")
    with pytest.raises(TraceError, match="version 99 is not supported"):
        TraceReader(path)


@pytest.mark.parametrize("content,match", [
    (b"", "empty"), (b"hello world\n", "not a hangtrace trace"),
    (b'{"magic": "other"}\n', "bad magic"), (gzip.compress(b"\x00\x01", mtime=0), "not a hangtrace"),
])
def test_not_a_trace(tmp_path, content, match):
    path = tmp_path / "x"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=match):
        TraceReader(str(path))


def test_reader_maps_fields_by_name_from_the_header(tmp_path):
    """A writer with another field order (or extra fields) still reads right."""
    path = str(tmp_path / "t.htrace")
    h = _header()
    h["schema"]["wr"] = ["extra_new_field"] + h["schema"]["wr"][::-1]
    names = h["schema"]["wr"]
    e = _sample_events()[2]
    values = {n: getattr(e, n, None) for n in names}
    values["extra_new_field"] = "ignored"
    with open(path, "w") as f:
        f.write(json.dumps(h) + "\n")
        f.write(json.dumps(["wr"] + [values[n] for n in names]) + "\n")
    got = list(TraceReader(path).events())
    assert got == [e]


def test_analyze_cli_on_bad_files_prints_one_line(tmp_path):
    bad = tmp_path / "bad.htrace"
    bad.write_text("garbage\n")
    for target in (str(bad), str(tmp_path / "missing.htrace")):
        p = subprocess.run([sys.executable, "-m", "tracer", "analyze", target],
                           capture_output=True, text=True)
        assert p.returncode == 1
        assert p.stdout == ""
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert "Traceback" not in p.stderr
