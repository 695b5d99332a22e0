"""Issue 46 item 10: what a saved trace says of how its recording ended, and where hangtrace's
output may go (the live counterparts: tests/live/test_output_failures.py)."""
from __future__ import annotations

import pytest

from tracer import events as ev
from tracer.cli.commands import run
from tracer.load.trace import analyze_trace, ended_early_note
from tracer.tracefile.format import TraceWriter, make_header


def _trace(path: str, reason: str) -> str:
    info = ev.ProcessInfo(ts=1.0, pid=10, ppid=1, comm="w", cmdline=["w"], threads={10: "w"})
    header = make_header(backends=["proc"], source="attach", targets=[10], start=1.0,
                         processes=[info])
    with TraceWriter(path, header) as w:
        w.write(ev.ThreadSample(ts=1.5, pid=10, tid=10, comm="w", state="S", utime=1, stime=0,
                                syscall="7 0x1 0x2 0x3e8 0 0 0 0x7ff 0x7f1", run_count=4))
        w.close(reason, end_ts=2.0)
    return path


@pytest.mark.parametrize("reason,note", [
    ("complete", None),
    ("interrupted", "recording ended early: interrupted"),
    ("targets-exited", "recording ended early: targets-exited"),
    ("error", "recording ended early: error"),
])
def test_analyze_of_a_trace_says_its_recording_ended_early(tmp_path, capsys, reason, note):
    """As attach's own report does (record/session.py: the same function words it)."""
    path = _trace(str(tmp_path / "t.htrace.gz"), reason)
    notes = analyze_trace(path).notes
    early = [n for n in notes if n.startswith("recording ended early")]
    assert early == ([note] if note else [])
    run(["analyze", path])
    out = capsys.readouterr().out
    assert (note in out) if note else ("ended early" not in out)


def test_ended_early_note_words() -> None:
    assert ended_early_note("complete") == []
    assert ended_early_note("interrupted", "SIGTERM") == ["recording ended early: interrupted "
                                                          "(SIGTERM)"]
