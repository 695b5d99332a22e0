"""Live tests of the strace backend against small real processes (need strace + ptrace)."""
import os
import subprocess
import sys
import threading
import time

import pytest

from tracer import events as ev
from tracer.record.backends.base import TargetSet
from tracer.linux.procfs import tgid_of as read_tgid
from tracer.record.backends.strace_backend import StraceBackend

_backend = StraceBackend()
pytestmark = pytest.mark.skipif(_backend.check() is not None,
                                reason=f"strace backend unavailable: {_backend.check()}")

WORKER = r'''
import sys, threading, time
lock = threading.Lock(); lock.acquire()
threading.Thread(target=lock.acquire, daemon=True, name="stuck").start()
i = 0
while True:
    sys.stdout.write(f"line {i}\n"); sys.stdout.flush(); i += 1
    time.sleep(0.05)
'''


class Collector:
    def __init__(self):
        self.events = []
        self.lock = threading.Lock()

    def __call__(self, e):
        with self.lock:
            self.events.append(e)

    def of(self, cls):
        with self.lock:
            return [e for e in self.events if isinstance(e, cls)]


def proc_state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def strace_children(target=None):
    """strace processes left behind: our children, or any strace attached to ``target``.

    (Other strace runs on a shared machine are not ours and are ignored.)
    """
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                rest = f.read().rsplit(")", 1)
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        comm = rest[0].split("(", 1)[1]
        ppid = int(rest[1].split()[1])
        if comm != "strace":
            continue
        if ppid == os.getpid() or (target is not None and str(target) in argv):
            found.append(int(d))
    return found


def read_lines(pipe, n, timeout=3.0):
    """Read n lines from the worker's stdout (proves it is still running and writing)."""
    got = []
    deadline = time.time() + timeout
    while len(got) < n and time.time() < deadline:
        got.append(pipe.readline())
    return got


@pytest.fixture
def worker():
    p = subprocess.Popen([sys.executable, "-c", WORKER], stdout=subprocess.PIPE, text=True)
    read_lines(p.stdout, 3)
    yield p
    p.kill()
    p.wait()


def test_attach_record_stop_leaves_target_running(worker):
    got = Collector()
    b = StraceBackend()
    b.start(TargetSet([worker.pid]), got)
    drain = threading.Thread(target=read_lines, args=(worker.stdout, 30), daemon=True)
    drain.start()
    time.sleep(1.0)
    streamed = len(got.events)
    b.stop()
    n = len(got.events)
    b.stop()                                  # idempotent
    time.sleep(0.2)
    assert len(got.events) == n, "events after stop()"
    assert streamed > 0, "events should stream while recording, not only at stop"
    writes = [e for e in got.of(ev.WriteCall) if e.tid == worker.pid and e.fd == 1]
    # a write the stop caught inside the call (strace's "<unfinished ...>": likelier the busier
    # the machine) has no result yet: the finished ones carry their bytes
    done = [w for w in writes if not w.ongoing]
    assert len(done) >= 10 and len(writes) - len(done) <= 1, writes
    assert all(w.nbytes > 0 for w in done) and all(w.fd_kind == "pipe" for w in writes), \
        [w for w in writes if w.nbytes <= 0 or w.fd_kind != "pipe"]
    assert all(w.pid == worker.pid for w in writes)
    # the thread parked on the lock: a futex wait still in progress when we stopped
    stuck = [e for e in got.of(ev.FutexCall) if e.tid != worker.pid and e.ongoing]
    assert stuck and stuck[0].pid == worker.pid and stuck[0].op.startswith("WAIT")
    assert stuck[0].dur is not None and stuck[0].dur > 0.5
    assert b.errors == []
    # detached cleanly: no strace left, target not stopped, still running and writing
    assert strace_children(worker.pid) == []
    assert proc_state(worker.pid) not in ("t", "T")
    assert worker.poll() is None
    drain.join(timeout=3)
    assert all(line.startswith("line ") for line in read_lines(worker.stdout, 3))
    assert read_tgid(stuck[0].tid) == worker.pid


def test_target_exit_ends_backend_cleanly():
    p = subprocess.Popen([sys.executable, "-c",
                          "import time, sys\ntime.sleep(0.7)\nsys.exit(7)"])
    time.sleep(0.3)
    got = Collector()
    b = StraceBackend()
    b.start(TargetSet([p.pid]), got)
    deadline = time.time() + 10
    while b.running and time.time() < deadline:
        time.sleep(0.05)
    assert not b.running, "backend should notice strace exiting on its own"
    exits = got.of(ev.ProcessExit)
    assert [(e.pid, e.status) for e in exits] == [(p.pid, 7)]
    b.stop()
    assert strace_children() == []
    assert p.wait(timeout=5) == 7


