"""``hangtrace analyze LOG`` streams the log's events into the analyzer (load/log.py), with no
trace file between: on real logs its report is, byte for byte, that of import-strace then
analyze of the trace (JSON and console text alike), and no scratch file is made on the way."""
from __future__ import annotations

import io
import json
import os
import tempfile

import pytest

from tracer import outputs
from tracer.errors import NotATrace
from tracer.load.inputs import InputKind, open_input
from tracer.load.log import analyze_log, open_log
from tracer.load.trace import analyze_trace
from tracer.render.console import render_report, report_console
from tracer.strace import importer
from tracer.strace.importer import import_strace

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tests/
ROOT = os.path.join(HERE, "..")
H200 = os.path.join(ROOT, "fixtures", "gpu-h200")
DATA = os.path.join(HERE, "data", "strace")
LOGS = [os.path.join(H200, n) for n in ("startup.strace.gz", "blocking_event.strace.gz",
                                         "progress.strace.gz", "spin.strace.gz")] + [
    os.path.join(ROOT, "fixtures", "gpu", "traces", "startup.strace.gz"),
    os.path.join(DATA, "field", "pasted_two_p_sessions.log"),
    os.path.join(DATA, "ff_ttt_T"),                              # an -ff folder
    os.path.join(DATA, "field", "futex_self_ff_p_killed")]      # another, killed


def _texts(report):
    buf = io.StringIO()
    render_report(report, report_console(buf), verbose=True)
    return json.dumps(report.to_json(), indent=2), buf.getvalue()


def _no_scratch(*args, **kwargs):
    raise AssertionError("analyze of a log made a scratch file")


@pytest.mark.parametrize("log", LOGS, ids=os.path.basename)
def test_analyze_of_a_log_is_import_then_analyze(log, tmp_path, monkeypatch):
    trace = str(tmp_path / "log.htrace.gz")
    import_strace(log, trace)
    imported = analyze_trace(trace)
    imported.trace_path = None               # analyze LOG names no trace: there is none
    monkeypatch.setattr(importer, "scratch_beside", _no_scratch)
    monkeypatch.setattr(outputs, "scratch_beside", _no_scratch)
    monkeypatch.setattr(tempfile, "mkstemp", _no_scratch)
    monkeypatch.setattr(tempfile, "TemporaryDirectory", _no_scratch)
    given = open_input(log)
    assert given.kind in (InputKind.STRACE_LOG, InputKind.FF_SET)
    streamed = analyze_log(open_log(given))
    assert _texts(streamed) == _texts(imported)


def test_a_text_that_is_no_strace_log_is_no_trace(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello\nnot strace either\n")
    given = open_input(str(path))
    assert given.kind is InputKind.STRACE_LOG
    with pytest.raises(NotATrace, match="not a hangtrace trace"):
        open_log(given)
