"""A standard output that cannot be written (issue 35 item 6): ``> /dev/full`` (ENOSPC) or an
I/O error (EIO) is one line on stderr and status 1 for every command, never an internal error,
and what the command saved (import-strace's trace) is saved; a reader that went away (EPIPE)
keeps its own quiet 141 (test_cli_surface.py). The recordings (attach, watch) are in
tests/live/test_safe_outputs.py."""
from __future__ import annotations

import errno
import io
import os
from pathlib import Path

import pytest

from cli_run import HANGTRACE, one_line
from tracer import outputs
from tracer.errors import OutputError, StdoutFailed, exit_code

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "fixtures" / "traces" / "dead_worker.strace.htrace.gz"
LOG = REPO / "tests" / "data" / "strace" / "python_f_tt.log"
FULL = "/dev/full"
LINE = "hangtrace: standard output: cannot write: No space left on device"

COMMANDS = {
    "analyze": ["analyze", str(TRACE)],
    "analyze-json": ["analyze", "--json", str(TRACE)],
    "export-json": ["export", str(TRACE), "-f", "json"],
    "export-perfetto": ["export", str(TRACE), "-f", "perfetto"],
    "export-dot": ["export", str(TRACE), "-f", "dot"],
    "merge": ["merge", str(TRACE)],
    "merge-json": ["merge", "--json", str(TRACE)],
    "doctor": ["doctor"],
    "doctor-json": ["doctor", "--json"],
    "demo-list": ["demo", "--list"],
    "snapshot": ["snapshot", str(os.getpid())],
    "snapshot-json": ["snapshot", "--json", str(os.getpid())],
    "completion": ["completion", "bash"],
    "help": ["--help"],
    "command-help": ["analyze", "--help"],
    "version": ["--version"],
}


def _into_full(args, **kw):
    import subprocess
    with open(FULL, "w") as full:
        return subprocess.run(HANGTRACE + list(args), stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120, **kw)


@pytest.fixture(autouse=True)
def _needs_dev_full():
    if not os.path.exists(FULL):
        pytest.skip("no /dev/full")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_full_stdout_is_one_line_and_status_1(command):
    p = _into_full(COMMANDS[command])
    assert p.returncode == 1, p.stderr
    assert one_line(p.stderr) == LINE


def test_the_binary_export_into_a_full_stdout_is_one_line():
    pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2",
                        reason="the perfetto package is not installed (the test extra has it)")
    p = _into_full(["export", str(TRACE), "-f", "perfetto-proto"])
    assert p.returncode == 1 and one_line(p.stderr) == LINE


def test_import_then_analyze_into_a_full_stdout_keeps_the_trace(tmp_path):
    out = tmp_path / "log.htrace.gz"
    p = _into_full(["import-strace", str(LOG), "-o", str(out), "--analyze"])
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert lines[0].startswith("hangtrace: imported ") and lines[1:] == [LINE], p.stderr
    assert "Traceback" not in p.stderr
    from tracer.tracefile.format import TraceReader
    assert sum(1 for _ in TraceReader(str(out)).events()) > 0


# ----------------------------------------------------------------- the one rule (outputs.py)
class _Failing(io.StringIO):
    def __init__(self, err: int) -> None:
        super().__init__()
        self.err = err

    def write(self, s):  # type: ignore[no-untyped-def,override]
        raise OSError(self.err, os.strerror(self.err))


@pytest.mark.parametrize("err, text", [(errno.ENOSPC, "No space left on device"),
                                       (errno.EIO, "Input/output error")])
def test_write_errors_of_stdout_are_stdout_failed(err, text):
    out = outputs.guarded_stdout(_Failing(err))
    with pytest.raises(StdoutFailed) as e:
        out.write("report\n")
    assert str(e.value) == f"standard output: cannot write: {text}"
    assert isinstance(e.value, OutputError) and exit_code(e.value) == 1


@pytest.mark.parametrize("err", [errno.EPIPE, errno.EBADF])
def test_a_gone_reader_and_a_closed_stdout_keep_their_own_rules(err):
    out = outputs.guarded_stdout(_Failing(err))
    with pytest.raises(OSError) as e:
        out.write("report\n")
    assert e.value.errno == err and not isinstance(e.value, StdoutFailed)


def test_the_guard_passes_everything_else_through():
    inner = io.StringIO()
    out = outputs.guarded_stdout(inner)
    assert outputs.guarded_stdout(out) is out
    out.write("a")
    out.writelines(["b", "c"])
    out.flush()
    assert inner.getvalue() == "abc" and out.isatty() is False
