"""watch sees output in writes of a few bytes (issue 20 item 6, PYTHONUNBUFFERED): the position
of a regular file the process writes advances (fdinfo), where /proc/PID/io alone calls writes of
at most 8 bytes wake-ups. eventfds and pipes are still judged by size."""
from __future__ import annotations

from tracer import events as ev
from tracer.analysis.watch_rules import ProcessLook, TreeLook, progress_signals


def _look(ts: float, wchar: int, syscw: int, positions) -> TreeLook:
    io = ev.ProcessIO(ts=ts, pid=7, rchar=0, wchar=wchar, syscr=0, syscw=syscw,
                      read_bytes=0, write_bytes=0)
    p = ProcessLook(pid=7, start_time=1, cpu_ticks=0, io=io, comm="w", positions=positions)
    return TreeLook(ts=ts, processes={7: p})


def test_small_writes_to_a_file_are_output_by_its_position() -> None:
    # 10 lines of 7 bytes ("step 1\n"): 70 bytes in 10 writes, all "wake-up sized"
    a = _look(0.0, 1000, 100, {1: ("/var/log/w.log", 500)})
    b = _look(1.0, 1070, 110, {1: ("/var/log/w.log", 570)})
    sig = [s for s in progress_signals(a, b) if s.kind == "output"]
    assert sig and "70 B to /var/log/w.log" in sig[0].text


def test_small_writes_without_a_file_are_wake_ups() -> None:
    a = _look(0.0, 1000, 100, {})
    b = _look(1.0, 1070, 110, {})          # an eventfd poke loop: 8 bytes at most each
    assert not [s for s in progress_signals(a, b) if s.kind == "output"]


def test_a_reopened_fd_is_not_progress() -> None:
    a = _look(0.0, 0, 0, {1: ("/tmp/a.log", 500)})
    b = _look(1.0, 0, 0, {1: ("/tmp/b.log", 900)})
    assert not [s for s in progress_signals(a, b) if s.kind == "output"]