def _traced(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as f:
        return next(line for line in f if line.startswith("TracerPid:")).split()[1] != "0"


def _until_traced(pid: int, deadline: float) -> None:
    """Until strace has attached ``pid`` (``deadline``, time.monotonic(): only bounds a hang)."""
    while not _traced(pid):
        assert time.monotonic() < deadline, "strace never attached"
        time.sleep(0.02)


def test_fork_child_added_to_targets():
    # it forks once strace has attached (a line on its stdin), however long that took
    code = ("import os, sys\nsys.stdin.readline()\npid = os.fork()\n"
            "if pid == 0:\n    os.execvp('sleep', ['sleep', '0.2'])\nos.waitpid(pid, 0)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
    got = Collector()
    targets = TargetSet([p.pid])
    b = StraceBackend()
    b.start(targets, got)
    deadline = time.monotonic() + 60           # only bounds a hang
    _until_traced(p.pid, deadline)
    p.stdin.write(b"\n")
    p.stdin.close()
    p.wait(timeout=60)
    deadline = time.time() + 5
    while b.running and time.time() < deadline:
        time.sleep(0.05)
    b.stop()
    starts = [e for e in got.of(ev.ThreadStart) if e.new_process]
    assert len(starts) == 1 and starts[0].pid in targets
    execs = got.of(ev.ProcessExec)
    assert execs and execs[0].pid == starts[0].pid
    # -s 0 prints argv as ""...; the backend reads the real one from /proc
    assert execs[0].argv == ["sleep", "0.2"] and execs[0].filename.endswith("sleep")


def test_attach_failure_reported():
    b = StraceBackend()
    got = Collector()
    b.start(TargetSet([2 ** 22 + 12345]), got)     # no such pid
    deadline = time.time() + 5
    while b.running and time.time() < deadline:
        time.sleep(0.05)
    b.stop()
    # Saved as an event (the trace keeps it): the thread was gone, not a permission problem.
    errs = got.of(ev.ObserveError)
    assert [(e.source, e.what, e.tid, e.denied) for e in errs] == \
        [("strace", "attach", 2 ** 22 + 12345, False)], errs
    assert "No such process" in errs[0].why
    assert strace_children() == []


def test_each_line_arrives_as_strace_prints_it_and_a_kill_loses_none():
    """strace's -o output is read as it is printed: a target that makes five writes and then
    blocks in a read has its five writes in the recording before stop(), its last call among
    them (a buffer that waited to fill, or for strace's exit, would hold them back); and a
    SIGKILLed strace loses nothing it printed: the read it was blocked in is still recorded,
    from strace's own line (the tid was seen, so no /proc stand-in), and the target runs on.
    strace 6.1 flushes its output at each line's end (line_ended -> fflush) and after a call's
    entry, also to a file or a pipe named by -o."""
    code = ("import os, sys\nfd = os.open('/dev/null', os.O_WRONLY)\nos.read(0, 1)\n"
            "for n in range(1, 6):\n    os.write(fd, b'x' * n)\nos.read(0, 1)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
    got = Collector()
    b = StraceBackend()
    try:
        b.start(TargetSet([p.pid]), got)
        deadline = time.monotonic() + 60           # only bounds a hang
        _until_traced(p.pid, deadline)
        p.stdin.write(b"g")
        p.stdin.flush()

        def writes():
            return sorted(e.nbytes for e in got.of(ev.WriteCall)
                          if e.tid == p.pid and e.fd_target == "/dev/null" and not e.ongoing)
        while writes() != [1, 2, 3, 4, 5]:
            assert time.monotonic() < deadline, f"before stop: {writes()}"
            time.sleep(0.02)
        while proc_state(p.pid) != "S":            # back in its read, strace has printed it
            assert time.monotonic() < deadline, proc_state(p.pid)
            time.sleep(0.02)
        os.kill(b._proc.pid, 9)
        b.stop()
    finally:
        b.stop()
    assert writes() == [1, 2, 3, 4, 5]
    reads = [e for e in got.of(ev.ReadCall) if e.tid == p.pid and e.ongoing]
    assert [(r.fd, r.fd_kind) for r in reads] == [(0, "pipe")], reads
    assert strace_children(p.pid) == [] and proc_state(p.pid) not in ("t", "T")
    assert p.poll() is None
    p.kill()
    p.wait()
