"""Issue 44 items 7, 8, 9: kinds of strace logs judged by their shape.

Item 8, threads from the log: a wait call that reaped a child with its status says that child
exited, even where its own lines are missing (``strace -p`` without -f). Item 9, ``-k`` stacks:
a thread that took a fault inside malloc and then waits, in its handler, on the lock it already
holds is the root cause, not the thread that joins it. Item 7: a call on a named fd that never
returns keeps its name and is the root cause. The lines are real (tests/data/strace/field).
"""
from __future__ import annotations

from typing import List

import pytest

from tracer import events as ev
from tracer.strace.convert import StraceConverter
from tracer.strace.procs import reap_status


def _events(lines: List[str]) -> List[ev.Event]:
    conv = StraceConverter()
    out: List[ev.Event] = []
    for line in lines:
        out += conv.feed_text(line)
    return out + conv.finish()


# ---------------------------------------------------------------- item 8: reaped children
@pytest.mark.parametrize("name, args, ret, expected", [
    ("wait4", "-1, [{WIFEXITED(s) && WEXITSTATUS(s) == 3}], 0, {ru_utime={tv_sec=0, "
     "tv_usec=279}, ru_stime={tv_sec=0, tv_usec=0}, ...}", 4598, (4598, 3, None, False)),
    ("wait4", "-1, [{WIFSIGNALED(s) && WTERMSIG(s) == SIGTERM}], 0, NULL", 4599,
     (4599, None, "SIGTERM", False)),
    ("wait4", "-1, [{WIFSIGNALED(s) && WTERMSIG(s) == SIGSEGV && WCOREDUMP(s)}], 0, NULL", 77,
     (77, None, "SIGSEGV", True)),
    ("waitpid", "4156, [{WIFEXITED(s) && WEXITSTATUS(s) == 0}], 0", 4156, (4156, 0, None, False)),
    ("wait4", "-1, 0x7ffc6c9268d0, WNOHANG, NULL", -1, None),              # ECHILD
    ("wait4", "-1, 0x7ffc6c9268d0, WNOHANG, NULL", 0, None),               # none ended yet
    ("wait4", "-1, [{WIFSTOPPED(s) && WSTOPSIG(s) == SIGSTOP}], WUNTRACED, NULL", 12, None),
    ("waitid", "P_ALL, 0, {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=31596, si_uid=0, "
     "si_status=2, si_utime=0, si_stime=0}, WEXITED, NULL", 0, (31596, 2, None, False)),
    ("waitid", "P_PID, 9, {si_signo=SIGCHLD, si_code=CLD_KILLED, si_pid=9, si_uid=0, "
     "si_status=SIGKILL, si_utime=0, si_stime=0}, WEXITED, NULL", 0, (9, None, "SIGKILL", False)),
])
def test_reap_status_reads_strace_wait_results(name, args, ret, expected) -> None:
    assert reap_status(name, args, ret) == expected


REAPED_UNTRACED = [                               # reaper_p_stderr.log's lines, in order
    "strace: Process 4595 attached",
    "wait4(-1, [{WIFEXITED(s) && WEXITSTATUS(s) == 0}], 0, NULL) = 4596",
    "--- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=4596, si_uid=0, si_status=0, "
    "si_utime=0, si_stime=0} ---",
    "wait4(-1, [{WIFEXITED(s) && WEXITSTATUS(s) == 3}], 0, NULL) = 4598",
    "kill(4599, SIGTERM)                     = 0",
    "wait4(-1, [{WIFSIGNALED(s) && WTERMSIG(s) == SIGTERM}], 0, NULL) = 4599",
    "exit_group(1)                           = ?",
    "+++ exited with 1 +++",
]


def test_a_child_reaped_without_its_lines_exited() -> None:
    """Fails on main: the children were not in the trace at all."""
    out = _events(REAPED_UNTRACED)
    exits = {e.pid: (e.status, e.signal) for e in out if isinstance(e, ev.ProcessExit)}
    assert exits == {4596: (0, None), 4598: (3, None), 4599: (None, "SIGTERM"), 4595: (1, None)}
    infos = {e.pid: e.ppid for e in out if isinstance(e, ev.ProcessInfo)}
    assert infos[4596] == infos[4598] == infos[4599] == 4595
    assert not any(isinstance(e, ev.Syscall) and e.tid != 4595 for e in out)  # none invented
    assert 0 not in infos


def test_a_child_whose_own_exit_is_in_the_log_exits_once() -> None:
    out = _events(["100 clone(child_stack=NULL, flags=SIGCHLD) = 101",
                   "101 exit_group(3) = ?", "101 +++ exited with 3 +++",
                   "100 wait4(-1, [{WIFEXITED(s) && WEXITSTATUS(s) == 3}], 0, NULL) = 101"])
    assert [(e.pid, e.status) for e in out if isinstance(e, ev.ProcessExit)] == [(101, 3)]
