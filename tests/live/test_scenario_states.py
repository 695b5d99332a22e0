"""Smoke tests for the scenario programs: each one, checked from /proc alone,
really is in the kernel state it claims (see fixtures/scenarios/README.md).

These do not use the tracer or the analyzer; they protect the scenarios from
silently changing shape.  Each test takes at most ~3 s on a quiet machine.

The machine may be busy (CI: 2 cores, other jobs beside the suite), so a test never counts what
happened in a fixed time: it waits for the state it expects (``wait_until``) with a deadline
(``DEADLINE``) that only bounds a hang, and asserts what the scenario did, not how fast.
"""
from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

import scenarios
from scenarios import Scenario, read_stat, thread_ids

StartScenario = Callable[..., Scenario]

SYS_READ, SYS_POLL, SYS_SCHED_YIELD, SYS_RECVFROM = 0, 7, 24, 45
SYS_WAIT4, SYS_FUTEX, SYS_EPOLL_WAIT = 61, 202, 232
FUTEX_WCHANS = ("futex_wait_queue", "futex_do_wait", "futex_wait_queue_me")

pytestmark = pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64",
                                reason="syscall numbers are x86_64 Linux")


# ---------------------------------------------------------------- helpers

def syscall(pid: int, tid: int | None = None) -> list[str]:
    """/proc/.../syscall split: ['202', arg0, ..., arg5, sp, pc], or ['running']."""
    tid = pid if tid is None else tid
    with open(f"/proc/{pid}/task/{tid}/syscall") as f:
        return f.read().split()


def blocked_syscall(pid: int, tid: int | None = None, timeout: float = 10.0) -> list[str]:
    """syscall() of a thread that should be blocked; tolerates it still being on
    its way into the call (e.g. the process that just printed READY)."""
    deadline = time.monotonic() + timeout
    while (sc := syscall(pid, tid)) == ["running"] and time.monotonic() < deadline:
        time.sleep(0.02)
    return sc


def wchan(pid: int, tid: int | None = None) -> str:
    tid = pid if tid is None else tid
    with open(f"/proc/{pid}/task/{tid}/wchan") as f:
        return f.read().strip()


def cpu_ticks(pid: int, tid: int | None = None) -> tuple[int, int]:
    st = read_stat(pid, tid)
    assert st is not None, f"{pid} is gone"
    return int(st[13]), int(st[14])  # utime, stime


def io(pid: int) -> dict[str, int]:
    with open(f"/proc/{pid}/io") as f:
        return {k: int(v) for k, v in (line.split(": ") for line in f)}


def status_field(pid: int, name: str) -> str:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].strip()
    raise KeyError(name)


def fd_target(pid: int, fd: int | str) -> str:
    return os.readlink(f"/proc/{pid}/fd/{int(str(fd), 0)}")


def fd_targets(pid: int) -> dict[int, str]:
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass
    return out


def cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().decode(errors="replace").split("\0")[:-1]


def listening_inodes() -> dict[int, int]:
    """{socket inode: port} of every TCP socket in LISTEN state."""
    out = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A":
                out[int(f[9])] = int(f[1].rsplit(":", 1)[1], 16)
    return out


def socket_inodes(pid: int) -> set[int]:
    return {int(t[8:-1]) for t in fd_targets(pid).values() if t.startswith("socket:[")}


def assert_blocked_in_futex_forever(pid: int, tid: int) -> None:
    sc = blocked_syscall(pid, tid)
    st = read_stat(pid, tid)
    assert st is not None and st[2] == "S", (tid, st)
    assert wchan(pid, tid) in FUTEX_WCHANS, (tid, wchan(pid, tid))
    assert int(sc[0]) == SYS_FUTEX, (tid, sc)
    assert int(sc[4], 16) == 0, f"thread {tid}: futex wait has a timeout: {sc}"


DEADLINE = 60.0     # seconds: only bounds a hang; a passing test returns as soon as it holds


def wait_until(cond: Callable[[], bool], timeout: float = DEADLINE) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


# ---------------------------------------------------------------- scenarios

