"""record/priority.py: hangtrace's own threads (and its own helper children) raised for the end
of a recording, put back after; never another process, never a hangtrace started under nice."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import List

import pytest

from tracer.record.priority import END_NICE, ENV, end_nice, raise_own

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="a lower nice value needs root")


@pytest.mark.parametrize("raw, want", [("", END_NICE), ("0", 0), ("-5", -5), ("-40", -20),
                                       ("7", 7), ("high", END_NICE), (" -3 ", -3)])
def test_end_nice_from_the_environment(monkeypatch: pytest.MonkeyPatch, raw: str,
                                       want: int) -> None:
    monkeypatch.setenv(ENV, raw)
    assert end_nice() == want


@pytest.mark.parametrize("nice", [0, 5])
def test_a_value_not_below_zero_changes_nothing(nice: int) -> None:
    assert raise_own(nice).before == {}


def _at_nice_0(code: str) -> List[str]:
    """What ``code`` prints, run in a python started at nice 0 (the suite may run niced)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0, 0)
                          ).stdout.split()


@root_only
def test_every_own_thread_raised_then_put_back() -> None:
    code = """if 1:
        import os, threading
        from tracer.record.priority import raise_own
        def nices():
            return sorted({os.getpriority(os.PRIO_PROCESS, int(t))
                           for t in os.listdir('/proc/self/task')})
        stop = threading.Event()
        threading.Thread(target=stop.wait, daemon=True).start()
        raised = raise_own(-7)
        print(len(raised.before), nices(), end=' ')
        raised.restore()
        print(nices())"""
    assert _at_nice_0(code) == ["2", "[-7]", "[0]"]


@root_only
def test_an_own_child_is_raised_another_process_never() -> None:
    code = """if 1:
        import os, subprocess
        from tracer.record.priority import raise_own
        child = subprocess.Popen(['sleep', '30'])
        # a grandchild (its parent the shell, not this process): where a target stands
        shell = subprocess.Popen(['sh', '-c', 'sleep 30 & echo $!; wait'],
                                 stdout=subprocess.PIPE, text=True)
        other = int(shell.stdout.readline())
        raised = raise_own(-4, helpers=[child.pid, other, 1])
        nice = lambda pid: os.getpriority(os.PRIO_PROCESS, pid)
        print(nice(child.pid), nice(other), other in raised.before, 1 in raised.before, end=' ')
        raised.restore()
        print(nice(child.pid))
        os.kill(other, 9)
        for p in (child, shell):
            p.kill()
            p.wait()"""
    assert _at_nice_0(code) == ["-4", "0", "False", "False", "0"]


@root_only
def test_a_hangtrace_started_under_nice_is_left_as_it_is() -> None:
    code = ("import os; os.setpriority(os.PRIO_PROCESS, 0, 5); "
            "from tracer.record.priority import raise_own; "
            "r = raise_own(-10); print(len(r.before), os.getpriority(os.PRIO_PROCESS, 0), r.why)")
    out = _at_nice_0(code)
    assert out[:2] == ["0", "5"] and "nice" in " ".join(out[2:])
