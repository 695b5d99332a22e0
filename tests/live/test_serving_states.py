"""The serving-tree shapes and the issue-20 scenarios, checked from /proc alone: each one really
is in the kernel state fixtures/scenarios/README.md gives it, with the threads its READY line
names (``stuck=PID:TID`` ...) where the line says.

Like test_scenario_states.py these use neither the tracer nor the analyzer (the verdicts are
tested elsewhere); they keep the scenarios from silently changing shape. Rates are checked
with generous bounds and deadlines that only bound a hang (``wait_until``'s ``DEADLINE``): the
machine is shared, and a test waits for what a scenario does, never counts it in a fixed time.
"""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Callable

import pytest

from scenarios import Scenario, pid_tid, pid_tids, read_stat, thread_ids
from test_scenario_states import (SYS_FUTEX, SYS_READ, SYS_RECVFROM, SYS_WAIT4,
                                  assert_blocked_in_futex_forever, blocked_syscall, cmdline,
                                  cpu_ticks, fd_target, fd_targets, io, listening_inodes,
                                  socket_inodes, syscall, wait_until, wchan)

StartScenario = Callable[..., Scenario]

SYS_WRITE, SYS_FLOCK, SYS_CLOCK_NANOSLEEP, SYS_ACCEPT4 = 1, 73, 230, 288
SYS_SELECTS = (23, 270)                       # select, pselect6 (what glibc 2.36 uses)
LOCK_EX = 2
POOL_WORKERS = 8
TCP_ESTABLISHED, TCP_TIME_WAIT = "01", "06"

pytestmark = pytest.mark.skipif(os.uname().machine != "x86_64",
                                reason="syscall numbers are x86_64 Linux")


# ---------------------------------------------------------------- helpers

def call(pid: int, tid: int | None = None) -> int:
    """The syscall number a blocked thread sits in (waits while it is still on its way)."""
    return int(blocked_syscall(pid, tid)[0])


def thread_status(pid: int, tid: int, name: str) -> str:
    with open(f"/proc/{pid}/task/{tid}/status") as f:
        return next(line.split(":", 1)[1].strip() for line in f if line.startswith(name + ":"))


def tcp_rows() -> list[tuple[str, str, str, int]]:
    """(local, remote, state, inode) of every IPv4 TCP socket (inode 0: no owner, TIME_WAIT)."""
    rows = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        rows.append((f[1], f[2], f[3], int(f[9])))
    return rows


def tcp_table() -> dict[int, tuple[str, str, str]]:
    """{socket inode: (local, remote, state)} of the IPv4 TCP sockets a process holds."""
    return {inode: (local, remote, st) for local, remote, st, inode in tcp_rows() if inode}


def tcp_peers(a: int, b: int) -> bool:
    """Whether processes a and b hold the two ends of one established TCP connection."""
    table = tcp_table()
    ends_a = [table[i] for i in socket_inodes(a) if i in table]
    ends_b = {table[i][0]: table[i] for i in socket_inodes(b) if i in table}
    return any(st == TCP_ESTABLISHED and remote in ends_b and ends_b[remote][1] == local
               for local, remote, st in ends_a)


def holders(target: str, pids: list[int]) -> set[int]:
    """Which of *pids* hold an fd on *target* (a pipe:[N] or socket:[N] name); a process that
    exits meanwhile (the machine is shared) holds nothing."""
    out = set()
    for pid in pids:
        try:
            if target in fd_targets(pid).values():
                out.add(pid)
        except OSError:
            pass
    return out


def all_pids() -> list[int]:
    return [int(e) for e in os.listdir("/proc") if e.isdigit()]


def proc_locks() -> list[list[str]]:
    return [line.split() for line in Path("/proc/locks").read_text().splitlines()]


# ---------------------------------------------------------------- serving_tree

