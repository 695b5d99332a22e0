"""convert.py on real logs: pairing, ongoing calls, tid->pid, process lifecycle."""
import datetime as dt
import gzip
import os
import time
from collections import Counter

import pytest

from tracer import events as ev
from tracer.strace.convert import StraceConverter
from tracer.strace.lines import parse_line

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tests/
DATA = os.path.join(HERE, "data", "strace")
FIXTURES = os.path.join(HERE, "..", "fixtures", "gpu-h200")


def convert(path, **kw):
    op = gzip.open if path.endswith(".gz") else open
    conv = StraceConverter(**kw)
    out = []
    with op(path, "rt", errors="surrogateescape") as f:
        for text in f:
            out.extend(conv.feed_text(text))
    out.extend(conv.finish())
    return conv, out


def test_blocking_event_main_thread_blocked_in_futex():
    conv, evs = convert(os.path.join(FIXTURES, "blocking_event.strace.gz"), root_pid=2312)
    main = [e for e in evs if isinstance(e, ev.FutexCall) and e.tid == 2312]
    assert len(main) == 1
    m = main[0]
    assert m.ongoing and m.ret is None and m.op == "WAIT_BITSET" and m.timeout is None
    assert m.addr == 0x7ffda087ef30                      # a stack address
    assert m.dur == pytest.approx(conv.last_ts - m.ts)
    assert m.dur > 5.0
    # cuda-EvtHandlr (2334) polls /dev/nvidia0 with 100 ms timeouts, all timing out
    polls = [e for e in evs if isinstance(e, ev.PollCall) and e.tid == 2334 and not e.ongoing]
    assert len(polls) > 50 and all(p.timed_out and p.timeout == 0.1 for p in polls)
    assert set(polls[0].fd_kinds) == {"eventfd", "nvidia", "pipe"}
    assert {e.pid for e in evs if hasattr(e, "pid")} == {2312}
    assert conv.capabilities == {"timestamps": True, "durations": True, "fd_paths": True,
                                 "pids": True}
    assert set(conv.processes) == {2312} and len(conv.processes[2312].threads) == 18


def test_spin_heartbeat_ioctl_and_pairing():
    conv, evs = convert(os.path.join(FIXTURES, "spin.strace.gz"), root_pid=466)
    io = [e for e in evs if isinstance(e, ev.IoctlCall)]
    assert len(io) == 4 and all(e.tid == 466 and e.request == 0xC020462A and
                                e.fd_kind == "nvidiactl" for e in io)
    # an unfinished/resumed poll becomes one event at the start time with the -T duration
    zcat = [parse_line(t) for t in gzip.open(os.path.join(FIXTURES, "spin.strace.gz"), "rt")]
    unf = next(p for p in zcat if p.kind == "unfinished" and p.name == "poll")
    paired = [e for e in evs if isinstance(e, ev.PollCall) and e.ts == unf.ts]
    assert len(paired) == 1 and paired[0].dur == pytest.approx(0.100297) and paired[0].ret == 0
    assert paired[0].nfds == 11 and not paired[0].ongoing


def test_progress_writes():
    conv, evs = convert(os.path.join(FIXTURES, "progress.strace.gz"))
    writes = [e for e in evs if isinstance(e, ev.WriteCall)]
    assert len(writes) == 60
    assert all(w.fd == 1 and w.fd_kind == "file" and w.nbytes > 0 for w in writes)
    assert not [e for e in evs if isinstance(e, ev.IoctlCall)]
    assert not any("step" in w.args for w in writes)


