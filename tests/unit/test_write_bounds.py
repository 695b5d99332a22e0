"""The writer bounds what the reader bounds (issue 46 item 7): an strace log's numbers beyond 64
bits never reach a trace the reader refuses; a header ``start`` is a time; perfetto's protobuf
timestamps (unsigned ns) refuse what they cannot hold in one line."""
from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tracer import events as ev
from tracer.errors import BadInput, CorruptTrace
from tracer.strace.importer import import_strace
from tracer.tracefile.format import make_header, open_trace
from tracer.tracefile.validate import check_header

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "traces" / "dead_worker.ebpf.htrace.gz"

# results no syscall returns: beyond a signed 64-bit value, decimal and hex
HUGE_RESULTS = [
    'openat(AT_FDCWD, "/x", O_RDONLY) = 9223372036854775808',
    'openat(AT_FDCWD, "/x", O_RDONLY) = 0x8000000000000000',
    "dup(3) = 18446744073709551615",
    "clone(child_stack=NULL, flags=CLONE_VM) = 9223372036854775808",
    "socket(AF_INET, SOCK_STREAM, IPPROTO_TCP) = 9223372036854775809",
]


@pytest.mark.parametrize("call", HUGE_RESULTS)
def test_import_of_a_huge_result_writes_a_trace_the_reader_reads(tmp_path: Path, call: str) -> None:
    log = tmp_path / "a.log"
    log.write_text(f"1234  10:00:00.000000 {call}\n"
                   "1234  10:00:00.100000 futex(0x7f0000000000, FUTEX_WAIT_PRIVATE, 0, NULL "
                   "<unfinished ...>\n")
    out = tmp_path / "a.htrace"
    import_strace(str(log), str(out))
    reader = open_trace(str(out))            # main: "header field 'processes' holds a row ..."
    events = list(reader.events())
    assert reader.info.bad_lines == 0
    assert [p.pid for p in reader.info.processes] == [1234]
    first = events[0]
    assert isinstance(first, ev.Syscall) and first.ret is None     # no result, not a bad row


def test_make_header_refuses_a_process_row_the_reader_refuses() -> None:
    bad = ev.ProcessInfo(ts=1.0, pid=1, ppid=0, fds=[ev.FdInfo(2 ** 63, "file", "/x")])
    with pytest.raises(ValueError, match="reader refuses"):
        make_header(backends=["proc"], source="attach", targets=[1], start=1.0, processes=[bad])
    ok = ev.ProcessInfo(ts=1.0, pid=1, ppid=0, fds=[ev.FdInfo(2 ** 31 - 1, "file", "/x")])
    assert make_header(backends=["proc"], source="attach", targets=[1], start=1.0,
                       processes=[ok])["processes"]


def _with_start(tmp_path: Path, start: float) -> str:
    lines = gzip.open(FIXTURE, "rb").read().split(b"\n")
    header = json.loads(lines[0])
    header["start"] = start
    path = tmp_path / "t.htrace"
    path.write_bytes(json.dumps(header).encode() + b"\n" + b"\n".join(lines[1:]))
    return str(path)


@pytest.mark.parametrize("start", [1e308, -1e18, -62135596800.0, 253402300800.0])
def test_a_header_start_outside_years_1_to_9999_is_refused(tmp_path: Path, start: float) -> None:
    assert "'start' is not a time" in (check_header({"version": 1, "start": start}) or "")
    with pytest.raises(CorruptTrace, match="'start' is not a time"):
        open_trace(_with_start(tmp_path, start))


@pytest.mark.parametrize("fmt", ["perfetto", "perfetto-proto"])
@pytest.mark.parametrize("start", [1e308, -1e18, -62135596800.0])
def test_export_of_an_impossible_start_is_one_line(tmp_path: Path, fmt: str, start: float) -> None:
    run = subprocess.run([sys.executable, "-m", "tracer", "export", "-f", fmt,
                          _with_start(tmp_path, start), "-o", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "'start' is not a time" in lines[0], run.stderr


def test_proto_export_of_a_time_before_1970_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("perfetto.trace_builder.proto_builder")
    from tracer.render.export.perfetto_proto import export
    path = _with_start(tmp_path, -62135510400.0 + 86400)      # year 1, in Time's range
    assert check_header(json.loads(open(path, "rb").readline())) is None
    with pytest.raises(BadInput, match="cannot be written in perfetto's protobuf format"):
        export(path, io.BytesIO())