def check_serving_skeleton(sc: Scenario) -> tuple[int, int]:
    """What every shape shares: titles, the launcher's pipe, parked threads, the collective."""
    f = sc.facts
    tp0, tp1 = int(f["tp0"]), int(f["tp1"])
    assert sc.all_pids()[:3] == [sc.pid, tp0, tp1]
    assert cmdline(tp0)[0] == "sglang::scheduler_TP0" and cmdline(tp1)[0] == "sglang::scheduler_TP1"
    # the launcher reads the ready pipe forever; its only writers are the two schedulers
    args = blocked_syscall(sc.pid)
    assert int(args[0]) == SYS_READ, args
    pipe = fd_target(sc.pid, int(args[1], 16))
    assert pipe.startswith("pipe:[")
    assert holders(pipe, all_pids()) == {sc.pid, tp0, tp1}
    for rank, pid in ((0, tp0), (1, tp1)):
        main = pid_tid(f[f"main{rank}"])
        assert main == (pid, pid)
        assert_blocked_in_futex_forever(*main)              # queue.get() for the runner
        pool_pid, pool = pid_tids(f[f"pool{rank}"])
        assert pool_pid == pid and len(pool) == POOL_WORKERS
        for tid in pool:
            assert_blocked_in_futex_forever(pid, tid)
        assert len({syscall(pid, t)[1] for t in pool}) == 1  # one futex word: one wait
        store = pid_tid(f[f"store{rank}"])
        assert call(*store) == SYS_ACCEPT4
        assert set(socket_inodes(pid)) & set(listening_inodes())
        assert "anon_inode:[eventfd]" in fd_targets(pid).values()
        watchdog = pid_tid(f[f"watchdog{rank}"])
        assert wait_until(lambda: syscall(*watchdog)[0] == str(SYS_CLOCK_NANOSLEEP))
    assert tcp_peers(tp0, tp1), "the collective group's TCP connection"
    return tp0, tp1


def assert_watchdog_ticks(pid: int) -> None:
    """The watchdog writes the eventfd once a second (the process writes nothing else)."""
    w0, t0 = io(pid)["syscw"], time.monotonic()
    assert wait_until(lambda: io(pid)["syscw"] >= w0 + 2)
    assert io(pid)["syscw"] - w0 <= time.monotonic() - t0 + 2    # about once a second


def assert_spins(pid: int, tid: int) -> None:
    """On CPU in user space, never blocking: utime grows, no voluntary context switch."""
    assert syscall(pid, tid) == ["running"]
    u0, _ = cpu_ticks(pid, tid)
    v0 = thread_status(pid, tid, "voluntary_ctxt_switches")
    assert wait_until(lambda: cpu_ticks(pid, tid)[0] >= u0 + 2)
    assert thread_status(pid, tid, "voluntary_ctxt_switches") == v0
    assert read_stat(pid, tid)[2] == "R"


def assert_recv_on_collective(pid: int, tid: int, peer: int) -> None:
    args = blocked_syscall(pid, tid)
    assert int(args[0]) == SYS_RECVFROM, args
    sock = fd_target(pid, int(args[1], 16))
    inode = int(sock[len("socket:["):-1])
    local, remote, state = tcp_table()[inode]
    assert state == TCP_ESTABLISHED
    assert any(tcp_table()[i][0] == remote for i in socket_inodes(peer) if i in tcp_table())


def test_serving_spin(scenario: StartScenario) -> None:
    sc = scenario("serving_tree", "--shape", "spin", ready_timeout=40)
    tp0, tp1 = check_serving_skeleton(sc)
    f = sc.facts
    assert pid_tid(f["stuck"]) == pid_tid(f["runner0"])
    assert_spins(*pid_tid(f["runner0"]))
    assert_recv_on_collective(*pid_tid(f["runner1"]), peer=tp0)
    assert_watchdog_ticks(tp0)


def test_serving_dead_runner(scenario: StartScenario) -> None:
    sc = scenario("serving_tree", "--shape", "dead-runner", ready_timeout=40)
    tp0, tp1 = check_serving_skeleton(sc)
    f = sc.facts
    pid, dead = pid_tid(f["dead"])
    assert pid == tp1 and pid_tid(f["stuck"]) == (tp1, dead) == pid_tid(f["runner1"])
    assert dead not in thread_ids(tp1)                        # the runner thread is gone
    assert len(thread_ids(tp1)) == len(thread_ids(tp0)) - 1   # main, watchdog, store, 8 pool
    assert_recv_on_collective(*pid_tid(f["runner0"]), peer=tp1)
    assert_watchdog_ticks(tp1)


def jit_common(sc: Scenario) -> tuple[int, int, int]:
    """Both jit shapes: TP0's runner holds the cache lock and waits for its compiler child;
    TP1's runner waits for the lock (/proc/locks: TP0 holds, TP1 waits, one inode)."""
    tp0, tp1 = check_serving_skeleton(sc)
    f = sc.facts
    compiler, _ = pid_tid(f["compiler"])
    assert read_stat(compiler)[3] == str(tp0)
    args = blocked_syscall(*pid_tid(f["runner0"]))
    assert int(args[0]) == SYS_WAIT4 and int(args[1], 16) == compiler, args
    args = blocked_syscall(*pid_tid(f["runner1"]))
    assert int(args[0]) == SYS_FLOCK and int(args[2], 16) == LOCK_EX, args
    assert fd_target(tp1, int(args[1], 16)).endswith("kernel_cache.lock (deleted)")
    flocks = [line for line in proc_locks() if "FLOCK" in line]
    held = {line[5]: line[4] for line in flocks if line[1] == "FLOCK"}     # inode -> holder
    waiting = {line[6]: line[5] for line in flocks if line[1] == "->"}
    inode = next(i for i, holder in held.items() if holder == str(tp0))
    assert waiting.get(inode) == str(tp1)
    return tp0, tp1, compiler


