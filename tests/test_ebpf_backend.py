"""Live tests of the eBPF backend: real scenario programs recorded through tracer.record.session.record.

Skipped (with the backend's own reason) where EbpfBackend().check() is not None: not root, no
BCC, no kernel headers (scripts/setup-ebpf.sh sets them up). The expected verdicts are the ones
tests/test_live.py's CASES give for every backend.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from test_live import CASES
from tracer import events as ev
from tracer.record.backends.ebpf_backend import EbpfBackend
from tracer.record.session import record
from tracer.tracefile.format import TraceReader

_WHY = EbpfBackend().check()
pytestmark = [pytest.mark.live, pytest.mark.skipif(_WHY is not None, reason=str(_WHY))]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bpf_fds() -> int:
    """Our process's fds that refer to a BPF program, map or link."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("anon_inode:bpf") or target.startswith("anon_inode:[perf_event]"):
            n += 1
    return n


def _read_events(path: str) -> list:
    return list(TraceReader(path).events())


NAMES = ["spin", "sglang_like", "lock_order_deadlock", "py_deadlock", "idle_server",
         "pipe_deadlock", "dead_worker", "healthy_worker", "yield_spin"]


@pytest.mark.parametrize("name", NAMES)
def test_ebpf_gives_the_right_verdict(scenario, name, tmp_path):
    case = CASES[name]
    sc = scenario(name)
    before = _bpf_fds()
    backend = EbpfBackend()
    rec = record([sc.pid], [backend], duration=case.duration, output=str(tmp_path / "t.gz"))
    case.check(rec.report.to_json(), sc)
    assert sc.alive(), "the target must survive being traced"
    assert backend._bpf is None and _bpf_fds() == before, "BPF objects left loaded"
    assert rec.errors == [], rec.errors


def test_stop_is_idempotent_and_unloads_everything(scenario):
    sc = scenario("py_deadlock")
    before = _bpf_fds()
    got: list = []
    b = EbpfBackend()
    from tracer.record.backends.base import TargetSet
    b.start(TargetSet([sc.pid]), got.append)
    assert _bpf_fds() > before
    assert b.attach_s is not None and b.attach_s < 10
    b.stop()
    b.stop()
    assert _bpf_fds() == before
    n = len(got)
    time.sleep(0.3)
    assert len(got) == n, "nothing is emitted after stop()"
    ongoing = [e for e in got if isinstance(e, ev.FutexCall) and e.ongoing]
    assert len(ongoing) >= 3, "threads blocked since before the attach show as ongoing"
    assert all(e.ret is None and e.timeout is None for e in ongoing)
    assert any(isinstance(e, ev.ThreadCpu) for e in got)
    assert sum(isinstance(e, ev.ThreadSample) for e in got) >= 6   # at start and at stop
    if os.path.exists("/usr/sbin/bpftool"):
        progs = subprocess.run(["/usr/sbin/bpftool", "prog", "list"], capture_output=True,
                               text=True).stdout
        assert f"({os.getpid()})" not in progs, "a BPF program of ours is still loaded"


def test_target_exiting_mid_recording_ends_with_process_exit(tmp_path):
    p = subprocess.Popen([sys.executable, "-c",
                          "import time, sys\ntime.sleep(3)\nsys.exit(7)"])
    try:
        rec = record([p.pid], [EbpfBackend()], duration=20, output=str(tmp_path / "t.gz"))
    finally:
        p.wait(timeout=10)
    assert rec.reason == "targets-exited"
    exits = [e for e in _read_events(str(tmp_path / "t.gz")) if isinstance(e, ev.ProcessExit)]
    assert exits and exits[0].pid == p.pid
    assert exits[0].status in (7, None)   # None when our parent reaped it before /proc was read


def test_flood_is_rate_limited_and_accounted_as_lost(tmp_path):
    src, exe = os.path.join(REPO, "bench", "sysloop.c"), str(tmp_path / "sysloop")
    subprocess.run(["gcc", "-O2", "-o", exe, src], check=True)
    p = subprocess.Popen(["sh", "-c", f"sleep 2; exec {exe} 3000000"])
    try:
        rec = record([p.pid], [EbpfBackend()], duration=6, output=str(tmp_path / "t.gz"))
    finally:
        p.kill()
        p.wait()
    evs = _read_events(str(tmp_path / "t.gz"))
    lost = [e for e in evs if isinstance(e, ev.Lost)]
    assert lost and sum(e.count for e in lost) > 10000, lost
    assert any(isinstance(e, ev.ProcessExec) for e in evs)
    writes = [e for e in evs if isinstance(e, ev.WriteCall)]
    assert writes and {e.fd_kind for e in writes} >= {"null"}
    summaries = [e for e in evs if type(e) is ev.Syscall and "counted in kernel" in e.args]
    assert summaries
    assert "lost" in " ".join(rec.report.notes)
