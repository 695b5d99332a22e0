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
from tracer.events.stacks import NativeStack
from tracer.strace.procs import reap_status
from strace_events import events_of


_events = events_of                 # (tests/strace_events.py)


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
    worker = next(t for p in r.processes for t in p.threads if t.tid == 5423)
    assert "inside its SIGSEGV handler (SEGV_MAPERR), which never returned" in worker.evidence


# ---------------------------------------------------------------- item 7: a device call
def _report(tmp_path, lines: List[str]):
    from tracer.load.trace import analyze_trace
    from tracer.strace.importer import import_strace
    log = tmp_path / "x.log"
    log.write_text("\n".join(lines) + "\n")
    import_strace(str(log), str(tmp_path / "t.htrace"))
    return analyze_trace(str(tmp_path / "t.htrace"))


def _thread(report, tid):
    return next(t for p in report.processes for t in p.threads if t.tid == tid)


UVM = "9</dev/nvidia-uvm<char 238:0>>"
POLL = ("465   {ts} poll([{{fd=16<anon_inode:[eventfd]>, events=POLLIN}}], 1, 100) = 0 (Timeout) "
        "<0.100200>")


def _uvm_hang(polls: int) -> List[str]:
    """h200_uvm_never_returns_f_ttt_T_yy's shape: the main thread's start-up writes a thread's
    name through /proc, then a UVM ioctl never returns while 465 polls with 100 ms timeouts."""
    lines = [
        f"444   1795950772.900000 openat(AT_FDCWD, \"/dev/nvidia-uvm\", O_RDWR|O_CLOEXEC) = {UVM}"
        " <0.000016>",
        f"444   1795950772.950000 ioctl({UVM}, _IOC(_IOC_NONE, 0, 0x25, 0), 0x7fff5673ccb0) = 0 "
        "<0.175786>",
        "444   1795950773.200000 write(8</proc/444/task/461/comm>, \"cuda-EvtHandlr\\n\", 15) = 15"
        " <0.000030>",
        *[f"444   1795950773.{300000 + i:06d} getpid()        = 444 <0.000011>" for i in range(50)],
        "444   1795950774.741889 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|"
        "CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID, "
        "child_tid=0x7f9f2614a990, parent_tid=0x7f9f2614a990, exit_signal=0, "
        "stack=0x7f9f2594a000, stack_size=0x7fff80, tls=0x7f9f2614a6c0} => "
        "{parent_tid=[465]}, 88) = 465 <0.000178>",
        "465   1795950774.742084 set_robust_list(0x7f9f2614a9a0, 24) = 0 <0.000035>",
        f"444   1795950774.742237 ioctl({UVM}, _IOC(_IOC_NONE, 0, 0x19, 0) <unfinished ...>",
    ]
    return lines + [POLL.format(ts=f"{1795950774.742500 + 0.1003 * i:.6f}") for i in range(polls)]


def test_a_uvm_ioctl_that_never_returns_keeps_its_name_and_is_the_root_cause(tmp_path) -> None:
    """Fails on main: progressing ('wrote 15 B to /proc/444/task/461/comm')."""
    r = _report(tmp_path, _uvm_hang(8))
    assert str(r.verdict) == "blocked"
    assert (r.root_cause.get("pid"), r.root_cause.get("tid")) == (444, 444)
    t = _thread(r, 444)
    assert "UVM_REGISTER_GPU_VASPACE on /dev/nvidia-uvm" in t.evidence[0]
    assert "thread 465 made 8 timed waits of 100 ms after it began: it lasted at least 0.7 s" \
        in t.evidence[1]


def test_a_device_call_seen_begun_just_now_is_not_yet_a_hang(tmp_path) -> None:
    r = _report(tmp_path, _uvm_hang(2))           # 0.3 s in it: below DEVICE_WAIT_MIN_S
    assert _thread(r, 444).rule != "blocked-without-timeout"


@pytest.mark.parametrize("path, kind", [
    ("/proc/444/task/461/comm", "kernfs"), ("/sys/fs/cgroup/x/cgroup.procs", "kernfs"),
    ("/proc/self/oom_score_adj", "kernfs"), ("/var/log/app.log", "file"),
    ("/dev/nvidia-uvm<char 238:0>", "nvidia-uvm"), ("/dev/tty7", "tty"),
])
def test_proc_and_sys_files_are_the_kernels_not_output(path, kind) -> None:
    from tracer.analysis.accumulate.io_class import IoClass, write_class
    from tracer.linux.fdtarget import fd_kind
    assert fd_kind(path) == kind
    assert (write_class(kind, 15) is IoClass.OUTPUT) is (kind in ("file", "tty"))


