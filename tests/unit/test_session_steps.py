"""record/session.py's steps (attach, loop, close) on every way a recording ends: each stops
every backend it started and leaves a readable trace with its end record, and the report says
why it ended. Backends here are fakes; the target is a ``sleep`` this test started (it is
never stopped or traced). No assertion depends on how fast the machine is."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tracer import events as ev
from tracer.record.backends.base import Backend
from tracer.record.session import record
from tracer.tracefile.format import TraceReader


class Fake(Backend):
    def __init__(self, name: str = "proc", fail: bool = False) -> None:
        super().__init__()
        self.name, self.fail = name, fail
        self.started = self.stopped = 0

    def check(self):
        return None

    def start(self, targets, emit):
        self.started += 1
        if self.fail:
            raise RuntimeError("cannot start")
        emit(ev.Syscall(ts=time.time(), pid=targets.roots[0], tid=targets.roots[0],
                        name="nanosleep", dur=0.001, ret=0))

    def stop(self):
        self.stopped += 1


def _read(path):
    r = TraceReader(path)
    events = list(r.events())
    return r.info, events


def test_a_window_that_runs_its_course(sleeper, tmp_path):
    out = str(tmp_path / "t.htrace")
    a, b = Fake(), Fake("nvml")
    rec = record([sleeper], [a, b], duration=0.3, output=out)
    assert rec.reason == "complete" and (a.started, a.stopped, b.stopped) == (1, 1, 1)
    info, events = _read(out)
    assert info.end is not None and info.end.reason == "complete"
    assert info.header["backends"] == ["proc", "nvml"] and str(sleeper) in info.header["roles"]
    assert any(isinstance(e, ev.Syscall) for e in events)
    assert rec.report.trace_path == out


def test_a_backend_that_fails_to_start_still_leaves_a_trace(sleeper, tmp_path):
    out = str(tmp_path / "t.htrace")
    a, b, c = Fake(), Fake("strace", fail=True), Fake("nvml")
    with pytest.raises(RuntimeError, match="cannot start"):
        record([sleeper], [a, b, c], duration=5, output=out)
    assert (a.stopped, b.stopped, c.started) == (1, 1, 0)   # the half-started one too
    info, events = _read(out)
    assert info.end is not None and info.end.reason == "error"
    assert [p.pid for p in info.processes] == [sleeper]
    assert any(isinstance(e, ev.Syscall) for e in events)   # what came before the failure


def test_a_stop_signal_ends_the_window_and_keeps_everything(sleeper, tmp_path):
    out = str(tmp_path / "t.htrace")
    sent = []

    def tick(elapsed, analyzer):
        if not sent:
            sent.append(os.kill(os.getpid(), signal.SIGTERM))

    old = signal.getsignal(signal.SIGTERM)
    rec = record([sleeper], [Fake()], duration=60, output=out, on_tick=tick)
    assert signal.getsignal(signal.SIGTERM) == old            # restored
    assert rec.reason == "interrupted"
    assert any("ended early: interrupted (SIGTERM)" in n for n in rec.report.notes)
    info, _ = _read(out)
    assert info.end is not None and info.end.reason == "interrupted"


def test_targets_that_exit_end_the_window(tmp_path):
    p = subprocess.Popen(["sleep", "0.2"])
    try:
        rec = record([p.pid], [Fake()], duration=60, output=str(tmp_path / "t.htrace"),
                     on_tick=lambda *_: p.poll())           # reaped: no zombie left
    finally:
        p.kill()
        p.wait()
    assert rec.reason == "targets-exited"
