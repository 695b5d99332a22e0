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
from tracer.events.stacks import NativeStack
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


# ---------------------------------------------------------------- item 9: a fault in malloc
SEGV_IN_MALLOC = [                       # segv_malloc_f_k_killed.log's lines that decide
    "1932  clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|"
    "CLONE_SETTLS|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID, child_tid=0x7f352b004990, "
    "parent_tid=0x7f352b004990, exit_signal=0, stack=0x7f352a804000, stack_size=0x7fff80, "
    "tls=0x7f352b0046c0} => {parent_tid=[5423]}, 88) = 5423",
    "1932  futex(0x7f352b004990, FUTEX_WAIT_BITSET|FUTEX_CLOCK_REALTIME, 5423, NULL, "
    "FUTEX_BITSET_MATCH_ANY <unfinished ...>",
    "5423  write(1, \"READY 1932\\n\", 11)      = 11",
    "5423  --- SIGSEGV {si_signo=SIGSEGV, si_code=SEGV_MAPERR, si_addr=0x20} ---",
    " > /usr/lib/x86_64-linux-gnu/libc.so.6(__default_morecore+0x1609) [0x97639]",
    " > /usr/lib/x86_64-linux-gnu/libc.so.6(malloc+0x99) [0x989c9]",
    " > /tmp/kinds/segv_malloc(worker+0x60) [0x1259]",
    "5423  futex(0x7f3524000030, FUTEX_WAIT_PRIVATE, 2, NULL",
]


@pytest.mark.parametrize("line, code, fault", [
    ("5423  --- SIGSEGV {si_signo=SIGSEGV, si_code=SEGV_MAPERR, si_addr=0x20} ---",
     "SEGV_MAPERR", True),
    ("7 --- SIGBUS {si_signo=SIGBUS, si_code=BUS_ADRERR, si_addr=0x7f00} ---", "BUS_ADRERR", True),
    ("7 --- SIGSEGV {si_signo=SIGSEGV, si_code=SI_TKILL, si_pid=7, si_uid=0} ---", "SI_TKILL",
     False),                                                    # sent, not raised
    ("7 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=8, si_uid=0, si_status=0, "
     "si_utime=0, si_stime=0} ---", "CLD_EXITED", False),
])
def test_a_fault_is_told_by_its_si_code(line, code, fault) -> None:
    sig, = [e for e in _events([line]) if isinstance(e, ev.SignalDelivered)]
    assert (sig.code, sig.is_fault) == (code, fault)


def test_the_faults_frames_are_the_stack_of_the_wait_in_its_handler() -> None:
    """Fails on main: frames below a signal line were dropped."""
    stacks = [e for e in _events(SEGV_IN_MALLOC) if isinstance(e, NativeStack)]
    assert [(s.tid, s.frames[:3], s.source) for s in stacks] == [
        (5423, ["__default_morecore (libc.so.6)", "malloc (libc.so.6)",
                "worker (segv_malloc)"], "strace -k, at SIGSEGV")]


def test_the_thread_that_faulted_in_malloc_is_the_root_cause_not_its_joiner(tmp_path) -> None:
    """Fails on main: the root cause was the joining main thread 1932."""
    from tracer.load.trace import analyze_trace
    from tracer.strace.importer import import_strace
    log = tmp_path / "segv.log"
    log.write_text("\n".join(SEGV_IN_MALLOC) + "\n")
    import_strace(str(log), str(tmp_path / "t.htrace"))
    r = analyze_trace(str(tmp_path / "t.htrace"))
    assert str(r.verdict) == "deadlocked"
    assert (r.root_cause.get("pid"), r.root_cause.get("tid")) == (1932, 5423)
    assert "pthread_join of thread 5423" in r.root_cause["summary"]
    assert "inside malloc" in r.root_cause["summary"]
