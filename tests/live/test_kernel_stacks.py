"""Kernel stacks of stuck threads (issue 24) on this VM: a thread in D state made without FUSE
or NFS (a vfork parent whose child stopped itself before exec: the parent sleeps
uninterruptibly in the kernel until the child execs or exits), attached and snapshotted."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scenarios import Scenario

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("cc") is None,
                                reason="kernel stacks need root; the program needs cc")

# The parent prints READY then vforks; the child stops itself (SIGSTOP) before it could exec:
# the parent stays in D state in vfork (kernel_clone waits for the child's exec or exit).
VFORK_STOPPED_C = r"""
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
    printf("READY %d\n", getpid());
    fflush(stdout);
    if (vfork() == 0) { kill(getpid(), SIGSTOP); _exit(0); }
    return 0;
}
"""


@pytest.fixture
def vfork_stopped(tmp_path: Path):
    src = tmp_path / "vfork_stopped.c"
    src.write_text(VFORK_STOPPED_C)
    exe = tmp_path / "vfork_stopped"
    subprocess.run(["cc", "-O1", "-o", str(exe), str(src)], check=True, timeout=60)
    with Scenario("vfork_stopped", [str(exe)], settle=0.3) as sc:
        yield sc


def _hangtrace(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracer", *args], capture_output=True,
                          text=True, timeout=120)


def _thread(report: dict, pid: int) -> dict:
    p = next(p for p in report["processes"] if p["pid"] == pid)
    return next(t for t in p["threads"] if t["tid"] == pid)


def _ebpf_problem() -> str:
    from tracer.record.backends.ebpf.backend import EbpfBackend
    return EbpfBackend().check() or ""


# Not strace: its attach resumes a child stopped by SIGSTOP (ptrace restarts it), which ends
# the very state under test.
@pytest.mark.parametrize("backend", ["proc", "ebpf"])
def test_d_state_thread_shows_its_kernel_stack_and_verdict(vfork_stopped, tmp_path: Path,
                                                           backend: str) -> None:
    if backend == "ebpf" and _ebpf_problem():
        pytest.skip(f"ebpf: {_ebpf_problem()}")
    pid = vfork_stopped.pid
    trace = tmp_path / "t.htrace.gz"
    p = _hangtrace("attach", str(pid), "-d", "1.5", "-b", backend, "-o", str(trace), "--json")
    report = json.loads(p.stdout)
    t = _thread(report, pid)
    assert t["state"] == "D", t
    assert any("vfork" in f or "clone" in f for f in t["kernel_stack"]), t["kernel_stack"]
    # /proc alone sees a D-state thread in a call no rule waits in; eBPF sees vfork in flight
    assert t["verdict"] == "blocked" and t["rule"] in ("uninterruptible-sleep",
                                                       "blocked-without-timeout"), t
    assert any(e.startswith("in the kernel (D state): ") for e in t["evidence"]), t["evidence"]
    proc = next(q for q in report["processes"] if q["pid"] == pid)
    child = [q["pid"] for q in report["processes"] if q["ppid"] == pid]
    assert child and {q for w in proc["waits_on"] for q in w["pids"]} == set(child), proc
    again = json.loads(_hangtrace("analyze", str(trace), "--json").stdout)   # saved in the trace
    assert _thread(again, pid)["kernel_stack"] == t["kernel_stack"]
    text = _hangtrace("analyze", str(trace)).stdout
    assert "kernel: " in text and "in the kernel (D state)" in text, text


def test_snapshot_stacks_show_the_kernel_stack(vfork_stopped) -> None:
    pid = vfork_stopped.pid
    snap = json.loads(_hangtrace("snapshot", str(pid), "--stacks", "--json").stdout)
    proc = next(p for p in snap["processes"] if p["pid"] == pid)
    t = next(t for t in proc["threads"] if t["tid"] == pid)
    assert t["state"] == "D" and any("vfork" in f or "clone" in f for f in t["kernel_stack"])
    # the stopped child is not stuck in the kernel: no stack read for it
    child = next(p for p in snap["processes"] if p["ppid"] == pid)
    assert child["threads"][0]["kernel_stack"] == []
