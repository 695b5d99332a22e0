"""watch on a parent that reaps a child which wrote 50,000 bytes: the kernel adds the child's
I/O to the parent's /proc/PID/io when it reaps it (wait_task_zombie); the parent's own output
between the two looks is what it wrote itself, nothing (linux/reaped_io.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tracer.record.watch_looks import TreeSampler

PARENT = ("import os, signal, sys\n"
          "pid = os.fork()\n"
          "if pid == 0:\n"
          "    fd = os.open('/dev/null', os.O_WRONLY)\n"
          "    for _ in range(50):\n"
          "        os.write(fd, b'x' * 1000)\n"
          "    with open(sys.argv[1], 'w') as f:\n"
          "        f.write(str(os.getpid()))\n"
          "    signal.pause()\n"
          "os.wait()\n"
          "signal.pause()\n")


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "X"
    except OSError:
        return True


def test_a_reaped_childs_output_is_not_its_parents(tmp_path) -> None:
    ready = tmp_path / "child.pid"
    # through a shell that exits: not our child (the watcher leaves its own children out)
    sh = subprocess.run(["sh", "-c", '"$0" -c "$1" "$2" >/dev/null 2>&1 </dev/null & echo $!',
                         sys.executable, PARENT, str(ready)],
                        capture_output=True, text=True, timeout=30, check=True)
    parent, child = int(sh.stdout.strip()), 0
    try:
        deadline = time.monotonic() + 60            # only bounds a hang
        while not (ready.exists() and ready.read_text()):
            assert time.monotonic() < deadline, "the child never wrote"
            time.sleep(0.02)
        child = int(ready.read_text())
        sampler = TreeSampler([parent], tcp=False, nvml=None)
        first = sampler.look()
        assert child in first.processes and first.processes[child].io.wchar >= 50_000
        os.kill(child, signal.SIGTERM)
        while not _gone(child):                     # the parent's wait reaps it
            assert time.monotonic() < deadline, "the child was not reaped"
            time.sleep(0.02)
        second = sampler.look()
        before, after = first.processes[parent].io, second.processes[parent].io
        assert after.wchar - before.wchar < 1000, (before, after)
        assert after.syscw - before.syscw < 5, (before, after)
    finally:
        for pid in (child, parent):
            if pid and not _gone(pid):
                os.kill(pid, signal.SIGKILL)
