"""strace's timestamps into seconds (strace/times.py): -r deltas are summed (issue 32 item 2),
-ttt times kept, -t/-tt times of day dated and carried past midnight; a -r log is imported in
one process and its window is the sum of its deltas."""
from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

import pytest

import report_schema

from tracer.load.trace import analyze_trace
from tracer.strace.importer import import_strace
from tracer.strace.scan import LogScan
from tracer.strace.times import LogTimes, relative_shape

FIELD = Path(__file__).resolve().parent.parent / "data" / "strace" / "field"


def test_r_deltas_are_summed() -> None:
    times = LogTimes(relative=True)
    assert [times.seconds(d, False) for d in (0.0, 0.25, 1.5, 0.25)] == [0.0, 0.25, 1.75, 2.0]


def test_ttt_times_are_kept() -> None:
    times = LogTimes()
    assert [times.seconds(t, False) for t in (1795950378.5, 1795950379.0)] == \
        [1795950378.5, 1795950379.0]


@pytest.mark.parametrize("text, ts, relative", [
    ("[pid 25644]      0.000000 restart_syscall(<... resuming ...> <unfinished ...>", 0.0, True),
    ("     1.250000 read(3, \"\", 64) = 0", 1.25, True),
    ("1234  1795950378.012864 read(3, \"\", 64) = 0", 1795950378.012864, False),
    ("100 1000.0 futex(0x1, FUTEX_WAKE, 1) = 0", 1000.0, False),      # a made-up time
])
def test_a_r_time_is_known_by_its_shape(text: str, ts: float, relative: bool) -> None:
    assert relative_shape(text, ts) is relative


def test_time_of_day_runs_past_midnight() -> None:
    times = LogTimes(_dt.date(2026, 12, 1))
    a, b = times.seconds(86399.0, True), times.seconds(1.0, True)
    assert b - a == pytest.approx(2.0)


def test_the_first_pass_tells_a_relative_log() -> None:
    scan = LogScan()
    scan.feed((FIELD / "futex_self_f_r_p_stderr.log").read_bytes())
    assert scan.facts.relative_ts
    scan = LogScan()
    scan.feed((FIELD / "feeder_blocked_f_ttt_T_y_p.log").read_bytes())
    assert not scan.facts.relative_ts


def test_a_r_log_has_the_window_its_deltas_add_up_to(tmp_path: Path) -> None:
    one, two = str(tmp_path / "one.htrace"), str(tmp_path / "two.htrace")
    res = import_strace(str(FIELD / "futex_self_f_r_p_stderr.log"), one)
    import_strace(str(FIELD / "futex_self_f_r_p_stderr.log"), two, workers=2)
    assert Path(one).read_bytes() == Path(two).read_bytes()
    assert res.capabilities["timestamps"] and res.span == pytest.approx(2.9, abs=0.1)
    assert analyze_trace(one).window["duration"] == pytest.approx(2.9, abs=0.1)


def test_a_log_without_times_says_so_never_0_s(tmp_path: Path) -> None:
    """Issue 32 item 2: the window of a log without times is unknown, not 0.0 s; with -T
    durations it lasted at least the time one thread spent in its calls."""
    from tracer.render.console import window_text
    plain, timed = tmp_path / "plain.log", tmp_path / "durations.log"
    plain.write_text("read(3, \"\", 64) = 0\n" * 3)
    timed.write_text("nanosleep({tv_sec=1, tv_nsec=0}, NULL) = 0 <1.000102>\n" * 3)
    windows = []
    for log in (plain, timed):
        out = str(tmp_path / (log.stem + ".htrace"))
        import_strace(str(log), out)
        report = analyze_trace(out)
        report_schema.check(json.loads(json.dumps(report.to_json())))
        windows.append(report.window)
    assert windows[0]["timed"] is False and "at_least" not in windows[0]
    assert window_text(windows[0]) == "no times in the log"
    assert windows[1]["at_least"] == pytest.approx(3.0, abs=0.01)
    assert window_text(windows[1]).startswith("at least 3.0 s")
    assert window_text({"start": 0.0, "end": 2.5, "duration": 2.5}) == "2.5 s"


# ---------------------------------------------- the program's own clock (issue 32 item 2)
CLOCK_LINES = [   # real lines of clock_spin_p_stderr.log, and what strace prints otherwise
    ("clock_gettime", "CLOCK_MONOTONIC, {tv_sec=7193, tv_nsec=926911244}",
     ("CLOCK_MONOTONIC", 7193.926911244)),
    ("gettimeofday", "{tv_sec=1796126342, tv_usec=418091}, NULL",
     ("CLOCK_REALTIME", 1796126342.418091)),
    ("clock_gettime", "CLOCK_REALTIME, 0x7ffd5e1c8a20", None),        # -e raw / not read
    ("clock_gettime", "0x1 /* CLOCK_MONOTONIC */, {tv_sec=1, tv_nsec=2}", None),
    ("clock_nanosleep", "CLOCK_MONOTONIC, 0, {tv_sec=1, tv_nsec=0}, NULL", None),
]


@pytest.mark.parametrize("name, args, reading", CLOCK_LINES)
def test_clock_readings(name, args, reading):
    from tracer.analysis.accumulate.program_clock import clock_reading
    got = clock_reading(name, args)
    assert got == (None if reading is None else (reading[0], pytest.approx(reading[1])))


def test_the_span_is_of_the_clock_read_most_and_never_of_one_that_went_back():
    from tracer.analysis.accumulate.program_clock import ProgramClock
    c = ProgramClock()
    for sec in (10, 11, 13):
        c.feed("clock_gettime", f"CLOCK_MONOTONIC, {{tv_sec={sec}, tv_nsec=0}}")
    c.feed("gettimeofday", "{tv_sec=1796126342, tv_usec=0}, NULL")
    assert c.span() == (3.0, "CLOCK_MONOTONIC")
    c.feed("clock_gettime", "CLOCK_MONOTONIC, {tv_sec=5, tv_nsec=0}")
    assert c.span() is None
    assert ProgramClock().span() is None


def test_an_untimed_log_is_measured_by_the_program_s_own_clock(tmp_path):
    from tracer.load.trace import analyze_trace
    from tracer.render.console import window_text
    from tracer.strace.importer import import_strace
    out = str(tmp_path / "t.htrace")
    import_strace(str(FIELD / "clock_spin_p_stderr.log"), out)
    w = analyze_trace(out).window
    # measured: its 2,242 CLOCK_MONOTONIC readings run from 7193.927 s to 7194.317 s
    assert (w["timed"], w["clock"]) == (False, "CLOCK_MONOTONIC")
    assert w["by_clock"] == pytest.approx(0.390, abs=0.001)
    assert window_text(w).startswith("at least 0.4 s (the program's own CLOCK_MONOTONIC")
    import_strace(str(FIELD / "spin_poll_f_killed.log"), out)     # reads no clock
    assert "by_clock" not in analyze_trace(out).window