def test_spin(scenario: StartScenario) -> None:
    sc = scenario("spin")
    assert thread_ids(sc.pid) == [sc.pid]
    hz = os.sysconf("SC_CLK_TCK")
    u0, s0 = cpu_ticks(sc.pid)
    vcs0 = status_field(sc.pid, "voluntary_ctxt_switches")
    # 0.2 s of user time (0.5 s on a quiet machine; as long as it takes on a busy one)
    assert wait_until(lambda: cpu_ticks(sc.pid)[0] - u0 >= 0.2 * hz), (u0, cpu_ticks(sc.pid))
    u1, s1 = cpu_ticks(sc.pid)
    assert read_stat(sc.pid)[2] == "R"          # runnable, preempted or not
    assert syscall(sc.pid) == ["running"]
    assert s1 - s0 <= 2 + (u1 - u0) // 20, (s0, s1, u0, u1)   # user time, not the kernel's
    # never blocks: no voluntary context switch, hence no sleeping syscall
    assert status_field(sc.pid, "voluntary_ctxt_switches") == vcs0


def test_yield_spin(scenario: StartScenario) -> None:
    sc = scenario("yield_spin")
    hz = os.sysconf("SC_CLK_TCK")
    u0, s0 = cpu_ticks(sc.pid)
    vcs0 = status_field(sc.pid, "voluntary_ctxt_switches")

    def spun() -> bool:
        u, s = cpu_ticks(sc.pid)
        return (u + s) - (u0 + s0) >= 0.2 * hz and s - s0 >= 0.05 * hz

    # on CPU, part of it in the kernel (sched_yield), for as long as a busy machine takes
    assert wait_until(spun), ("sched_yield loop should spend time in the kernel",
                              (u0, s0), cpu_ticks(sc.pid))
    assert read_stat(sc.pid)[2] == "R"
    assert status_field(sc.pid, "voluntary_ctxt_switches") == vcs0
    assert io(sc.pid)["syscr"] + io(sc.pid)["syscw"] < 20  # no I/O in the loop


@pytest.mark.parametrize("name", ["lock_order_deadlock", "py_deadlock"])
def test_lock_deadlock(scenario: StartScenario, name: str) -> None:
    sc = scenario(name)
    tids = thread_ids(sc.pid)
    assert len(tids) == 3, tids  # main + 2 workers
    before = {t: cpu_ticks(sc.pid, t) for t in tids}
    for tid in tids:  # main (pthread_join / Thread.join) and both workers
        assert_blocked_in_futex_forever(sc.pid, tid)
    # the two workers wait on two different futexes (the two locks)
    assert len({blocked_syscall(sc.pid, t)[1] for t in tids[1:]}) == 2
    time.sleep(0.3)
    assert {t: cpu_ticks(sc.pid, t) for t in tids} == before


def test_idle_server(scenario: StartScenario) -> None:
    sc = scenario("idle_server")
    port = int(sc.extra)
    assert thread_ids(sc.pid) == [sc.pid]
    sys_ = blocked_syscall(sc.pid)
    assert int(sys_[0]) == SYS_EPOLL_WAIT and int(sys_[4], 16) == 0xFFFFFFFF, sys_  # timeout -1
    listening = listening_inodes()
    mine = [listening[i] for i in socket_inodes(sc.pid) if i in listening]
    assert mine == [port]
    with socket.create_connection(("127.0.0.1", port), timeout=2) as c:
        c.sendall(b"GET / HTTP/1.0\r\n\r\n")
        reply = b""
        while chunk := c.recv(4096):
            reply += chunk
    assert reply.startswith(b"HTTP/1.0 200 OK") and reply.endswith(b"ok\n")
    assert wait_until(lambda: syscall(sc.pid)[0] == str(SYS_EPOLL_WAIT))


def test_pipe_deadlock(scenario: StartScenario) -> None:
    sc = scenario("pipe_deadlock")
    parent, child = sc.pid, int(sc.extra)
    assert sc.all_pids() == [parent, child]
    reading = {}
    for pid in (parent, child):
        sys_ = blocked_syscall(pid)
        assert int(sys_[0]) == SYS_READ, (pid, sys_)
        assert read_stat(pid)[2] == "S"
        target = fd_target(pid, sys_[1])
        assert target.startswith("pipe:["), target
        reading[pid] = target
    assert reading[parent] != reading[child]
    # each one holds (only as writer) the pipe the other reads from
    assert reading[child] in fd_targets(parent).values()
    assert reading[parent] in fd_targets(child).values()


def fdinfo(pid: int, fd: int | str) -> dict[str, str]:
    with open(f"/proc/{pid}/fdinfo/{int(str(fd), 0)}") as f:
        return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in f)}


