"""Analyzer rules as pure functions over synthetic events: each case states what must fire.

The events are shaped like those the strace and proc backends produce for real programs
(see the replay and live tests for the real thing).
"""
from __future__ import annotations

from typing import List, Optional

import pytest

from tracer import events as ev
from tracer.analysis.analyzer import Analyzer

T0 = 1000.0
PIPE = "pipe:[777]"


def info(pid, ppid=1, comm="python3", cmdline=None, threads=None, fds=(), state="S",
         exit_code=None, listening=()):
    return ev.ProcessInfo(ts=T0, pid=pid, ppid=ppid, comm=comm,
                          cmdline=list(cmdline or [comm]),
                          threads=threads or {pid: comm}, fds=list(fds), state=state,
                          exit_code=exit_code, listening=list(listening))


def fd(n, kind, target, mode="rw", inode=None):
    return ev.FdInfo(n, kind, target, mode, None, inode)


def run(events: List[ev.Event], infos: List[ev.ProcessInfo], *, backends=("strace",),
        end: float = T0 + 5.0, roots: Optional[List[int]] = None, caps=None):
    an = Analyzer(start=T0, backends=list(backends), processes=infos,
                  roots=roots or [infos[0].pid], capabilities=caps)
    an.feed_all(sorted(events, key=lambda e: e.ts))
    return an.report(end=end)


def futex_block(pid, tid, addr, ts=T0 + 0.01, timeout=None):
    return ev.FutexCall(ts=ts, pid=pid, tid=tid, name="futex", op="WAIT_BITSET", addr=addr,
                        timeout=timeout, ongoing=True, dur=end_minus(ts))


def end_minus(ts):
    return T0 + 5.0 - ts


def thread(report, pid, tid):
    return next(t for t in report.process(pid).threads if t.tid == tid)


# --------------------------------------------------------------------------- progressing
def test_log_writes_make_a_thread_progressing():
    evs = [ev.WriteCall(ts=T0 + i * 0.5, pid=5, tid=5, name="write", fd=1, fd_kind="file",
                        fd_target="/var/log/w.log", ret=40, nbytes=40, dur=1e-5)
           for i in range(8)]
    r = run(evs, [info(5)])
    assert r.verdict == "progressing" and r.exit_code == 0
    t = thread(r, 5, 5)
    assert t.rule == "wrote-output"
    assert "320 B in 8 writes" in t.evidence[0] and "/var/log/w.log" in t.evidence[0]


def test_eventfd_and_self_pipe_writes_are_not_output():
    fds = [fd(3, "pipe", PIPE, "r"), fd(4, "pipe", PIPE, "w"), fd(5, "eventfd", "anon_inode:[eventfd]")]
    evs = []
    for i in range(5):
        ts = T0 + i
        evs.append(ev.PollCall(ts=ts, pid=5, tid=5, name="poll", ret=0, dur=0.99, timeout=1.0,
                               timed_out=True, fd_kinds=("eventfd", "pipe")))
        evs.append(ev.WriteCall(ts=ts + 0.995, pid=5, tid=5, name="write", fd=5,
                                fd_kind="eventfd", fd_target="anon_inode:[eventfd]", ret=8,
                                nbytes=8, dur=1e-5))
        evs.append(ev.WriteCall(ts=ts + 0.996, pid=5, tid=5, name="write", fd=4, fd_kind="pipe",
                                fd_target=PIPE, ret=1, nbytes=1, dur=1e-5))
    r = run(evs, [info(5, fds=fds)])
    t = thread(r, 5, 5)
    assert t.verdict == "busy-waiting" and t.rule == "periodic-wakeups"
    assert t.counters["output_bytes"] == 0 and t.counters["eventfd_writes"] == 5
    assert t.counters["bytes_written"] == 5 * (8 + 1)
    assert any("eventfd writes" in e for e in t.evidence)
    assert r.verdict == "busy-waiting" and r.exit_code == 3
    assert r.root_cause["pid"] == 5