KILLED_IN_IOCTL = [                         # ioctl_never_returns_f.log's lines that decide
    "1328  openat(AT_FDCWD, \"/dev/tty7\", O_RDWR|O_NOCTTY) = 3",
    "1328  ioctl(3, KDGETMODE, [KD_TEXT])    = 0",
    "1328  clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|"
    "CLONE_SETTLS|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID, child_tid=0x7f73bec85990, "
    "parent_tid=0x7f73bec85990, exit_signal=0, stack=0x7f73be485000, stack_size=0x7fff80, "
    "tls=0x7f73bec856c0} => {parent_tid=[1329]}, 88) = 1329",
    "1328  ioctl(3, VT_WAITACTIVE, 0x7 <unfinished ...>",
    *["1329  poll([{fd=4, events=POLLIN}], 1, 100) = 0 (Timeout)"] * 20,
    "1329  poll([{fd=4, events=POLLIN}], 1, 100 <unfinished ...>",
    "1328  <... ioctl resumed>)              = ?",
    "1329  <... poll resumed> <unfinished ...>) = ?",
    "1329  +++ killed by SIGKILL +++",
    "1328  +++ killed by SIGKILL +++",
]


def test_a_thread_killed_inside_a_call_did_not_exit(tmp_path) -> None:
    """Fails on main: 'exited (thread-exited)', 'exited (the log has no times...)'."""
    r = _report(tmp_path, KILLED_IN_IOCTL)
    assert str(r.verdict) == "exited" and r.root_cause.get("tid") == 1328
    t = _thread(r, 1328)
    assert t.rule == "killed-in-call"
    assert t.evidence[0].startswith("killed by SIGKILL") and "VT_WAITACTIVE" in t.evidence[0]
    assert "thread 1329 made 20 timed waits of 100 ms" in t.evidence[1]
    assert not any(e.startswith("exited") for e in t.evidence)


# ---------------------------------------------------------------- item 8: the detach line
@pytest.mark.parametrize("lines", [
    ["ioctl(4, FIONREAD, [0])                 = 0",          # ioctl_loop_p_tail.log's shape
     "clock_nanosleep(CLOCK_REALTIME, 0, {tv_sec=0, tv_nsec=20000000}, strace: Process 1443 "
     "detached", " <detached ...>"],
    ["read(3, \"x\", 1) = 1",
     "futex(0x55ab, FUTEX_WAIT_PRIVATE, 2, NULL) = ? ERESTARTSYS (To be restarted if SA_RESTART "
     "is set)", "strace: Process 1443 detached"],
])
def test_a_detach_line_names_the_lines_without_a_pid_column(lines, tmp_path) -> None:
    """Fails on main: the lines were thread 0's (the head with the attach line was cut off)."""
    from tracer.strace.importer import import_strace
    from tracer.tracefile.format import TraceReader
    log = tmp_path / "x.log"
    log.write_text("\n".join(lines) + "\n")
    import_strace(str(log), str(tmp_path / "t.htrace"))
    who = {(e.pid, e.tid) for e in TraceReader(str(tmp_path / "t.htrace")).events()
           if hasattr(e, "tid")}
    assert who == {(1443, 1443)}


def test_each_execve_keeps_its_own_pid_where_the_forks_are_filtered_out(tmp_path) -> None:
    """spawner_f_e_execve_killed.log (strace -f -e trace=execve,wait4). Fails on main: one
    process 4816 with the children as its threads, its command line the last child's."""
    from pathlib import Path
    from tracer.strace.importer import import_strace
    from tracer.tracefile.format import TraceReader
    log = Path(__file__).resolve().parents[1] / "data" / "strace" / "field" / \
        "spawner_f_e_execve_killed.log"
    import_strace(str(log), str(tmp_path / "t.htrace"))
    procs = {p.pid: p for p in TraceReader(str(tmp_path / "t.htrace")).info.processes}
    assert procs[4816].cmdline == ["./spawner"] and list(procs[4816].threads) == [4816]
    children = [p for pid, p in procs.items() if pid != 4816]
    assert len(children) >= 3
    assert all(p.cmdline == ["true", "--child"] and list(p.threads) == [p.pid] for p in children)
