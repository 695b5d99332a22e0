"""Table tests of the strace line parser with real lines (H200 logs and logs recorded here)."""
import gzip
import os

import pytest

from tracer.strace.lines import parse_line

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tests/
DATA = os.path.join(HERE, "data", "strace")
FIXTURES = os.path.join(HERE, "..", "fixtures", "gpu-h200")


@pytest.mark.parametrize("text, expect", [
    # -f -ttt -T -yy, complete call with decorated fd and _IOC request (H200 spin.strace)
    ("466   1795950788.627719 ioctl(8</dev/nvidiactl<char 195:255>>, _IOC(_IOC_READ|_IOC_WRITE, "
     "0x46, 0x2a, 0x20), 0x7ffed3135b90) = 0 <0.000365>",
     dict(tid=466, ts=1795950788.627719, kind="call", name="ioctl", ret=0, dur=0.000365,
          args="8</dev/nvidiactl<char 195:255>>, _IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2a, 0x20), "
               "0x7ffed3135b90")),
    ("2325  1795951378.012864 futex(0x7f19275f75e0, FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME, "
     "0, NULL, FUTEX_BITSET_MATCH_ANY <unfinished ...>",
     dict(tid=2325, kind="unfinished", name="futex", ret=None,
          args="0x7f19275f75e0, FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME, 0, NULL, "
               "FUTEX_BITSET_MATCH_ANY")),
    ("742   1795950816.517616 <... poll resumed>) = 0 (Timeout) <0.100266>",
     dict(kind="resumed", name="poll", args="", ret=0, ret_text="Timeout", dur=0.100266)),
    ("2334  1795951378.013036 restart_syscall(<... resuming interrupted read ...> <unfinished ...>",
     dict(kind="unfinished", name="restart_syscall", args="<... resuming interrupted read ...>")),
    # trailing space before <unfinished ...> belongs to strace, the ", " to the arguments
    ("445   1795950773.212505 rt_sigprocmask(SIG_SETMASK, [],  <unfinished ...>",
     dict(kind="unfinished", args="SIG_SETMASK, [], ")),
    ("445   1795950773.212530 <... rt_sigprocmask resumed>NULL, 8) = 0 <0.000015>",
     dict(kind="resumed", name="rt_sigprocmask", args="NULL, 8", ret=0)),
    ("445   1795950773.647408 <... futex resumed>) = ? ERESTARTSYS (To be restarted if SA_RESTART "
     "is set) <0.306958>",
     dict(kind="resumed", ret=None, err="ERESTARTSYS", ret_text="To be restarted if SA_RESTART is set")),
    ("461   1795950775.699797 <... poll resumed> <unfinished ...>) = ?",
     dict(kind="resumed", name="poll", args="", ret=None, dur=None)),
    ("444   1795950772.940342 access(\"/etc/ld.so.preload\", R_OK) = -1 ENOENT (No such file or "
     "directory) <0.000017>",
     dict(ret=-1, err="ENOENT", ret_text="No such file or directory")),
    ("444   1795950772.941361 openat(AT_FDCWD</srv/gpu-scenarios>, \"/etc/ld.so.cache\", "
     "O_RDONLY|O_CLOEXEC) = 3</etc/ld.so.cache> <0.000015>",
     dict(ret=3, ret_text="</etc/ld.so.cache>", dur=0.000015)),
    ("444   1795950772.940115 brk(NULL)       = 0x30ec5000 <0.000014>",
     dict(name="brk", args="NULL", ret=0x30ec5000)),
    ("3842  exit_group(3)                     = ?", dict(tid=3842, ts=None, name="exit_group", ret=None)),
    ("444   1795950773.212153 clone3({flags=CLONE_VM|CLONE_THREAD, child_tid=0x7f9f6abff990} => "
     "{parent_tid=[445]}, 88) = 445 <0.000086>",
     dict(name="clone3", ret=445)),
    # args holding quotes, escaped quotes, '=' and parentheses; no pid column, -t
    ("11:52:51 write(1, \"a=(b)\\\"q\\\" = 1\\n\", 13) = 13",
     dict(tid=None, ts=11 * 3600 + 52 * 60 + 51, time_of_day=True, name="write", ret=13,
          args="1, \"a=(b)\\\"q\\\" = 1\\n\", 13")),
    ("[pid  4023] 11:53:00.670090 <... wait4 resumed>0x7ffe9b69bd7c, WNOHANG, NULL) = 0 <0.000012>",
     dict(tid=4023, ts=pytest.approx(42780.67009), time_of_day=True, kind="resumed", name="wait4")),
    ("1795953174.752409 clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, {tv_sec=374, "
     "tv_nsec=248700359}, NULL) = 0 <0.037818>",
     dict(tid=None, ts=1795953174.752409, name="clock_nanosleep", ret=0)),
    ("3817  1795953170.612950 accept4(9<TCP:[127.0.0.1:52539]>, {sa_family=AF_INET, sin_port=htons("
     "47550), sin_addr=inet_addr(\"127.0.0.1\")}, [16], SOCK_CLOEXEC) = 12<TCP:[127.0.0.1:52539->"
     "127.0.0.1:47550]> <0.000019>",
     dict(name="accept4", ret=12, dur=0.000019)),
    ("1  poll([{fd=3, events=POLLIN}], 1, 0) = 1 ([{fd=3, revents=POLLIN}])",
     dict(tid=1, ret=1, ret_text="[{fd=3, revents=POLLIN}]", args="[{fd=3, events=POLLIN}], 1, 0")),
    ("1795953175.243432 clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, {tv_sec=374, "
     "tv_nsec=751950255},  <detached ...>",
     dict(kind="unfinished", name="clock_nanosleep")),
    # markers
    ("3821  1795953170.635355 +++ exited with 3 +++", dict(kind="exited", status=3, tid=3821)),
    ("3895  1795953174.444908 +++ killed by SIGSEGV (core dumped) +++",
     dict(kind="killed", signal="SIGSEGV", core_dumped=True)),
    ("3820  1795953170.633871 +++ killed by SIGKILL +++",
     dict(kind="killed", signal="SIGKILL", core_dumped=False)),
    ("444   1795950773.647395 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=460, "
     "si_uid=0, si_status=0, si_utime=0, si_stime=0} ---",
     dict(kind="signal", signal="SIGCHLD", si_pid=460)),
    ("3896  1795953174.442058 --- SIGUSR1 {si_signo=SIGUSR1, si_code=SI_USER, si_pid=3895, si_uid=0} ---",
     dict(kind="signal", signal="SIGUSR1", si_pid=3895)),
    ("strace: Process 3899 attached", dict(kind="attached", tid=3899)),
    ("strace: Process 3899 detached", dict(kind="detached", tid=3899)),
    ("strace: attach: ptrace(PTRACE_SEIZE, 1): Operation not permitted", dict(kind="info")),
])
def test_parse_line_table(text, expect):
    line = parse_line(text + "\n")
    assert line is not None
    for key, value in expect.items():
        assert getattr(line, key) == value, key