def test_listening_server_with_timer_loop_is_idle_not_busy():
    evs = [ev.PollCall(ts=T0 + i, pid=5, tid=5, name="epoll_wait", ret=0, dur=1.0, timeout=1.0,
                       timed_out=True) for i in range(4)]
    evs.append(ev.PollCall(ts=T0 + 4.5, pid=5, tid=5, name="epoll_wait", timeout=None,
                           ongoing=True, dur=0.5))
    r = run(evs, [info(5, listening=["tcp 127.0.0.1:8000"])])
    assert r.verdict == "idle"


# --------------------------------------------------------------------------- spinning
def test_cpu_spin_from_samples():
    evs = [ev.ThreadSample(ts=T0 + i, pid=7, tid=7, comm="spin", state="R", utime=100 * i,
                           stime=0, syscall="running", run_count=1000 + i) for i in range(6)]
    r = run(evs, [info(7, comm="spin")], backends=("proc",))
    t = thread(r, 7, 7)
    assert (t.verdict, t.rule) == ("busy-waiting", "cpu-spin")
    assert t.counters["cpu_pct"] == 100.0
    assert r.exit_code == 3


def test_gpu_spin_wait_from_strace_timing_alone():
    """The H200 shape: one RM_CONTROL a second and nothing else; time outside syscalls ~100%."""
    req = (3 << 30) | (0x20 << 16) | (0x46 << 8) | 0x2A
    evs = [ev.IoctlCall(ts=T0 + 0.6 + i, pid=9, tid=9, name="ioctl", fd=8, fd_kind="nvidiactl",
                        fd_target="/dev/nvidiactl", ret=0, dur=0.0004, request=req)
           for i in range(4)]
    r = run(evs, [info(9, fds=[fd(8, "nvidiactl", "/dev/nvidiactl")])])
    t = thread(r, 9, 9)
    assert (t.verdict, t.rule) == ("busy-waiting", "gpu-spin-wait")
    assert any("RM_CONTROL" in e for e in t.evidence)
    assert t.counters["gpu_ioctls"] == 4


def test_yield_loop():
    evs = [ev.Syscall(ts=T0 + i * 0.001, pid=4, tid=4, name="sched_yield", ret=0, dur=1e-6)
           for i in range(4000)]
    r = run(evs, [info(4)])
    assert thread(r, 4, 4).rule == "yield-loop"


# --------------------------------------------------------------------------- helpers
def test_helper_threads_and_parked_pool_do_not_decide():
    threads = {20: "python3", 21: "python3", 22: "cuda-EvtHandlr", 23: "python3", 24: "python3",
               25: "python3"}
    evs = [futex_block(20, 21, 0x1000)]
    # a pool: three workers, one futex word each, side by side (an OpenMP team)
    evs += [futex_block(20, tid, 0x7f0000001000 + 0x80 * i) for i, tid in enumerate((23, 24, 25))]
    evs += [ev.PollCall(ts=T0 + i * 0.1, pid=20, tid=22, name="poll", ret=0, dur=0.1,
                        timeout=0.1, timed_out=True, fd_kinds=("nvidia",)) for i in range(50)]
    evs += [ev.WriteCall(ts=T0 + i, pid=20, tid=20, name="write", fd=1, fd_kind="file",
                         fd_target="/log", ret=10, nbytes=10, dur=1e-5) for i in range(5)]
    r = run(evs, [info(20, threads=threads)])
    assert r.verdict == "progressing"
    assert thread(r, 20, 22).helper
    assert all(thread(r, 20, t).parked for t in (23, 24, 25))
    # a thread blocked all along on a wait of its own is the first suspect, never folded away
    assert not thread(r, 20, 21).parked


