"""Live tier of issue 44 item 7: a device ioctl that never returns while another thread goes on.

tests/data/strace/programs/vt_wait.c opens /dev/tty7 (a virtual console), makes two ioctls on it
that return, starts a thread that polls an eventfd every 100 ms, and enters
``ioctl(fd, VT_WAITACTIVE, 7)``: nobody switches to console 7, so it never returns (the stand-in
for a CUDA start-up stuck in a /dev/nvidia-uvm ioctl; this machine has no NVIDIA driver). The
report must say blocked, with the main thread (in the ioctl) as the root cause, never the
ticking poller (on main: busy-waiting, the poller; the ioctl read as 'waits for terminal
input'). strace is not judged live: its attach interrupts VT_WAITACTIVE, which returns EINTR
rather than restart, and the program goes on (tests/data/strace/field/ioctl_never_returns_f.log
is strace's view of it, recorded from the exec).
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scenarios import REPO
from test_attach_verdicts import EBPF_PROBLEM
from truth_check import cause_named, verdict_ok

sys.path.insert(0, str(REPO / "fixtures" / "truth"))
from record import attach  # noqa: E402

pytestmark = pytest.mark.live

PROGRAM = REPO / "tests" / "data" / "strace" / "programs" / "vt_wait.c"
VT_GETSTATE = 0x5603


def _no_console() -> str:
    """Why this machine cannot run the program ('' when it can): /dev/tty7 a virtual console."""
    if shutil.which("gcc") is None:
        return "no gcc"
    try:
        fd = os.open("/dev/tty7", os.O_RDWR | os.O_NOCTTY)
    except OSError as e:
        return f"/dev/tty7: {e.strerror}"
    try:
        fcntl.ioctl(fd, VT_GETSTATE, b"\0" * 6)
    except OSError as e:
        return f"/dev/tty7 is no virtual console ({e.strerror})"
    finally:
        os.close(fd)
    return ""


NO_CONSOLE = _no_console()


@pytest.mark.skipif(bool(NO_CONSOLE), reason=NO_CONSOLE or "-")
@pytest.mark.parametrize("backend", [
    "proc", pytest.param("ebpf", marks=pytest.mark.skipif(EBPF_PROBLEM is not None,
                                                          reason=f"ebpf: {EBPF_PROBLEM}"))])
def test_a_device_ioctl_that_never_returns_is_the_root_cause(backend: str,
                                                             tmp_path: Path) -> None:
    exe = tmp_path / "vt_wait"
    subprocess.run(["gcc", "-O1", "-pthread", "-o", str(exe), str(PROGRAM)], check=True)
    proc = subprocess.Popen([str(exe)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and "waiting for vt 7" in proc.stdout.readline()
        time.sleep(0.5)                            # into the ioctl, the poller ticking
        report = attach(proc.pid, backend, 3.0, tmp_path / "t.htrace.gz")
        assert proc.poll() is None                 # the ioctl is still in flight
    finally:
        proc.kill()
        proc.wait()
    truth = {"verdict": "blocked", "also_acceptable": [],
             "root_cause": {"pid": proc.pid, "tid": proc.pid}}
    said = (report["verdict"], report["rule"], report["root_cause"].get("summary", "")[:300])
    assert verdict_ok(truth, report["verdict"]), said
    assert cause_named(truth, report["root_cause"]), said
