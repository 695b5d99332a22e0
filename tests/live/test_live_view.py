"""The live view of ``hangtrace attach`` in a terminal: driven through a pseudo-terminal against
real scenario processes (what it draws, Ctrl-C), and its refresh cost on a 100-thread process."""
from __future__ import annotations

import io
import os
import re
import sys
import time
from typing import List, Optional, Tuple

import pytest
from rich.console import Console

from terminal import ESCAPES, plain, run_on_pty
from tracer import events as ev
from tracer.analysis.analyzer import Analyzer
from tracer.render.live import LiveView


def run_in_pty(argv: List[str], *, timeout: float = 120.0, send_after: Optional[str] = None,
               send: bytes = b"\x03", rows: int = 50, cols: int = 160) -> Tuple[int, str, float]:
    """Run ``argv`` with a pty as its controlling terminal (tests/terminal.py); once
    ``send_after`` appears in the output, write ``send`` (Ctrl-C by default) to the terminal.
    Returns (exit status, output without escape sequences, seconds from send to exit)."""
    sent_at: List[float] = []

    def type_after(raw: bytes, terminal: int) -> None:
        if send_after and not sent_at and send_after in plain(raw):
            os.write(terminal, send)
            sent_at.append(time.monotonic())
    run = run_on_pty(argv, cols=cols, rows=rows, timeout=timeout, controlling=True,
                     on_output=type_after)
    took = time.monotonic() - sent_at[0] if sent_at else 0.0
    return run.returncode, ESCAPES.sub("", run.raw.decode("utf-8", "replace")), took


def hangtrace(*args: str) -> List[str]:
    return [sys.executable, "-m", "tracer", "attach", *args]


@pytest.mark.live
def test_live_view_draws_tree_progress_and_verdict(scenario, tmp_path) -> None:
    sc = scenario("spin")
    rc, out, _ = run_in_pty(hangtrace(str(sc.pid), "--backend", "proc", "--duration", "3",
                                      "-o", str(tmp_path / "t.htrace.gz")))
    live, _, final = out.rpartition("hangtrace verdict:")
    assert final, out                                    # the final report came after it
    assert "hangtrace live" in live
    assert "━" in live                                   # the progress bar
    assert "provisional verdict: busy-waiting" in live
    assert re.search(rf"^\s*{sc.pid}\s+\S", live, re.M), live   # the process row
    assert "sys/s" in live and "cpu%" in live and "quiet" in live
    # redrawn at most about twice a second over 3 s (the throttling itself is checked with a
    # controllable clock below; how many frames a loaded machine lets it draw is not)
    frames = live.count("provisional verdict:")
    assert 1 <= frames <= 14, frames
    assert final.lstrip().startswith("busy-waiting")
    assert rc == 3


@pytest.mark.live
def test_ctrl_c_ends_early_and_prints_the_report(scenario, tmp_path) -> None:
    sc = scenario("py_deadlock")
    t0 = time.monotonic()
    rc, out, took = run_in_pty(hangtrace(str(sc.pid), "--backend", "proc", "--duration", "60",
                                         "-o", str(tmp_path / "t.htrace.gz")),
                               send_after="provisional verdict:")
    assert time.monotonic() - t0 < 30 and took < 15, (took, out)
    assert "hangtrace verdict: deadlocked" in out, out
    assert "recording ended early: interrupted" in out
    assert (tmp_path / "t.htrace.gz").exists()
    assert rc == 4
    assert sc.alive()


@pytest.mark.live
def test_json_in_a_terminal_has_no_live_view(scenario, tmp_path) -> None:
    sc = scenario("spin")
    rc, out, _ = run_in_pty(hangtrace(str(sc.pid), "--backend", "proc", "--duration", "1",
                                      "--json", "-o", str(tmp_path / "t.htrace.gz")))
    assert "hangtrace live" not in out and '"verdict": "busy-waiting"' in out
    assert rc == 3