def test_gpu_blocking_sync_wait_is_blocked_not_deadlocked():
    threads = {30: "python3", 31: "python3", 32: "cuda-EvtHandlr"}
    fds = [fd(10, "nvidia", "/dev/nvidia0"), fd(11, "nvidiactl", "/dev/nvidiactl")]
    evs = [futex_block(30, 30, 0x7FFD0000), futex_block(30, 31, 0x7F000100)]
    evs += [ev.PollCall(ts=T0 + i * 0.1, pid=30, tid=32, name="poll", ret=0, dur=0.1,
                        timeout=0.1, timed_out=True, fd_kinds=("eventfd", "nvidia"))
            for i in range(50)]
    r = run(evs, [info(30, threads=threads, fds=fds)])
    p = r.process(30)
    assert (p.verdict, p.rule) == ("blocked", "waits-on-gpu")
    assert p.waits_on[0]["kind"] == "gpu"
    assert r.verdict == "blocked" and r.exit_code == 6


# --------------------------------------------------------------------------- deadlocks
def test_all_threads_blocked_in_futex_is_deadlocked():
    threads = {40: "main", 41: "t1", 42: "t2"}
    evs = [futex_block(40, 40, 0x10), futex_block(40, 41, 0x20), futex_block(40, 42, 0x30)]
    r = run(evs, [info(40, threads=threads)])
    assert r.verdict == "deadlocked" and r.exit_code == 4
    assert r.process(40).rule == "all-threads-blocked"
    assert r.rule == "in-process-deadlock"


def test_futex_wait_with_a_running_thread_is_not_a_deadlock():
    threads = {40: "main", 41: "worker"}
    evs = [futex_block(40, 40, 0x10)]
    evs += [ev.ThreadSample(ts=T0 + i, pid=40, tid=41, comm="worker", state="R",
                            utime=100 * i, stime=0, syscall="running") for i in range(6)]
    r = run(evs, [info(40, threads=threads)], backends=("strace", "proc"))
    assert r.verdict == "busy-waiting"     # the worker spins; main waits for it
    assert r.process(40).verdict == "busy-waiting"


def pipe_cycle(**kw):
    """Two processes, each blocked reading the pipe only the other writes (``kw``: run's)."""
    a_fds = [fd(3, "pipe", "pipe:[1]", "r"), fd(4, "pipe", "pipe:[2]", "w")]
    b_fds = [fd(3, "pipe", "pipe:[2]", "r"), fd(4, "pipe", "pipe:[1]", "w")]
    evs = [ev.ReadCall(ts=T0 + 0.01, pid=50, tid=50, name="read", fd=3, fd_kind="pipe",
                       fd_target="pipe:[1]", ongoing=True),
           ev.ReadCall(ts=T0 + 0.01, pid=51, tid=51, name="read", fd=3, fd_kind="pipe",
                       fd_target="pipe:[2]", ongoing=True)]
    return run(evs, [info(50, fds=a_fds), info(51, ppid=50, fds=b_fds)], **kw)


def test_two_processes_reading_each_others_pipes_are_a_cycle():
    r = pipe_cycle()
    assert r.verdict == "deadlocked" and r.rule == "wait-cycle"
    assert {r.process(50).verdict, r.process(51).verdict} == {"deadlocked"}
    assert r.process(51).waits_on[0]["pids"] == [50]


def test_reader_of_a_pipe_whose_writer_progresses_is_only_blocked():
    a_fds = [fd(3, "pipe", "pipe:[1]", "r")]
    b_fds = [fd(4, "pipe", "pipe:[1]", "w"), fd(1, "file", "/log", "w")]
    evs = [ev.ReadCall(ts=T0 + 0.01, pid=50, tid=50, name="read", fd=3, fd_kind="pipe",
                       fd_target="pipe:[1]", ongoing=True)]
    evs += [ev.WriteCall(ts=T0 + i, pid=51, tid=51, name="write", fd=1, fd_kind="file",
                         fd_target="/log", ret=100, nbytes=100) for i in range(4)]
    r = run(evs, [info(50, fds=a_fds), info(51, ppid=50, fds=b_fds)])
    assert r.process(50).verdict == "blocked"
    assert r.process(50).waits_on[0]["pids"] == [51]
    # The reader's fate is decided by the writer, which progresses: so does the tree.
    assert r.verdict == "progressing"