def test_eventfd_deadlock(scenario: StartScenario) -> None:
    sc = scenario("eventfd_deadlock")
    parent, child = sc.pid, int(sc.extra)
    assert sc.all_pids() == [parent, child]
    psys, csys = blocked_syscall(parent), blocked_syscall(child)
    assert int(psys[0]) == SYS_READ and int(csys[0]) == SYS_READ, (psys, csys)
    assert read_stat(parent)[2] == "S" and read_stat(child)[2] == "S"
    assert fd_target(parent, psys[1]) == "anon_inode:[eventfd]"
    info = fdinfo(parent, psys[1])
    assert int(info["eventfd-count"], 16) == 0
    # the child holds the same eventfd object (same id), not just some eventfd
    child_ids = [fdinfo(child, fd).get("eventfd-id") for fd, t in fd_targets(child).items()
                 if t == "anon_inode:[eventfd]"]
    assert child_ids == [info["eventfd-id"]]
    # the child reads the pipe whose only write end the parent holds
    pipe = fd_target(child, csys[1])
    assert pipe.startswith("pipe:[")
    assert pipe in fd_targets(parent).values()
    assert list(fd_targets(child).values()).count(pipe) == 1


def test_dead_worker(scenario: StartScenario) -> None:
    sc = scenario("dead_worker")
    tp0, tp1 = map(int, sc.extra_fields)
    assert sc.all_pids() == [sc.pid, tp0, tp1]
    st1 = read_stat(tp1)
    assert st1[2] == "Z" and int(st1[51]) == 3 << 8, st1
    assert cmdline(tp0)[0] == "sglang::scheduler_TP0"
    sys0 = blocked_syscall(tp0)
    assert int(sys0[0]) == SYS_READ and fd_target(tp0, sys0[1]).startswith("pipe:[")
    # the launcher waits for TP0 specifically, holding the pipe's write end
    sysl = blocked_syscall(sc.pid)
    assert int(sysl[0]) == SYS_WAIT4 and int(sysl[1], 16) == tp0, sysl
    assert fd_target(tp0, sys0[1]) in fd_targets(sc.pid).values()


def test_sglang_like(scenario: StartScenario) -> None:
    sc = scenario("sglang_like")
    tree = sc.all_pids()
    assert tree[0] == sc.pid and sorted(tree[1:]) == sorted(map(int, sc.extra_fields))
    titles = {cmdline(p)[0]: p for p in tree[1:]}
    assert set(titles) == {"sglang::scheduler_TP0", "sglang::scheduler_TP1", "sglang::detokenizer"}
    schedulers = [titles["sglang::scheduler_TP0"], titles["sglang::scheduler_TP1"]]

    sysl = blocked_syscall(sc.pid)
    assert int(sysl[0]) == SYS_WAIT4 and int(sysl[1], 16) & 0xFFFFFFFF == 0xFFFFFFFF, sysl  # wait4(-1)
    assert int(blocked_syscall(titles["sglang::detokenizer"])[0]) == SYS_RECVFROM
    for pid in schedulers:
        assert "anon_inode:[eventfd]" in fd_targets(pid).values()
    # no process of the tree listens on a TCP port
    listening = listening_inodes()
    assert not any(i in listening for p in tree for i in socket_inodes(p))

    # the schedulers sleep in poll(..., 1000) and tick the eventfd once a second
    # (at least two ticks each, however long a busy machine takes; never more than one a second)
    w0 = {p: io(p)["syscw"] for p in schedulers}
    t0 = time.monotonic()
    assert wait_until(lambda: all(io(p)["syscw"] - w0[p] >= 2 for p in schedulers))
    for pid in schedulers:
        delta = io(pid)["syscw"] - w0[pid]
        elapsed = time.monotonic() - t0
        assert delta <= elapsed + 1.5, (pid, delta, elapsed)
        assert wait_until(lambda: syscall(pid)[0] == str(SYS_POLL))
        sys_ = syscall(pid)
        assert int(sys_[3], 16) == 1000, sys_  # timeout argument


def test_healthy_worker(scenario: StartScenario) -> None:
    sc = scenario("healthy_worker")
    tids = thread_ids(sc.pid)
    assert len(tids) == 5  # main + 4 parked helpers
    for tid in tids[1:]:
        assert_blocked_in_futex_forever(sc.pid, tid)
    n0, w0 = sc.lines_after_ready, io(sc.pid)["wchar"]
    assert wait_until(lambda: sc.lines_after_ready - n0 >= 3)       # ~0.6 s on a quiet machine
    assert sc.output[-1].startswith("step ")
    assert wait_until(lambda: io(sc.pid)["wchar"] - w0 >= 3 * 40)   # stdout + file lines