def test_startup_threads_vfork_exec_exit():
    conv, evs = convert(os.path.join(FIXTURES, "startup.strace.gz"))
    c = Counter(type(e).__name__ for e in evs)
    starts = [e for e in evs if isinstance(e, ev.ThreadStart)]
    assert sum(not s.new_process for s in starts) == 17 and all(s.pid == 444 for s in starts
                                                                if not s.new_process)
    child = [s for s in starts if s.new_process]
    assert [(s.pid, s.parent_tid) for s in child] == [(460, 444)]   # vfork, child printed first
    execs = [e for e in evs if isinstance(e, ev.ProcessExec)]
    assert execs[0].argv == ["python3", "gpu_scenarios.py", "startup", "0"]
    assert [e.pid for e in execs] == [444, 460, 460]
    exits = [e for e in evs if isinstance(e, ev.ProcessExit)]
    assert [(e.pid, e.status) for e in exits] == [(460, 0), (444, 0)]
    assert c["ThreadExit"] == 19
    assert conv.processes[460].ppid == 444 and conv.processes[460].comm == "ldconfig.real"
    assert conv.processes[444].cmdline[1] == "gpu_scenarios.py"
    nv = Counter(e.fd_kind for e in evs if isinstance(e, ev.IoctlCall))
    assert (nv["nvidiactl"], nv["nvidia-uvm"], nv["nvidia"]) == (345, 94, 33)
    assert not [e for e in evs if isinstance(e, ev.Lost)]


def test_fork_kill_exit_status_signals():
    conv, evs = convert(os.path.join(DATA, "python_f_ttt_T_yy.log"))
    exits = {e.pid: e for e in evs if isinstance(e, ev.ProcessExit)}
    assert exits[3819].status == 0 and exits[3820].signal == "SIGKILL"
    assert exits[3821].status == 3 and exits[3817].status == 0
    assert sorted(e.sender for e in evs
                  if isinstance(e, ev.SignalDelivered)) == [3819, 3820, 3821]
    execs = [e for e in evs if isinstance(e, ev.ProcessExec)]
    assert [(e.pid, e.filename, e.argv) for e in execs] == [(3819, "/usr/bin/true", ["true", "arg1"])]
    waits = [e for e in evs if isinstance(e, ev.WaitChild)]
    assert [w.child for w in waits] == [3819, 3820, 3821] and all(w.dur > 0 for w in waits)
    # the epoll registered a pipe: epoll_wait reports the kinds it watches
    ew = [e for e in evs if isinstance(e, ev.PollCall) and e.name == "epoll_wait"]
    assert ew and ew[0].fd_kinds == ("pipe",) and ew[0].timeout == 0.02
    thread = [e for e in evs if isinstance(e, ev.ThreadStart) and not e.new_process]
    assert [(t.pid, t.tid) for t in thread] == [(3817, 3818)]


def test_killed_with_core_dump_all_threads():
    conv, evs = convert(os.path.join(DATA, "c_signals_killed.log"))
    px = [e for e in evs if isinstance(e, ev.ProcessExit)]
    assert len(px) == 1 and (px[0].signal, px[0].core_dumped, px[0].status) == ("SIGSEGV", True, None)
    assert {e.tid for e in evs if isinstance(e, ev.ThreadExit)} == {3895, 3896}
    sigs = [(e.tid, e.signal, e.sender) for e in evs if isinstance(e, ev.SignalDelivered)]
    assert (3896, "SIGUSR1", 3895) in sigs and (3895, "SIGSEGV", 3895) in sigs


def test_time_of_day_logs_get_a_date_and_wrap_midnight():
    day = dt.date(2026, 11, 29)
    conv, evs = convert(os.path.join(DATA, "python_f_tt.log"), base_date=day)
    midnight = time.mktime((2026, 11, 29, 0, 0, 0, 0, 0, -1))
    assert conv.first_ts == pytest.approx(midnight + 11 * 3600 + 52 * 60 + 50.8, abs=1)
    assert conv.capabilities["durations"] is False
    paired = [e for e in evs if isinstance(e, ev.WaitChild)]
    assert all(w.dur is not None and w.dur > 0 for w in paired)   # from the two timestamps
    c = StraceConverter(base_date=day)
    c.feed_text("1 23:59:59.900000 getpid() = 1")
    [e] = c.feed_text("1 00:00:00.100000 getpid() = 1")
    assert e.ts - conv.first_ts > 0 and e.ts == pytest.approx(midnight + 86400.1)