def test_dead_worker_is_the_root_cause():
    launcher = info(60, ppid=1, cmdline=["python3", "launch.py"],
                    fds=[fd(9, "pipe", "pipe:[3]", "w")])
    tp0 = info(61, ppid=60, cmdline=["sglang::scheduler_TP0"], fds=[fd(3, "pipe", "pipe:[3]", "r")])
    tp1 = info(62, ppid=60, cmdline=["sglang::scheduler_TP1"], state="Z", exit_code=3 << 8)
    evs = [ev.ReadCall(ts=T0 + 0.01, pid=61, tid=61, name="read", fd=3, fd_kind="pipe",
                       fd_target="pipe:[3]", ongoing=True),
           ev.WaitChild(ts=T0 + 0.01, pid=60, tid=60, name="wait4", child=61, ongoing=True)]
    r = run(evs, [launcher, tp0, tp1], roots=[60])
    assert r.verdict == "deadlocked" and r.rule == "dead-peer"
    assert r.root_cause["pid"] == 62
    assert "exited with status 3" in r.root_cause["summary"]
    assert "scheduler TP0" in r.root_cause["summary"]
    assert r.process(62).verdict == "exited"
    assert r.process(60).role == "launcher"


def test_idle_server_in_accept():
    evs = [ev.ReadCall(ts=T0 + 0.01, pid=70, tid=70, name="accept4", fd=3, fd_kind="tcp",
                       fd_target="TCP:[127.0.0.1:8000]", ongoing=True)]
    r = run(evs, [info(70, listening=["tcp 127.0.0.1:8000"])])
    assert r.verdict == "idle" and r.exit_code == 0
    assert thread(r, 70, 70).rule == "waits-for-input"


def test_tree_gone_is_exited():
    evs = [ev.ProcessExit(ts=T0 + 1, pid=80, status=0)]
    r = run(evs, [info(80)])
    assert r.verdict == "exited" and r.exit_code == 5


# --------------------------------------------------------------------------- logs lacking
def test_missing_timestamps_and_fd_paths_are_reported_not_guessed():
    evs = [ev.WriteCall(ts=0.0, pid=5, tid=5, name="write", fd=7, ret=8, nbytes=8)
           for _ in range(5)]
    r = run(evs, [info(5)], caps={"timestamps": False, "durations": False, "fd_paths": False})
    assert any("no timestamps" in n for n in r.notes)
    assert any("no fd paths" in n and "5 small writes" in n for n in r.notes)
    assert thread(r, 5, 5).verdict != "progressing"
    assert "syscalls_per_s" not in thread(r, 5, 5).counters


def test_large_write_without_fd_paths_still_counts_as_output():
    evs = [ev.WriteCall(ts=0.0, pid=5, tid=5, name="write", fd=7, ret=120, nbytes=120)]
    r = run(evs, [info(5)], caps={"timestamps": False, "fd_paths": False})
    assert thread(r, 5, 5).verdict == "progressing"


@pytest.mark.parametrize("cmdline,role", [
    (["sglang::scheduler_TP3"], "scheduler TP3"),
    (["sglang::scheduler_TP1_DP0"], "scheduler TP1 DP0"),
    (["sglang::detokenizer"], "detokenizer"),
    (["VLLM::Worker_TP2"], "worker TP2"),
    (["VLLM::EngineCore"], "engine core"),
])
def test_roles_from_titles(cmdline, role):
    from tracer.analysis.job.roles import role_of
    assert role_of(cmdline, cmdline[0][:15]).label == role
