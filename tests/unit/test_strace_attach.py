"""strace_attach's wait for strace to attach every target never waits for what can never be
attached: a zombie (the dead_worker scenario's worker: strace -p on it ran into the 30 s
bound and the attach test timed out), a task another tracer holds, a pid strace said it could
not attach. Real processes: a zombie child of this test, this process itself."""
from __future__ import annotations

import os
import time

from tracer.record.backends.strace_attach import _attached, tracer_of, wait_attached


def _zombie() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    for _ in range(400):
        if tracer_of(pid)[1] == "Z":
            return pid
        time.sleep(0.005)
    raise AssertionError("the child did not become a zombie")


def test_a_zombie_is_never_waited_for() -> None:
    pid = _zombie()
    try:
        assert _attached(12345678, pid)
        t0 = time.monotonic()
        assert wait_attached(12345678, [pid], time.monotonic() + 10) == []
        assert time.monotonic() - t0 < 1.0
    finally:
        os.waitpid(pid, 0)


def test_a_live_untraced_task_is_waited_for_unless_strace_said_it_failed() -> None:
    me = os.getpid()
    assert not _attached(12345678, me)                 # not traced yet: strace may still
    assert _attached(12345678, me, failed={me})        # strace: "attach: ... not permitted"
    assert wait_attached(12345678, [me], time.monotonic() + 0.05) == [me]
