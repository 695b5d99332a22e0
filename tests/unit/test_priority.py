"""record/priority.py: hangtrace's own threads (and its own helper children) raised for the end
of a recording, put back after; never another process, never a hangtrace started under nice."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import List

import pytest

from tracer.record.priority import END_NICE, ENV, end_nice, raise_own

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="a lower nice value needs root")


def _nices(pid: int) -> List[int]:
    return [os.getpriority(os.PRIO_PROCESS, int(t)) for t in os.listdir(f"/proc/{pid}/task")]


@pytest.mark.parametrize("raw, want", [("", END_NICE), ("0", 0), ("-5", -5), ("-40", -20),
                                       ("7", 7), ("high", END_NICE), (" -3 ", -3)])
def test_end_nice_from_the_environment(monkeypatch: pytest.MonkeyPatch, raw: str,
                                       want: int) -> None:
    monkeypatch.setenv(ENV, raw)
    assert end_nice() == want


@pytest.mark.parametrize("nice", [0, 5])
def test_a_value_not_below_zero_changes_nothing(nice: int) -> None:
    assert raise_own(nice).before == {}


@root_only
def test_every_own_thread_raised_then_put_back() -> None:
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait, daemon=True)
    helper.start()
    try:
        before = _nices(os.getpid())
        raised = raise_own(-7)
        assert set(_nices(os.getpid())) == {-7}
        assert len(raised.before) >= 2 and raised.why == ""
        raised.restore()
        assert _nices(os.getpid()) == before
    finally:
        stop.set()
        helper.join()


@root_only
def test_an_own_child_is_raised_another_process_never() -> None:
    child = subprocess.Popen(["sleep", "30"])
    # a grandchild (its parent is the shell, not this process): the target's position
    shell = subprocess.Popen(["sh", "-c", "sleep 30 & echo $!; wait"], stdout=subprocess.PIPE,
                             text=True)
    assert shell.stdout is not None
    other = int(shell.stdout.readline())
    try:
        raised = raise_own(-4, helpers=[child.pid, other, 1])
        assert os.getpriority(os.PRIO_PROCESS, child.pid) == -4
        assert os.getpriority(os.PRIO_PROCESS, other) == 0
        assert other not in raised.before and 1 not in raised.before
        raised.restore()
        assert os.getpriority(os.PRIO_PROCESS, child.pid) == 0
    finally:
        for p in (child, shell):
            p.kill()
            p.wait()
        os.kill(other, 9)


@root_only
def test_a_hangtrace_started_under_nice_is_left_as_it_is() -> None:
    code = ("import os; os.nice(5); from tracer.record.priority import raise_own; "
            "r = raise_own(-10); print(len(r.before), os.getpriority(os.PRIO_PROCESS, 0), r.why)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split(maxsplit=2)
    assert out[:2] == ["0", "5"] and "nice" in out[2]