def test_no_pid_no_ts_and_unparsed():
    conv, evs = convert(os.path.join(DATA, "oneproc_t.log"))
    assert conv.capabilities["pids"] is False
    assert {e.pid for e in evs if isinstance(e, ev.Syscall)} == {0}
    conv, evs = convert(os.path.join(DATA, "sh_f_plain.log"))
    assert conv.capabilities == {"timestamps": False, "durations": False, "fd_paths": False,
                                 "pids": True}
    assert [(e.pid, e.status) for e in evs if isinstance(e, ev.ProcessExit)] == [(3843, 0), (3842, 3)]
    # strace wrote "strace: Process 4024 attached" into the middle of the clone line; the rest
    # of the line follows on the next one: joined again, the clone makes the child process
    conv, evs = convert(os.path.join(DATA, "stderr_brackets_tt_T_y.log"), unprefixed_tid=4023)
    assert not [e for e in evs if isinstance(e, ev.Lost)] and conv.unparsed == 0
    [clone] = [e for e in evs if isinstance(e, ev.Syscall) and e.name == "clone"]
    assert clone.ret == 4024 and clone.args.endswith("SIGCHLD, child_tidptr=0x7f7a6b241a10")
    assert [(e.pid, e.parent_tid) for e in evs if isinstance(e, ev.ThreadStart)] == [(4024, 4023)]
    assert sorted(conv.processes) == [4023, 4024] and conv.processes[4024].ppid == 4023
    conv = StraceConverter()
    conv.feed_text("1 1.0 read(3, strace: Process 9 attached\n")
    assert conv.finish(2.0)[-1].count == 1 and conv.bad_sample == "1 1.0 read(3, "


def test_detached_call_is_ongoing_at_finish():
    conv = StraceConverter()
    conv.feed_text("100 1000.0 futex(0x1, FUTEX_WAIT_PRIVATE, 0, NULL <unfinished ...>")
    conv.feed_text("101 1001.0 write(1</dev/pts/0<char 136:0>>, \"x\", 1) = 1 <0.000010>")
    conv.feed_text("101 1002.0 read(0</dev/pts/0<char 136:0>>,  <detached ...>")
    evs = conv.finish(1010.0)
    assert [(e.tid, e.name, e.ongoing, e.dur, e.ret) for e in evs] == [
        (100, "futex", True, 10.0, None), (101, "read", True, 8.0, None)]
    assert evs[1].args == "0</dev/pts/0<char 136:0>>" and evs[1].fd_kind == "tty"
    assert conv.finish(2000.0) == []


def test_pid_of_callback_and_clone_threads():
    seen = []

    def pid_of(tid):
        seen.append(tid)
        return {10: 10, 11: 10, 20: 20}.get(tid)
    conv = StraceConverter(pid_of=pid_of)
    conv.feed_text("11 1.0 getpid() = 10 <0.000001>")
    conv.feed_text("20 1.1 clone(child_stack=0x1, flags=CLONE_VM|CLONE_THREAD|CLONE_SIGHAND, "
                   "parent_tid=[21]) = 21 <0.000010>")
    [e] = conv.feed_text("21 1.2 getpid() = 20 <0.000001>")
    assert e.pid == 20 and seen == [11, 20]               # 21 came from the clone, not pid_of
    out = conv.feed_text("20 1.3 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|SIGCHLD) = 30 <0.1>")
    assert [type(x).__name__ for x in out] == ["Syscall", "ThreadStart", "ProcessInfo"]
    assert out[1].new_process and out[2].ppid == 20 and 30 in conv.processes


def test_fast_path_equals_full_parser():
    path = os.path.join(FIXTURES, "startup.strace.gz")
    a, b = StraceConverter(), StraceConverter()
    ea, eb = [], []
    for text in gzip.open(path, "rt"):
        ea.extend(a.feed_text(text))
        eb.extend(b.feed(parse_line(text)))
    assert [ev.event_to_row(x) for x in ea + a.finish()] == [ev.event_to_row(x) for x in eb + b.finish()]
