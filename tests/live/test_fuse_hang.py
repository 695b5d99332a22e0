"""A read stuck on a FUSE mount, attached to with every backend (issue 42 items 3 and 4).

tests/fusefs.py serves a mount in pure Python; its tree is a launcher with two children, the
daemon and a reader. In "hang" mode the daemon never answers READ: the reader sits in read() in
state D (folio_wait_bit_common) before hangtrace attaches. The verdict is blocked, the reader's
wait goes to the daemon (the holder of the mount's /dev/fuse connection), the chain ends at the
daemon idle in read(/dev/fuse) while the reply is owed; strace, which cannot detach a thread in
D state, is stopped within its bound and the report says so; the reader is left untraced, still
in its read. In "slow" mode (one 4 KiB READ answered every 100 ms) the same tree progresses.
A reader that maps the file instead waits in D state inside a page fault: the daemon is named.
Each test leaves no mount behind (FuseTree detaches it, and the test checks mountinfo).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fusefs import MMAP_READER, FuseTree, mounted, thread_state
from test_attach_verdicts import attach_json
from test_safety import BACKENDS
from tracer import events as ev
from tracer.record.backends.strace_backend import KILL_WAIT_S, StraceBackend
from tracer.tracefile.format import TraceReader

pytestmark = [pytest.mark.live, pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/dev/fuse"), reason="needs root and /dev/fuse")]


def _tracer_pid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("TracerPid:"):
            return int(line.split()[1])
    return -1


def _thread(report: dict, pid: int) -> dict:
    proc = next(p for p in report["processes"] if p["pid"] == pid)
    return next(t for t in proc["threads"] if t["tid"] == pid)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_read_stuck_on_fuse_is_blocked_on_its_daemon(backend, tmp_path):
    trace = tmp_path / "t.htrace.gz"
    with FuseTree("hang") as t:
        t.wait_state("D")                         # inside read() before the attach
        report = attach_json(t.launcher, backend, 2.0, str(trace))
        assert thread_state(t.reader) == "D"      # still in its read...
        assert _tracer_pid(t.reader) == 0         # ...and nobody traces it any more
        assert thread_state(t.daemon) in ("S", "R")
        mountpoint = t.mountpoint
    assert not mounted(mountpoint)
    assert report["verdict"] == "blocked", report["root_cause"]
    reader = next(p for p in report["processes"] if p["pid"] == t.reader)
    assert [(w["kind"], w["pids"]) for w in reader["waits_on"]] == [("storage", [t.daemon])]
    assert "on the fuse mount " + mountpoint in reader["waits_on"][0]["what"]
    edges = [e for e in report["wait_graph"]["edges"] if e["src"] == f"T{t.reader}"]
    assert [(e["dst"], e["kind"]) for e in edges] == [(f"P{t.daemon}", "storage")]
    # the chain's next hop is the daemon, and it ends there: idle in read(/dev/fuse), owing
    assert report["root_cause"]["pid"] == t.daemon
    assert "read(/dev/fuse)" in report["root_cause"]["summary"]
    # the call in flight, from /proc/TID/syscall, whatever the backend: read of the file
    wait = _thread(report, t.reader)
    assert "read(3<" + mountpoint + "/data>)" in json.dumps(wait)
    if backend == "strace":
        said = json.dumps(report)
        assert f"thread {t.reader} is in uninterruptible sleep (D state)" in said
        assert "strace -y, not -yy" in said
    if backend in ("strace", "ebpf"):
        calls = [e for e in TraceReader(str(trace)).events()
                 if isinstance(e, ev.Syscall) and e.tid == t.reader and e.ongoing]
        assert [(c.name, c.fd) for c in calls] == [("read", 3)], calls


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_page_fault_stuck_on_fuse_is_blocked_on_its_daemon(backend, tmp_path):
    # a loader of mmap'd weights: in D state inside a page fault, outside any system call
    with FuseTree("hang", MMAP_READER) as t:
        t.wait_state("D")
        report = attach_json(t.launcher, backend, 2.0, str(tmp_path / "t.htrace.gz"))
        assert thread_state(t.reader) == "D" and _tracer_pid(t.reader) == 0
        mountpoint = t.mountpoint
    assert not mounted(mountpoint)
    assert report["verdict"] == "blocked", report["root_cause"]
    reader = next(p for p in report["processes"] if p["pid"] == t.reader)
    assert [(w["kind"], w["pids"]) for w in reader["waits_on"]] == [("storage", [t.daemon])]
    assert f"a page fault on {mountpoint}/data" in reader["waits_on"][0]["what"]
    assert report["root_cause"]["pid"] == t.daemon


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fuse_mount_that_answers_slowly_progresses(backend, tmp_path):
    with FuseTree("slow") as t:
        report = attach_json(t.launcher, backend, 2.0, str(tmp_path / "t.htrace.gz"))
        mountpoint = t.mountpoint
    assert not mounted(mountpoint)
    assert report["verdict"] == "progressing", report["root_cause"]
    assert report["exit_code"] == 0


def _stuck_stat(path: str) -> subprocess.Popen:
    """A process whose stat of ``path`` the daemon has read and will never answer, SIGKILLed:
    asleep in D state until the daemon dies. Tried again when the kill came before the daemon
    read the request (the kernel then ends the wait with EINTR)."""
    for _ in range(10):
        p = subprocess.Popen([sys.executable, "-c", f"import os; os.stat({path!r})"])
        deadline = time.monotonic() + 30
        while Path(f"/proc/{p.pid}/wchan").read_text() != "request_wait_answer":
            assert time.monotonic() < deadline and p.poll() is None
            time.sleep(0.05)
        time.sleep(0.5)
        p.kill()
        try:
            p.wait(1.0)                            # gone: the request was still pending
        except subprocess.TimeoutExpired:
            return p
    raise AssertionError("no stat got stuck")


def test_a_process_sigkill_cannot_reach_is_not_waited_for():
    # a stat of a file whose FUSE daemon read the request and never answers: once SIGKILLed
    # the caller sleeps uninterruptibly (fuse's request_wait_answer) until the daemon dies.
    # strace doing -yy's stat there is that caller: stop() gives up after KILL_WAIT_S.
    with FuseTree("stuck") as t:
        p = _stuck_stat(os.path.join(t.mountpoint, "data"))
        backend = StraceBackend()
        t0 = time.monotonic()
        backend._reap(p)
        assert time.monotonic() - t0 < KILL_WAIT_S + 3
        assert p.poll() is None and thread_state(p.pid) == "D"
        assert any("did not die within" in e for e in backend.errors), backend.errors
        mountpoint = t.mountpoint
    p.wait(10)                                     # the daemon's death ended its wait
    assert not mounted(mountpoint)