def test_serving_jit_lock(scenario: StartScenario) -> None:
    sc = scenario("serving_tree", "--shape", "jit-lock", ready_timeout=40)
    tp0, tp1, compiler = jit_common(sc)
    assert sc.facts["cycle"] == f"{sc.facts['runner0']},{compiler}:{compiler}"
    # the compiler reads its source from a pipe whose only write end TP0 holds
    args = blocked_syscall(compiler)
    assert int(args[0]) == SYS_READ and int(args[1], 16) == 0, args
    pipe = fd_target(compiler, 0)
    assert pipe.startswith("pipe:[") and holders(pipe, all_pids()) == {tp0, compiler}
    w0 = io(compiler)["wchar"]
    time.sleep(0.5)
    assert io(compiler)["wchar"] == w0


def test_serving_jit_slow(scenario: StartScenario) -> None:
    sc = scenario("serving_tree", "--shape", "jit-slow", ready_timeout=40)
    tp0, tp1, compiler = jit_common(sc)
    assert pid_tid(sc.facts["waits_on"]) == (compiler, compiler)
    assert any(t.endswith("build-0.o (deleted)") for t in fd_targets(compiler).values())
    w0, t0 = io(compiler)["syscw"], time.monotonic()
    assert wait_until(lambda: io(compiler)["syscw"] >= w0 + 5)   # ~20 writes/s
    assert io(compiler)["syscw"] - w0 <= 25 * (time.monotonic() - t0) + 5


def test_serving_ok(scenario: StartScenario) -> None:
    sc = scenario("serving_tree", "--shape", "ok", ready_timeout=40)
    tp0, _ = check_serving_skeleton(sc)
    n0, w0 = sc.lines_after_ready, io(tp0)["syscw"]

    def tp0_steps() -> int:                   # TP0's step lines since n0
        new = sc.lines_after_ready - n0
        return sum(1 for line in list(sc.output)[-new:] if line.startswith("TP0 step ")) \
            if new > 0 else 0

    # both ranks log a step every 100 ms on a quiet machine; however long a busy one takes:
    assert wait_until(lambda: sc.lines_after_ready >= n0 + 6 and tp0_steps() >= 2), \
        (n0, sc.lines_after_ready, list(sc.output)[-8:])
    # PYTHONUNBUFFERED: six write()s a line (each piece and the newline) from TP0 alone; a
    # line read since n0 may have been written before w0 (the pipe holds it), so wait for two
    assert wait_until(lambda: io(tp0)["syscw"] - w0 >= 6 * 2), (w0, io(tp0))


def test_serving_private_files_are_gone(scenario: StartScenario) -> None:
    sc = scenario("serving_tree", "--shape", "jit-lock", ready_timeout=40)
    tp0 = int(sc.facts["tp0"])
    lock = next(t for t in fd_targets(tp0).values() if "kernel_cache.lock" in t)
    assert lock.endswith(" (deleted)")
    assert not Path(lock[:-len(" (deleted)")]).parent.exists()


# ---------------------------------------------------------------- the others

def test_unbuffered_logger(scenario: StartScenario, tmp_path: Path) -> None:
    log = tmp_path / "service.log"
    sc = scenario("unbuffered_logger", "--log", log)
    assert thread_ids(sc.pid) == [sc.pid]
    with open(f"/proc/{sc.pid}/environ", "rb") as f:
        assert b"PYTHONUNBUFFERED=1" in f.read().split(b"\0")
    assert fd_target(sc.pid, int(sc.facts["log"])) == str(log)
    n0, size0, before = sc.lines_after_ready, log.stat().st_size, io(sc.pid)
    # 3 lines to stdout and to the log: 36 write() calls (the first may be cut by the snapshot)
    assert wait_until(lambda: io(sc.pid)["syscw"] >= before["syscw"] + 36)
    after = io(sc.pid)
    writes, written = after["syscw"] - before["syscw"], after["wchar"] - before["wchar"]
    assert written / writes <= 8                              # every write looks like a wake-up
    assert wait_until(lambda: sc.lines_after_ready >= n0 + 2)
    assert log.stat().st_size > size0
    assert sc.output[-1].startswith("tick ")