def test_parked_pool(scenario: StartScenario) -> None:
    sc = scenario("parked_pool")
    tids = thread_ids(sc.pid)
    assert len(tids) == 9  # main + 8 pool workers
    for tid in tids[1:]:
        assert_blocked_in_futex_forever(sc.pid, tid)
    w0 = io(sc.pid)["syscw"]
    assert wait_until(lambda: io(sc.pid)["syscw"] - w0 >= 3)       # ~0.6 s on a quiet machine


def test_shared_mutex_killed(scenario: StartScenario) -> None:
    sc = scenario("shared_mutex_killed")
    child = int(sc.extra_fields[0])
    addr = int(sc.extra_fields[1], 16)
    # the child that held the process-shared mutex was SIGKILLed: a zombie, killed by signal 9
    stat = read_stat(child)
    assert stat is not None and stat[2] == "Z"
    assert int(stat[51]) & 0x7F == 9
    # the parent blocks on the futex word of that mutex, without timeout
    args = blocked_syscall(sc.pid)
    assert args[0] == "202" and int(args[1], 16) == addr and args[4] == "0x0"


def test_slow_peer(scenario: StartScenario) -> None:
    sc = scenario("slow_peer")
    writer = int(sc.extra_fields[0])
    args = blocked_syscall(sc.pid)
    assert args[0] == "0"                          # the reader sits in read()
    assert fd_target(sc.pid, int(args[1], 16)).startswith("pipe:[")
    w0 = io(writer)["wchar"]
    assert wait_until(lambda: io(writer)["wchar"] > w0, )   # the writer logs


def test_chatty_client(scenario: StartScenario) -> None:
    sc = scenario("chatty_client", "--period", "0.2")
    server = int(sc.extra_fields[0])
    assert wait_until(lambda: blocked_syscall(sc.pid)[0] == "230")   # clock_nanosleep
    assert wait_until(lambda: blocked_syscall(server)[0] == "45")    # recvfrom
    assert socket_inodes(sc.pid), "the client holds its TCP socket"


def test_partial_hang(scenario: StartScenario) -> None:
    sc = scenario("partial_hang")
    tids = thread_ids(sc.pid)
    assert len(tids) == 5                                   # main, holder, 3 workers
    holder, workers = tids[1], tids[2:]
    assert blocked_syscall(sc.pid, holder)[0] == "0"        # read on the pipe
    for tid in workers:
        assert_blocked_in_futex_forever(sc.pid, tid)
    w0 = io(sc.pid)["wchar"]
    assert wait_until(lambda: io(sc.pid)["wchar"] > w0, )   # the main thread logs


def test_heartbeat_hang(scenario: StartScenario) -> None:
    sc = scenario("heartbeat_hang")
    peer = int(sc.extra_fields[0])
    assert len(thread_ids(sc.pid)) == 2 and len(thread_ids(peer)) == 2   # main + keep-alive
    u0, _ = cpu_ticks(sc.pid, sc.pid)
    assert wait_until(lambda: cpu_ticks(sc.pid, sc.pid)[0] > u0)   # rank0's main thread spins
    assert_blocked_in_futex_forever(peer, peer)         # rank1's main thread waits forever
    helper = next(t for t in thread_ids(peer) if t != peer)
    assert wait_until(lambda: blocked_syscall(peer, helper)[0] in ("7", "45", "35", "230"))


def test_tcp_ranks() -> None:
    """The two ranks on loopback (tests/live/test_multinode.py puts them on two nodes)."""
    script = str(scenarios.SCENARIO_DIR / "tcp_ranks.py")
    for _ in range(20):                       # two free ports in a row: PORT and PORT+1
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port + 1))
            break
        except OSError:
            continue
    # rank 1's stdin: a pipe whose writer (sleep) never writes
    with scenarios.Scenario("tcp_ranks", ["sh", "-c", 'sleep 1000000 | exec "$0" "$@"',
                                          sys.executable, script, "--node", "b", "--bind",
                                          "127.0.0.1", "--port", str(port)]) as r1, \
            scenarios.Scenario("tcp_ranks", [sys.executable, script, "--node", "a",
                                             "--connect", "127.0.0.1", "--port",
                                             str(port)]) as r0:
        assert wait_until(lambda: syscall(r1.pid)[0] == SYS_READ_STR)   # stuck on stdin
        assert blocked_syscall(r0.pid)[0] == str(SYS_RECVFROM)             # waits for rank 1
        assert len(thread_ids(r0.pid)) == 2 and len(thread_ids(r1.pid)) == 2
        helper = next(t for t in thread_ids(r0.pid) if t != r0.pid)
        # the keep-alive loop: sleep, send, poll, recv; clock_nanosleep between keep-alives
        assert wait_until(lambda: syscall(r0.pid, helper)[0] == "230")


