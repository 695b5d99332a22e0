"""The recording window a report shows and an analysis uses is the one asked for: from the
moment every backend follows the targets to the moment the window closes (its deadline, or
earlier when it ended early), before the backends' stop and the end probes (issue 46 item 9:
a 5,000-process tree with ``-d 3`` showed a window of 7.8 s, the end probes' time counted in
it). The end record keeps when the trace was closed (``ts``) and says when the window closed
(``window_end``); traces written before it have no ``window_end`` and read as before (their
``ts``). Backends here are fakes; the target is a ``sleep`` the fixture started; the
assertions are about the order of moments, not speed."""
from __future__ import annotations

import json
import time

from tracer import events as ev
from tracer.load.trace import analyze_trace
from tracer.record.backends.base import Backend
from tracer.record.session import record
from tracer.tracefile.format import TraceReader, TraceWriter, make_header

T0 = 1_800_000_000.0


class _Stopped(Backend):
    """A backend that sees one call and says when it stopped."""

    def __init__(self) -> None:
        super().__init__()
        self.name, self.stopped_at = "proc", None

    def check(self):
        return None

    def start(self, targets, emit):
        emit(ev.Syscall(ts=time.time(), pid=targets.roots[0], tid=targets.roots[0],
                        name="nanosleep", dur=0.001, ret=0))

    def stop(self):
        self.stopped_at = time.time()


def test_the_end_probes_time_is_not_in_the_window(sleeper, tmp_path) -> None:
    out = str(tmp_path / "t.htrace")
    backend, probe_ran = _Stopped(), []

    def slow_end_probe(pids, analyzer):      # an end probe (after the stop) that takes time
        probe_ran.append(time.time())
        time.sleep(0.4)
        probe_ran.append(time.time())
        return [ev.ObserveError(ts=time.time(), source="probe", what="slow", why="slept")]

    rec = record([sleeper], [backend], duration=0.3, output=out, end_probes=[slow_end_probe])
    assert len(probe_ran) == 2, "the end probe did not run"
    window = rec.report.window
    assert window["end"] <= probe_ran[0], "the end probe's time counted in the window"
    reader = TraceReader(out)
    list(reader.events())
    info, end = reader.info, reader.info.end
    assert end is not None and end.window_end is not None
    assert end.window_end <= backend.stopped_at <= probe_ran[0]     # before stop and probes
    assert end.window_end - window["start"] <= 0.3 + 1e-6            # at most the seconds asked
    assert end.ts >= probe_ran[1]                                    # the trace closed after
    assert window["end"] == end.window_end and window["start"] == info.header["start"]
    assert window["duration"] == round(end.window_end - window["start"], 3)
    assert end.duration == end.window_end - window["start"]
    replayed = analyze_trace(out)
    assert replayed.window["end"] == window["end"]
    assert replayed.window["duration"] == window["duration"]


def _trace(path: str, window_end) -> str:
    header = make_header(backends=["proc"], source="attach", targets=[100], start=T0,
                         processes=[ev.ProcessInfo(ts=T0, pid=100, ppid=1, comm="w",
                                                   threads={100: "w"}, state="S")])
    with TraceWriter(path, header) as w:
        w.write(ev.Syscall(ts=T0 + 0.1, pid=100, tid=100, name="pause", ongoing=True,
                           dur=1.9))
        w.write(ev.ObserveError(ts=T0 + 6.0, source="probe", what="late", why="an end probe"))
        w.close(end_ts=T0 + 6.5, window_end=window_end)
    return path


def test_an_analysis_ends_at_the_window_not_at_the_trace_close(tmp_path) -> None:
    report = analyze_trace(_trace(str(tmp_path / "w.htrace"), T0 + 2.0))
    assert report.window["end"] == T0 + 2.0 and report.window["duration"] == 2.0


def test_a_trace_without_window_end_reads_as_before(tmp_path) -> None:
    """A trace of an older writer: its header's schema has the end record's four fields and
    its end row four values; its window ends at the end record's ts."""
    path = _trace(str(tmp_path / "old.htrace"), None)
    lines = open(path).read().splitlines()
    header = json.loads(lines[0])
    assert header["schema"]["end"][-1] == "window_end"
    header["schema"]["end"] = header["schema"]["end"][:-1]
    last = json.loads(lines[-1])
    assert last[0] == "end" and last[-1] is None
    lines[0], lines[-1] = json.dumps(header), json.dumps(last[:-1])
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    reader = TraceReader(path)
    list(reader.events())
    assert not reader.info.truncated and reader.info.end.window_end is None
    assert reader.info.end.closed_at() == T0 + 6.5
    report = analyze_trace(path)
    assert report.window["end"] == T0 + 6.5 and report.window["duration"] == 6.5