@pytest.mark.parametrize("text", [
    "", "hello world", "1234 ", "1234  1795.5 ",
    # strace's own message interleaved into a line on stderr (real, from a -f run without -o)
    "11:53:00.669877 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|SIGCHLDstrace: Process 4024 attached",
    ", child_tidptr=0x7f7a6b241a10) = 4024 <0.000121>",
    "123 1795.5 write(1, \"x\", 1)",         # cut after the arguments: no result
])
def test_unparseable(text):
    assert parse_line(text) is None


def test_a_line_cut_in_the_middle_is_the_calls_entry():
    """Issue 32: the last line of a log whose strace was killed ends inside the call's
    arguments; it is the call's entry (kind 'cut'), the thread's state at the end."""
    line = parse_line("123 1795.5 write(1, \"x\", 1")
    assert line is not None and (line.kind, line.tid, line.name, line.args, line.ret) == \
        ("cut", 123, "write", '1, "x", 1', None)


def _all_lines(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt", errors="surrogateescape") as f:
        return f.read().splitlines()


@pytest.mark.parametrize("name", ["spin.strace.gz", "progress.strace.gz",
                                  "blocking_event.strace.gz", "startup.strace.gz"])
def test_h200_logs_parse_completely(name):
    lines = _all_lines(os.path.join(FIXTURES, name))
    parsed = [parse_line(t) for t in lines]
    assert all(p is not None for p in parsed)
    assert all(p.tid is not None and p.ts is not None for p in parsed)
    # every resumed half names a call that its thread left unfinished before (or at log start)
    assert sum(p.kind == "unfinished" for p in parsed) >= sum(p.kind == "resumed" for p in parsed)


@pytest.mark.parametrize("name, bad", [("python_f_ttt_T_yy.log", 0), ("python_f_tt.log", 0),
                                       ("sh_f_plain.log", 0), ("oneproc_t.log", 0),
                                       ("c_signals_killed.log", 0), ("attach_p_ttt_T_yy.log", 0),
                                       ("stderr_brackets_tt_T_y.log", 2)])
def test_recorded_logs(name, bad):
    lines = _all_lines(os.path.join(DATA, name))
    assert sum(parse_line(t) is None for t in lines) == bad


def test_startup_counts_match_readme():
    parsed = [parse_line(t) for t in _all_lines(os.path.join(FIXTURES, "startup.strace.gz"))]
    ioctls = [p for p in parsed if p.name == "ioctl" and p.kind in ("call", "unfinished")]
    assert sum("</dev/nvidiactl<" in p.args.split(",")[0] for p in ioctls) == 345
    assert sum("</dev/nvidia-uvm<" in p.args.split(",")[0] for p in ioctls) == 94
    assert sum("</dev/nvidia0<" in p.args.split(",")[0] for p in ioctls) == 33