def test_unbuffered_logger_default_log_leaves_nothing(scenario: StartScenario) -> None:
    sc = scenario("unbuffered_logger")
    assert fd_target(sc.pid, int(sc.facts["log"])).endswith(" (deleted)")


def test_pool_server(scenario: StartScenario) -> None:
    sc = scenario("pool_server")
    port, client = int(sc.facts["port"]), int(sc.facts["client"])
    assert sc.all_pids() == [sc.pid, client]
    assert call(sc.pid) == SYS_ACCEPT4
    listening = listening_inodes()
    assert [listening[i] for i in socket_inodes(sc.pid) if i in listening] == [port]
    workers = thread_ids(sc.pid)[1:]
    assert len(workers) == 4
    assert wait_until(lambda: all(syscall(sc.pid, t)[0] == str(SYS_FUTEX) for t in workers))
    hexport = f"{port:04X}"

    def answered() -> int:                    # the server closes first: its side in TIME_WAIT
        return sum(1 for local, _, st, _ in tcp_rows()
                   if local.endswith(":" + hexport) and st == TCP_TIME_WAIT)

    n0 = answered()
    assert wait_until(lambda: answered() >= n0 + 5)    # a new connection every 100 ms
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        c.sendall(b"GET /v1/health HTTP/1.0\r\n\r\n")
        reply = b""
        while chunk := c.recv(4096):
            reply += chunk
    assert reply.startswith(b"HTTP/1.0 200 OK")


def test_feeder_blocked(scenario: StartScenario) -> None:
    sc = scenario("feeder_blocked")
    f = sc.facts
    worker = int(f["worker"])
    assert sc.all_pids() == [sc.pid, worker]
    feeder, handler, main = pid_tid(f["feeder"]), pid_tid(f["handler"]), pid_tid(f["main"])
    args = blocked_syscall(*feeder)
    assert int(args[0]) == SYS_WRITE and int(args[3], 16) == 172 * 1024, args
    assert wchan(*feeder) == "anon_pipe_write"
    task_pipe = fd_target(sc.pid, int(args[1], 16))
    assert holders(task_pipe, [sc.pid, worker]) == {sc.pid, worker}   # the worker: its reader
    assert wait_until(lambda: int(syscall(*handler)[0]) in SYS_SELECTS)
    args = blocked_syscall(*main)
    assert int(args[0]) == SYS_READ
    result_pipe = fd_target(sc.pid, int(args[1], 16))
    assert holders(result_pipe, [sc.pid, worker]) == {sc.pid, worker}
    assert pid_tid(f["stuck"]) == (worker, worker)
    assert_blocked_in_futex_forever(worker, worker)
    assert thread_ids(worker) == [worker]                    # the lock's holder is not there


def test_watchdog_futex(scenario: StartScenario) -> None:
    sc = scenario("watchdog_futex", "--period", "0.5")
    f = sc.facts
    worker = int(f["worker"])
    assert sc.all_pids() == [sc.pid, worker]
    assert pid_tid(f["stuck"]) == (worker, worker)
    assert_blocked_in_futex_forever(worker, worker)
    watchdog = pid_tid(f["watchdog"])
    assert thread_ids(worker) == [worker, watchdog[1]]
    w0 = io(worker)["syscw"]
    assert wait_until(lambda: io(worker)["syscw"] >= w0 + 2)    # one byte each period
    assert wait_until(lambda: syscall(*watchdog)[0] == str(SYS_CLOCK_NANOSLEEP))
    args = blocked_syscall(sc.pid)
    assert int(args[0]) == SYS_READ
    pipe = fd_target(sc.pid, int(args[1], 16))
    assert holders(pipe, [sc.pid, worker]) == {sc.pid, worker}


def test_stopped_child(scenario: StartScenario) -> None:
    sc = scenario("stopped_child")
    worker = int(sc.facts["worker"])
    assert sc.all_pids() == [sc.pid, worker]
    assert pid_tid(sc.facts["stuck"]) == (worker, worker)
    assert read_stat(worker)[2] == "T"
    before = cpu_ticks(worker)
    args = blocked_syscall(sc.pid)
    assert int(args[0]) == SYS_READ
    pipe = fd_target(sc.pid, int(args[1], 16))
    assert holders(pipe, [sc.pid, worker]) == {sc.pid, worker}
    time.sleep(0.5)
    assert read_stat(worker)[2] == "T" and cpu_ticks(worker) == before
