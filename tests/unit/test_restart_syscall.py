"""restart_syscall is described as the call it resumes (linux/restart.py), from the kernel's wait
channel first, then strace's text; a sleep or futex resumed this way had a time limit."""
from __future__ import annotations

import pytest

from tracer import events as ev
from tracer.analysis.vocab.waits import wait_from_proc
from tracer.linux.restart import resumed_call


@pytest.mark.parametrize("args,wchan,want", [
    # a libcuda poller on the H200 after strace attached: strace said read, the kernel poll
    ("<... resuming interrupted read ...>", "poll_schedule_timeout.constprop.0", "poll"),
    ("<... resuming interrupted clock_nanosleep ...>", "", "clock_nanosleep"),
    ("<... resuming interrupted futex ...>", "", "futex"),
    ("", "do_nanosleep", "clock_nanosleep"),
    ("", "futex_do_wait", "futex"),
    ("", "do_select", "select"),
    ("", "", ""),
    ("<unfinished ...>", "0", ""),
])
def test_resumed_call(args: str, wchan: str, want: str) -> None:
    assert resumed_call(args, wchan) == want


def test_a_proc_sample_in_restart_syscall_is_the_poll_it_resumes() -> None:
    # /proc/TID/syscall of that poller: restart_syscall (219) with poll's registers
    line = "219 0xf5e8a70 0x3 0xffffffff 0x15ef44d0 0x0 0x7 0x7fabde325d40 0x7facc311b79d"
    w = wait_from_proc(line, [], "poll_schedule_timeout.constprop.0")
    assert w is not None and w.call == "poll" and w.resumed and w.timeout is None
    assert "restart_syscall" in w.describe() and "no timeout" in w.describe()
    assert wait_from_proc(line, []) is None          # no wait channel: nothing tells


def test_a_resumed_sleep_has_a_time_limit() -> None:
    from tracer.analysis.threads.state import _resume
    from tracer.analysis.vocab.waits import wait_from_call
    call = ev.Syscall(ts=1.0, pid=5, tid=6, name="restart_syscall",
                      args="<... resuming interrupted clock_nanosleep ...>", ret=None,
                      err=None, dur=None, fd=None, fd_kind=None, fd_target=None, ongoing=True)
    w = wait_from_call(call, [])
    _resume(w, call.args, "")
    assert w.call == "clock_nanosleep" and w.timeout is not None
    assert w.describe().endswith("with a time limit")
