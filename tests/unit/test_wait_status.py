"""A wait(2) status decoded in one place (tracer/linux/wait_status.py) and shown as words
everywhere: the snapshot's process line says "exited with status 3" where it printed
exit_code=768, as the analyzer's report does."""
from __future__ import annotations

import os
import subprocess

import pytest

from tracer.linux.wait_status import decode_wait_status, describe_wait_status
from tracer.record.targets import decode_wait_status as targets_decode


def _real_status(script: str) -> int:
    """A wait status the kernel made: a child run to its end, waited for."""
    pid = os.fork()
    if pid == 0:
        os.execv("/bin/sh", ["sh", "-c", script])
    return os.waitpid(pid, 0)[1]


@pytest.mark.parametrize("script, decoded, words", [
    ("exit 3", (3, None, False), "exited with status 3"),
    ("exit 0", (0, None, False), "exited with status 0"),
    ("exit 255", (255, None, False), "exited with status 255"),
    ("kill -KILL $$", (None, "SIGKILL", False), "killed by SIGKILL"),
    ("kill -TERM $$", (None, "SIGTERM", False), "killed by SIGTERM"),
])
def test_real_statuses(script, decoded, words):
    code = _real_status(script)
    assert decode_wait_status(code) == decoded
    assert describe_wait_status(code) == words


def test_table_of_status_words():
    assert describe_wait_status(768) == "exited with status 3"      # the zombie
    assert describe_wait_status(0x8B) == "killed by SIGSEGV (core dumped)"
    assert describe_wait_status(0x7E) == "killed by SIG126"
    assert targets_decode is decode_wait_status                      # one decoder


def test_the_snapshot_line_of_a_zombie_says_its_status():
    from rich.console import Console
    from tracer.render.snapshot import render_snapshot
    from tracer.snapshot_model import ProcessSnapshot, Snapshot
    snap = Snapshot(ts=0.0, host="h", roots=[41])
    snap.processes = [ProcessSnapshot(pid=42, ppid=41, comm="worker", cmdline=["worker"],
                                      state="Z", exit_code=3 << 8)]
    console = Console(record=True, width=120, color_system=None)
    render_snapshot(snap, console)
    text = console.export_text()
    assert "exited with status 3" in text and "exit_code=768" not in text