SYS_READ_STR = str(SYS_READ)


def test_silent_server(scenario: StartScenario, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sc = scenario("silent_server", "--port", port, "--log", log, "--silent-for", 600)
    assert thread_ids(sc.pid) == [sc.pid]
    assert_blocked_in_futex_forever(sc.pid, sc.pid)
    assert fd_target(sc.pid, 1) == fd_target(sc.pid, 2) == str(log)
    assert log.read_text() == f"server starting on port {port}\n"
    assert 590 < time.time() - log.stat().st_mtime < 700          # went quiet 10 min ago
    listening = listening_inodes()
    assert [listening[i] for i in socket_inodes(sc.pid) if i in listening] == []
    ok = scenario("silent_server", "--port", port, "--log", tmp_path / "ok.log", "--listen")
    assert [listening_inodes()[i] for i in socket_inodes(ok.pid)] == [port]


def test_gpu_libs_like(scenario: StartScenario, tmp_path: Path) -> None:
    from fake_gpu_libs import build_fake_libs
    libs = build_fake_libs(tmp_path)
    sc = scenario("gpu_libs_like", "--cuda", libs["cuda"], "--nccl", libs["nccl"])
    maps = Path(f"/proc/{sc.pid}/maps").read_text()
    assert str(libs["cuda"]) in maps and str(libs["nccl"]) in maps
    tids = thread_ids(sc.pid)
    assert len(tids) == 2                                    # main + graph launcher
    assert wait_until(lambda: wchan(sc.pid, sc.pid) in FUTEX_WCHANS)
    assert_blocked_in_futex_forever(sc.pid, sc.pid)         # inside `with graph():`


# ---------------------------------------------------------------- harness

def test_every_scenario_has_a_smoke_test_and_readme_row() -> None:
    tested = {"spin", "yield_spin", "lock_order_deadlock", "py_deadlock", "idle_server",
              "pipe_deadlock", "eventfd_deadlock", "dead_worker", "sglang_like", "healthy_worker", "parked_pool",
              "shared_mutex_killed", "slow_peer", "chatty_client", "heartbeat_hang", "partial_hang",
              "silent_server", "gpu_libs_like", "tcp_ranks",
              # tests/live/test_serving_states.py
              "serving_tree", "unbuffered_logger", "pool_server", "feeder_blocked",
              "watchdog_futex", "stopped_child",
              # tests/live/test_truth_live.py
              "spinning_reader", "nccl_ranks", "empty_poller", "served_client",
              "shard_loader", "segv_malloc_lock",
              # tests/live/test_four_ranks.py
              "four_ranks",
              # tests/live/test_report_screen_live.py
              "tp8_server",
              # tests/live/test_subreaper.py
              "subreaper_chain"}
    assert set(scenarios.available_scenarios()) == tested
    readme = (scenarios.SCENARIO_DIR / "README.md").read_text()
    for name in tested:
        assert f"`{name}" in readme, name


def test_stop_kills_whole_tree() -> None:
    with scenarios.start_scenario("sglang_like", "--tp", "1") as sc:
        tree = sc.all_pids()
        assert len(tree) == 3
    # dead; orphans may stay zombies until init reaps them
    assert all(read_stat(p) is None or read_stat(p)[2] == "Z" for p in tree)
    assert scenarios.group_members(sc.pgid, include_zombies=False) == []
    assert not sc.alive()


def test_start_failure_is_reported_and_cleaned_up() -> None:
    argv = [sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(2)"]
    with pytest.raises(scenarios.ScenarioError, match="boom"):
        scenarios.Scenario("failing", argv, ready_timeout=5)
    argv = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(scenarios.ScenarioError, match="not READY"):
        scenarios.Scenario("silent", argv, ready_timeout=0.3)
    assert "silent" not in scenarios.leftover_processes()


def test_a_root_that_exits_stays_unreaped_until_stop() -> None:
    """Until stop() the harness never reaps a scenario's root (a zombie once it exits): its pid,
    the group's id that stop() kills, cannot meanwhile become another test's scenario's."""
    argv = [sys.executable, "-c", "import os; print('READY', os.getpid(), flush=True)"]
    sc = scenarios.Scenario("exits", argv, ready_timeout=30, settle=0)
    try:
        deadline = time.monotonic() + DEADLINE
        while sc.alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not sc.alive()
        assert read_stat(sc.pgid)[2] == "Z"        # exited, not reaped: the pid is still ours
    finally:
        sc.stop()
    assert sc.proc.returncode == 0                  # stop() reaped it
