"""ProcBackend live: a child forked after the start, a thread stuck in a lock, an exit."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from tracer.record.backends.base import TargetSet
from tracer.record.backends.proc_backend import ProcBackend
from tracer.record.targets import decode_wait_status, initial_process_infos
from tracer.events import ProcessExit, ProcessInfo, ProcessIO, ThreadSample, ThreadStart
from tracer.linux.blocking import decode_blocking as describe_blocking
from tracer.linux.syscall_table import parse_proc_syscall

# Holds a lock forever in thread "stuck"; on "fork\n" starts a child that prints its pid and
# sleeps; on "exit N\n" exits with status N.
PROGRAM = textwrap.dedent("""
    import ctypes, os, subprocess, sys, threading, time
    lock = threading.Lock(); lock.acquire()
    def stuck():
        ctypes.CDLL(None).prctl(15, b"stuck", 0, 0, 0)
        lock.acquire()
    threading.Thread(target=stuck, daemon=True).start()
    print("ready", flush=True)
    kids = []
    for line in sys.stdin:
        if line == "fork\\n":
            kids.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))
            print(kids[-1].pid, flush=True)
        elif line.startswith("exit"):
            for k in kids: k.kill(); k.wait()
            os._exit(int(line.split()[1]))
""")


class Collector:
    def __init__(self):
        self.events = []
        self.cond = threading.Condition()

    def __call__(self, ev):
        with self.cond:
            self.events.append(ev)
            self.cond.notify_all()

    def wait_for(self, pred, timeout=5.0):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                hits = [e for e in self.events if pred(e)]
                if hits:
                    return hits
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("event not seen in time")
                self.cond.wait(left)


@pytest.fixture
def program():
    p = subprocess.Popen([sys.executable, "-c", PROGRAM], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "ready\n"
    yield p
    if p.poll() is None:
        p.kill()
    p.wait()


def test_decode_wait_status():
    assert decode_wait_status(3 << 8) == (3, None, False)
    assert decode_wait_status(9) == (None, "SIGKILL", False)
    assert decode_wait_status(11 | 0x80) == (None, "SIGSEGV", True)


def test_check():
    assert ProcBackend().check() is None
    assert "not readable" in ProcBackend(root="/nonexistent").check()


def test_live_fork_lock_and_exit(program):
    targets = TargetSet([program.pid])
    col = Collector()
    backend = ProcBackend(rate_hz=50, info_interval=0.2)
    backend.start(targets, col)
    try:
        # the stuck thread: futex wait without timeout
        samples = col.wait_for(lambda e: isinstance(e, ThreadSample) and e.comm == "stuck"
                               and e.syscall.startswith("202 "))
        block = describe_blocking(parse_proc_syscall(samples[0].syscall))
        assert block.call.startswith("futex(") and block.has_timeout is False
        assert samples[0].state == "S" and samples[0].wchan.startswith("futex")
        col.wait_for(lambda e: isinstance(e, ProcessIO) and e.pid == program.pid)

        # a child forked after the start is found, added and announced
        program.stdin.write("fork\n")
        program.stdin.flush()
        child = int(program.stdout.readline())
        infos = col.wait_for(lambda e: isinstance(e, ProcessInfo) and e.pid == child)
        assert infos[0].ppid == program.pid and child in targets
        assert col.wait_for(lambda e: isinstance(e, ThreadStart) and e.pid == child)[0].new_process

        # exit with status 3: the program stays a zombie (nobody waits yet) -> status from stat
        program.stdin.write("exit 3\n")
        program.stdin.flush()
        exits = col.wait_for(lambda e: isinstance(e, ProcessExit) and e.pid == program.pid)
        assert (exits[0].status, exits[0].signal) == (3, None)
        col.wait_for(lambda e: isinstance(e, ProcessExit) and e.pid == child)
    finally:
        backend.stop()
    backend.stop()  # idempotent
    n = len(col.events)
    time.sleep(0.05)
    assert len(col.events) == n  # nothing after stop()
    assert sum(1 for e in col.events if isinstance(e, ProcessExit) and e.pid == program.pid) == 1
    assert not backend._thread


def test_killed_process_reports_signal(program):
    col = Collector()
    backend = ProcBackend(rate_hz=50)
    backend.start(TargetSet([program.pid]), col)
    try:
        col.wait_for(lambda e: isinstance(e, ThreadSample))
        os.kill(program.pid, signal.SIGKILL)
        ex = col.wait_for(lambda e: isinstance(e, ProcessExit))[0]
        assert (ex.status, ex.signal) == (None, "SIGKILL")
    finally:
        backend.stop()


def test_reaped_process_exit_status_unknown(program):
    col = Collector()
    backend = ProcBackend(rate_hz=50)
    targets = TargetSet([program.pid])
    backend.prepare(targets, col)  # tick by hand
    program.kill()
    program.wait()  # reaped: /proc/PID is gone
    backend.tick()
    backend.tick()
    exits = [e for e in col.events if isinstance(e, ProcessExit)]
    assert len(exits) == 1 and exits[0].status is None and exits[0].signal is None


def test_one_tick_samples_every_one_of_101_threads():
    """(What a tick costs is bench/live_costs.py's: no wall-clock bound in a CI test.)"""
    code = ("import threading, sys\nev = threading.Event()\n"
            "[threading.Thread(target=ev.wait, daemon=True).start() for _ in range(100)]\n"
            "print('ready', flush=True); sys.stdin.read()")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        p.stdout.readline()
        col = Collector()
        backend = ProcBackend()
        backend.prepare(TargetSet([p.pid]), col)
        for _ in range(20):
            backend.tick()
        samples = [e for e in col.events if isinstance(e, ThreadSample)]
        assert len(samples) == 20 * 101
        assert len({e.tid for e in samples}) == 101 and {e.pid for e in samples} == {p.pid}
    finally:
        p.stdin.close()
        p.wait()


def test_initial_process_infos(program):
    program.stdin.write("fork\n")
    program.stdin.flush()
    child = int(program.stdout.readline())
    infos = initial_process_infos([program.pid])
    assert [i.pid for i in infos] == sorted([program.pid, child])
    assert len(infos[0].threads) == 2 and infos[0].fds
