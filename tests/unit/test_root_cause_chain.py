"""The root cause is where the chain of waits ends, not the thread that ticks (issue 20).

Serving-shaped trees built from events as the strace and proc backends record them: a launcher
reading its schedulers' READY pipe; in each scheduler a main thread waiting on a queue for its
model-runner thread, a watchdog that writes an eventfd once a second, a thread pool parked on
neighbouring futex words, a store thread in accept; the two schedulers joined by a TCP socket
(their collective group). Every case has a watchdog ticking beside the stuck thread, and the
slow ones end in work that advances. Pids and tids are arbitrary: nothing is read from names.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from tracer import events as ev
from tracer.analysis.analyzer import Analyzer

T0 = 1000.0
END = T0 + 6.0
READY = "pipe:[500]"
JIT_PIPE = "pipe:[600]"
TCP_01 = "TCP:[127.0.0.1:41000->127.0.0.1:29500]"
TCP_10 = "TCP:[127.0.0.1:29500->127.0.0.1:41000]"
LAUNCHER, TP0, TP1, CHILD = 100, 200, 300, 400


def fd(n: int, kind: str, target: str, mode: str = "rw") -> ev.FdInfo:
    return ev.FdInfo(n, kind, target, mode, None, None)


def info(pid: int, ppid: int, title: str, threads: Dict[int, str], fds) -> ev.ProcessInfo:
    return ev.ProcessInfo(ts=T0, pid=pid, ppid=ppid, comm="python3", cmdline=[title],
                          threads=threads, fds=list(fds), state="S")


def blocked(call: str, pid: int, tid: int, **kw) -> ev.Syscall:
    cls = {"futex": ev.FutexCall, "read": ev.ReadCall, "recvfrom": ev.ReadCall, "write": ev.WriteCall,
           "wait4": ev.WaitChild, "accept4": ev.ReadCall}.get(call, ev.Syscall)
    if call == "futex":
        kw.setdefault("op", "WAIT_BITSET")
    return cls(ts=T0 + 0.01, pid=pid, tid=tid, name=call, ongoing=True, **kw)


def watchdog(pid: int, tid: int) -> List[ev.Event]:
    """A heartbeat: sleep 1 s, write 8 bytes to its eventfd, read them back."""
    out: List[ev.Event] = []
    for i in range(6):
        ts = T0 + i
        out.append(ev.Syscall(ts=ts, pid=pid, tid=tid, name="clock_nanosleep", ret=0, dur=0.99))
        out.append(ev.WriteCall(ts=ts + 0.991, pid=pid, tid=tid, name="write", fd=9,
                                fd_kind="eventfd", fd_target="anon_inode:[eventfd]", ret=8,
                                nbytes=8, dur=1e-5))
    return out


def spinning(pid: int, tid: int) -> List[ev.Event]:
    """/proc samples of a thread on CPU all along, no syscalls (utime +1 s/s at 100 Hz)."""
    return [ev.ThreadSample(ts=T0 + i * 0.5, pid=pid, tid=tid, comm="python3", state="R",
                            utime=50 * i, stime=0, syscall="running", run_count=1)
            for i in range(13)]


def scheduler(pid: int, runner: Optional[int], extra_fds=(), extra_threads=None) -> tuple:
    """One scheduler's threads and events, without its runner's own events."""
    threads = {pid: "python3", pid + 1: "python3", pid + 3: "python3", **(extra_threads or {})}
    pool = list(range(pid + 10, pid + 18))
    threads.update({t: "python3" for t in pool})
    if runner is not None:
        threads[runner] = "python3"
    peer = TCP_01 if pid == TP0 else TCP_10
    fds = [fd(5, "pipe", READY, "w"), fd(7, "tcp", peer), fd(9, "eventfd", "anon_inode:[eventfd]"),
           fd(11, "tcp", "TCP:[127.0.0.1:%d]" % (29600 + pid))] + list(extra_fds)
    evs: List[ev.Event] = [blocked("futex", pid, pid, addr=0x55000000 + pid)]
    evs += watchdog(pid, pid + 1)
    evs.append(blocked("accept4", pid, pid + 3, fd=11, fd_kind="tcp"))
    evs += [blocked("futex", pid, t, addr=0x7F0000001000 + 0x80 * i) for i, t in enumerate(pool)]
    inf = info(pid, LAUNCHER, f"sglang::scheduler_TP{0 if pid == TP0 else 1}", threads, fds)
    inf.listening = ["tcp 127.0.0.1:%d" % (29600 + pid)]
    return inf, evs


def launcher() -> tuple:
    inf = info(LAUNCHER, 1, "python3 -m sglang.launch_server", {LAUNCHER: "python3"},
               [fd(4, "pipe", READY, "r")])
    return inf, [blocked("read", LAUNCHER, LAUNCHER, fd=4, fd_kind="pipe", fd_target=READY)]


def report(infos, evs):
    an = Analyzer(start=T0, backends=["strace", "proc"], processes=infos, roots=[LAUNCHER])
    an.feed_all(sorted(evs, key=lambda e: e.ts))
    return an.report(end=END)


def shape(tp0_runner: List[ev.Event], tp1_runner: List[ev.Event], tp1_has_runner=True,
          child: Optional[List[ev.Event]] = None, child_fds=(), tp0_fds=(), tp1_fds=(),
          tp0_extra_threads=None):
    li, le = launcher()
    i0, e0 = scheduler(TP0, TP0 + 2, tp0_fds, tp0_extra_threads)
    i1, e1 = scheduler(TP1, TP1 + 2 if tp1_has_runner else None, tp1_fds)
    infos, evs = [li, i0, i1], le + e0 + e1 + tp0_runner + tp1_runner
    if child is not None:
        infos.append(info(CHILD, TP0, "python3 -c compile", {CHILD: "python3"}, child_fds))
        evs += child
    return report(infos, evs)


# --------------------------------------------------------------------------- the four shapes
def test_a_runner_spinning_is_the_root_cause_not_the_watchdog():
    r = shape(spinning(TP0, TP0 + 2),
              [blocked("recvfrom", TP1, TP1 + 2, fd=7, fd_kind="tcp", fd_target=TCP_10)])
    assert r.verdict == "busy-waiting"
    assert (r.root_cause["pid"], r.root_cause["tid"]) == (TP0, TP0 + 2), r.root_cause
    s = r.root_cause["summary"]
    assert "thread 202 busy-waits" in s and "the chain: launcher (pid 100) reads pipe:[500]" in s
    # the watchdog is evidence of life, never the end of the chain
    assert "eventfd writes" not in s
    # the runner that waits for it is shown, not folded into the pool
    t = next(t for t in r.process(TP1).threads if t.tid == TP1 + 2)
    assert not t.parked and t.verdict == "blocked"
    pooled = [t for t in r.process(TP1).threads if t.parked]
    assert len(pooled) == 8


def test_a_dead_runner_leaves_its_rank_waiting_for_nobody():
    r = shape([blocked("recvfrom", TP0, TP0 + 2, fd=7, fd_kind="tcp", fd_target=TCP_01)], [],
              tp1_has_runner=False)
    assert r.verdict == "blocked"
    assert (r.root_cause["pid"], r.root_cause["tid"]) == (TP1, TP1), r.root_cause
    s = r.root_cause["summary"]
    # the ranks compared by their threads, as STAT does: TP1 lacks the thread TP0 has in the
    # collective (its runner died before the recording: only the comparison can tell)
    assert r.rule == "collective-straggler"
    assert "it has no thread blocked in recvfrom on tcp, where scheduler TP0 (pid 200) has one" \
        in s
    assert "scheduler TP0 (pid 200) waits in the collective, waiting for it" in s


def test_the_same_tree_without_the_comparison_still_ends_at_the_rank_that_waits_for_nobody():
    """Untitled siblings are no ranks: no comparison, and the chain alone names TP1."""
    li, le = launcher()
    i0, e0 = scheduler(TP0, TP0 + 2)
    i1, e1 = scheduler(TP1, None)
    for i in (i0, i1):
        i.cmdline = [f"python3 scheduler.py --port {i.pid}"]
    r = report([li, i0, i1], le + e0 + e1 + [
        blocked("recvfrom", TP0, TP0 + 2, fd=7, fd_kind="tcp", fd_target=TCP_01)])
    assert r.verdict == "blocked" and r.root_cause["pid"] == TP1, r.root_cause
    s = r.root_cause["summary"]
    assert "cannot be told from here" in s and "1 thread ticks in a periodic loop" in s
    assert r.process(TP1).rule == "waits-for-unknown-waker"


LOCK = "/root/.cache/jit/kernels.lock"
LOCK_INODE = 8118310


def lock_wait(pid: int, tid: int) -> List[ev.Event]:
    """A runner blocked in flock() on the cache's lock file, which another rank holds
    (/proc/locks at the end of the recording: the holder's line and the waiter's "->" line)."""
    return [blocked("flock", pid, tid, fd=13, fd_kind="file", fd_target=LOCK,
                    args=f"13<{LOCK}>, LOCK_EX"),
            ev.FileLock(ts=END, pid=TP0, inode=LOCK_INODE, dev="fe:00", kind="FLOCK",
                        access="WRITE", lock_id=1),
            ev.FileLock(ts=END, pid=pid, inode=LOCK_INODE, dev="fe:00", kind="FLOCK",
                        access="WRITE", waiting=True, lock_id=1)]


LOCK_FD = ev.FdInfo(13, "file", LOCK, "rw", 0, LOCK_INODE)


def test_a_compiler_child_and_its_rank_waiting_on_each_other_is_a_deadlock():
    child = [blocked("read", CHILD, CHILD, fd=0, fd_kind="pipe", fd_target=JIT_PIPE)]
    r = shape([blocked("wait4", TP0, TP0 + 2, child=CHILD)], lock_wait(TP1, TP1 + 2),
              child=child, child_fds=[fd(0, "pipe", JIT_PIPE, "r")],
              tp0_fds=[fd(12, "pipe", JIT_PIPE, "w"), LOCK_FD], tp1_fds=[LOCK_FD])
    assert r.verdict == "deadlocked", r.root_cause
    # the rank that waits for the lock waits for the one in the cycle
    w = r.process(TP1).waits_on
    assert any(x["kind"] == "lock" and x["pids"] == [TP0] for x in w), w
    assert r.root_cause["pid"] in (TP0, CHILD)
    s = r.root_cause["summary"]
    assert "Proof, " in s and "cycle" in s
    assert "thread 202 of scheduler TP0 (pid 200) waits for python3 (pid 400) in wait4" in s
    assert "whose only writer is scheduler TP0 (pid 200)" in s


def test_a_slow_compile_that_writes_its_object_file_is_progress():
    writes = [ev.WriteCall(ts=T0 + i * 0.05, pid=CHILD, tid=CHILD, name="write", fd=3,
                           fd_kind="file", fd_target="/tmp/jit/build-0.o", ret=4096,
                           nbytes=4096, dur=1e-4) for i in range(110)]
    r = shape([blocked("wait4", TP0, TP0 + 2, child=CHILD)], lock_wait(TP1, TP1 + 2),
              child=writes, child_fds=[fd(3, "file", "/tmp/jit/build-0.o", "w")],
              tp0_fds=[LOCK_FD], tp1_fds=[LOCK_FD])
    assert r.verdict == "progressing", r.root_cause
    assert r.root_cause["pid"] == CHILD
    s = r.root_cause["summary"]
    assert s.startswith("everything waits for python3 (pid 400), which makes progress: wrote")
    assert "/tmp/jit/build-0.o" in s
    assert r.exit_code == 0


def test_a_scheduler_whose_only_work_is_its_loop_busy_waits():
    """The seed's scheduler: nothing but the loop (no runner, no other thread): the loop itself
    is the work that makes no progress, so it ends the chain."""
    li, le = launcher()
    inf = info(TP0, LAUNCHER, "sglang::scheduler_TP0", {TP0: "python3"},
               [fd(5, "pipe", READY, "w"), fd(9, "eventfd", "anon_inode:[eventfd]")])
    r = report([li, inf], le + watchdog(TP0, TP0))
    assert r.verdict == "busy-waiting" and r.root_cause["pid"] == TP0
    assert "busy-waits" in r.root_cause["summary"]


def test_a_lock_taken_in_the_log_names_its_holder():
    """An imported log has no /proc/locks: the lock calls it shows name the holder."""
    li, le = launcher()
    i0, e0 = scheduler(TP0, TP0 + 2)
    i1, e1 = scheduler(TP1, TP1 + 2)
    take = ev.Syscall(ts=T0 + 0.001, pid=TP0, tid=TP0 + 2, name="flock", fd=13, fd_kind="file",
                      fd_target=LOCK, args=f"13<{LOCK}>, LOCK_EX", ret=0, dur=1e-5)
    spin = spinning(TP0, TP0 + 2)
    wait = blocked("flock", TP1, TP1 + 2, fd=13, fd_kind="file", fd_target=LOCK,
                   args=f"13<{LOCK}>, LOCK_EX")
    r = report([li, i0, i1], le + e0 + e1 + [take, wait] + spin)
    assert r.verdict == "busy-waiting"
    assert (r.root_cause["pid"], r.root_cause["tid"]) == (TP0, TP0 + 2)
    assert any(x["kind"] == "lock" and x["pids"] == [TP0] for x in r.process(TP1).waits_on)


def test_a_writer_blocked_on_a_full_pipe_waits_for_its_reader():
    """A feeder thread blocked in a large write() to a worker's pipe waits for the worker,
    which is what the chain must name, not the thread sleeping in select beside it."""
    feeder, sleeper, worker = 501, 502, 600
    parent = info(500, 1, "python3 pool.py", {500: "python3", feeder: "python3",
                                               sleeper: "python3"},
                  [fd(8, "pipe", "pipe:[700]", "w")])
    kid = info(worker, 500, "python3 pool.py", {worker: "python3"},
               [fd(0, "pipe", "pipe:[700]", "r")])
    evs: List[ev.Event] = [blocked("futex", 500, 500, addr=0x1000),
                           blocked("write", 500, feeder, fd=8, fd_kind="pipe",
                                   fd_target="pipe:[700]", nbytes=172032),
                           blocked("futex", worker, worker, addr=0x2000)]
    evs += [ev.PollCall(ts=T0 + i, pid=500, tid=sleeper, name="select", ret=0, dur=1.0,
                        timeout=1.0, timed_out=True) for i in range(6)]
    an = Analyzer(start=T0, backends=["strace"], processes=[parent, kid], roots=[500])
    an.feed_all(sorted(evs, key=lambda e: e.ts))
    r = an.report(end=END)
    assert r.verdict in ("deadlocked", "blocked"), r.root_cause
    assert r.root_cause["pid"] == worker, r.root_cause
    s = r.root_cause["summary"]
    assert "writes pipe:[700] (the pipe is full) whose only reader is python3 (pid 600)" in s
    assert "select" not in s.split("; the chain")[0]


def polling(pid: int, tid: int) -> List[ev.Event]:
    """A flag polled every 20 ms: sleep, look, sleep; no eventfd, no output."""
    return [ev.Syscall(ts=T0 + 0.02 * i, pid=pid, tid=tid, name="clock_nanosleep", ret=0,
                       dur=0.0199) for i in range(295)]


def test_a_runner_that_waits_on_an_event_nobody_sets_is_named_not_its_main_thread():
    """TP0's main waits on a queue for its runner, which waits on an event nobody sets (a load
    that stopped): a watchdog ticks beside them; the runner is the process's only other worker,
    so the main thread's wait most likely ends with it."""
    r = shape([blocked("futex", TP0, TP0 + 2, addr=0x7F00DEAD0000)],
              [blocked("recvfrom", TP1, TP1 + 2, fd=7, fd_kind="tcp", fd_target=TCP_10)])
    assert r.verdict == "blocked"
    assert (r.root_cause["pid"], r.root_cause["tid"]) == (TP0, TP0 + 2), r.root_cause
    assert "the other waits in its process most likely end with it" in r.root_cause["summary"]


def test_a_runner_that_polls_a_flag_is_named_and_the_watchdog_is_not():
    r = shape(polling(TP0, TP0 + 2),
              [blocked("recvfrom", TP1, TP1 + 2, fd=7, fd_kind="tcp", fd_target=TCP_10)])
    assert r.verdict == "blocked"
    assert (r.root_cause["pid"], r.root_cause["tid"]) == (TP0, TP0 + 2), r.root_cause
    assert "it only looks again and again" in r.root_cause["summary"]


def test_two_waiting_workers_leave_the_waker_untold():
    """Two other threads wait on their own: which one the main thread waits for cannot be told,
    and the report names the main thread's wait rather than guess."""
    r = shape([blocked("futex", TP0, TP0 + 2, addr=0x7F00DEAD0000),
               blocked("futex", TP0, TP0 + 4, addr=0x7F00BEEF0000)],
              [blocked("recvfrom", TP1, TP1 + 2, fd=7, fd_kind="tcp", fd_target=TCP_10)],
              tp0_extra_threads={TP0 + 4: "python3"})
    assert (r.root_cause["pid"], r.root_cause["tid"]) == (TP0, TP0), r.root_cause
    assert "cannot be told from here" in r.root_cause["summary"]