# ---------------------------------------------------------------- refresh cost
def _busy_analyzer(threads: int = 100, seconds: float = 5.0) -> Analyzer:
    """An analyzer fed like a 100-thread worker: each thread polls, writes an eventfd, waits
    on a futex, and the main thread logs, for ``seconds``."""
    pid, start = 5000, time.time() - seconds
    info = ev.ProcessInfo(ts=start, pid=pid, ppid=1, comm="worker", cmdline=["worker"],
                          threads={pid + i: f"w{i}" for i in range(threads)})
    an = Analyzer(start=start, backends=["strace", "proc"], processes=[info], roots=[pid])
    t = start
    for k in range(int(seconds * 20)):
        for i in range(threads):
            tid = pid + i
            t += 0.05 / threads
            an.feed(ev.PollCall(ts=t, pid=pid, tid=tid, name="poll", ret=0, dur=1e-4,
                                timeout=0.05, timed_out=True))
            an.feed(ev.WriteCall(ts=t, pid=pid, tid=tid, name="write", ret=8, dur=1e-6,
                                 fd=5, fd_kind="eventfd", nbytes=8))
            an.feed(ev.FutexCall(ts=t, pid=pid, tid=tid, name="futex", ret=0, dur=1e-5,
                                 op="WAIT", addr=4096 + i, timeout=None))
        an.feed(ev.WriteCall(ts=t, pid=pid, tid=pid, name="write", ret=80, dur=1e-5, fd=1,
                             fd_kind="file", fd_target="/var/log/w.log", nbytes=80))
    return an


class FakeTime:
    """live.py's clock, advanced by the test: throttling is checked without wall-clock bounds
    (those are bench/live_costs.py's). ``cost`` is what each perf_counter span seems to take."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.cost = 0.0

    def monotonic(self) -> float:
        return self.now

    def perf_counter(self) -> float:
        self.now += self.cost / 2       # called twice around each timed piece of work
        return self.now

    def time(self) -> float:          # wall time stays real: it ends the report's window
        return time.time()

    def sleep(self, s: float) -> None:
        self.now += s


def test_refresh_is_throttled_for_100_threads(monkeypatch) -> None:
    import tracer.render.live as live
    clock = FakeTime()
    monkeypatch.setattr(live, "time", clock)
    an = _busy_analyzer()
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=160, height=60)
    view = LiveView(console, duration=10.0, roots=[5000])
    with view:
        for i in range(40):                 # 2 s of session.record's ticks at 20 Hz
            view.on_tick(i * 0.05, an)
            clock.sleep(0.05)
    s = view.stats
    assert s.draws == 4 and s.reports == 4, s      # every 0.5 s, not 20 times a second
    text = ESCAPES.sub("", buf.getvalue())
    assert "+92" in text                       # 8 threads listed, the rest folded
    # the main thread logs to a file: the process (and the tree) make progress; its 99 other
    # threads spin on poll timeouts and eventfd writes
    assert "provisional verdict: progressing" in text
    assert re.search(r"busy-waiting", text)
    assert an.report().verdict == "progressing"


class _SlowAnalyzer:
    """Its report() takes 0.3 s: the view must back off to one report every ~3 s."""

    def __init__(self, clock: FakeTime) -> None:
        self.inner = _busy_analyzer(threads=4, seconds=1.0)
        self.acc = self.inner.acc
        self.calls = 0
        self.clock = clock

    def report(self, **kw):  # type: ignore[no-untyped-def]
        self.calls += 1
        self.clock.now += 0.3
        return self.inner.report(**kw)


def test_slow_report_backs_off(monkeypatch) -> None:
    import tracer.render.live as live
    clock = FakeTime()
    monkeypatch.setattr(live, "time", clock)
    an = _SlowAnalyzer(clock)
    console = Console(file=io.StringIO(), force_terminal=True, width=160)
    view = LiveView(console, duration=10.0, roots=[5000])
    t0 = clock.now
    with view:
        while clock.now - t0 < 4.0:
            view.on_tick(clock.now - t0, an)
            clock.sleep(0.25)
    assert an.calls == 2, an.calls       # 0.3 s each -> one at 0 s, the next 3 s later
    assert view.stats.draws >= 5         # the bar still moves at ~2 Hz
