"""A full disk (issue 46 item 10), on a small tmpfs this test mounts and unmounts: ``attach``
leaves no 0-byte trace and ``watch`` no cut report; each says one line and exits non-zero.
(The unit tier has the other output paths: tests/unit/test_output_paths.py.)"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List

import pytest

from tracer.record.session import Recorded
from tracer.record.watch import Watcher, WatchOptions
from tracer.report import Report

FILLER = "filler"


def _fill(directory: Path) -> None:
    """Fill the file system of ``directory`` to the last byte."""
    for name, size in ((FILLER, 4096), (FILLER + "2", 1)):   # then what a page left
        fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while True:
                os.write(fd, b"\0" * size)
        except OSError:
            pass
        finally:
            os.close(fd)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs mounted at tmp/disk (root only), unmounted at the end."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _left(directory: Path) -> List[str]:
    return sorted(n for n in os.listdir(directory) if not n.startswith(FILLER))


def _hangtrace(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracer", *args], capture_output=True,
                          text=True, timeout=120)


def test_attach_on_a_full_disk_leaves_no_trace(small_disk, sleeper) -> None:
    _fill(small_disk)
    p = _hangtrace("attach", str(sleeper), "-b", "proc", "-d", "0.5",
                   "-o", str(small_disk / "t.htrace.gz"))
    assert p.returncode == 1, p.stderr
    lines = p.stderr.splitlines()
    assert lines[-1].startswith("hangtrace: recording failed: No space left on device"), lines
    assert not any("trace saved" in line for line in lines)
    assert _left(small_disk) == []                      # no 0-byte trace


def test_watch_on_a_full_disk_leaves_no_file(small_disk, sleeper) -> None:
    _fill(small_disk)
    p = _hangtrace("watch", str(sleeper), "-b", "proc", "--silent-for", "0.5", "-d", "0.5",
                   "--interval", "0.2", "--once", "-o", str(small_disk))
    assert p.returncode == 1, p.stderr
    assert any(line.startswith("hangtrace: recording failed: No space left on device")
               for line in p.stderr.splitlines()), p.stderr
    assert _left(small_disk) == []


class _OneProcess:
    """watch's sampler for a tree that never makes progress."""
    name = None

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.notes: List[str] = []

    def look(self):  # type: ignore[no-untyped-def]
        import time
        from tracer.analysis.watch_rules import ProcessLook, TreeLook
        return TreeLook(ts=time.time(), processes={self.pid: ProcessLook(self.pid, 1, 0, None,
                                                                          comm="w")})

    def tree_roots(self, look) -> List[int]:  # type: ignore[no-untyped-def]
        return [self.pid]

    def close(self) -> None:
        pass


def test_watch_whose_report_does_not_fit_leaves_no_cut_report(small_disk) -> None:
    """The trace fits, then the disk is full: no cut .json or .txt is left, one line says so,
    and --once ends with 1, not the verdict's 0; the whole trace is kept."""
    def recorder(roots: List[int], output: str) -> Recorded:
        from tracer.outputs import create_fresh
        with create_fresh(output) as f:
            f.write(b"a whole trace")
            name = f.name
        _fill(small_disk)
        report = Report(verdict="idle", rule="process-thread-timed-wait",
                        root_cause={"pid": 7, "tid": 7, "summary": "w" * 20000}, processes=[],
                        window={"start": 1.0, "end": 2.0, "duration": 1.0}, backends=["proc"],
                        trace_path=name)
        return Recorded(report=report, trace_path=name, reason="complete")

    lines: List[str] = []
    w = Watcher(_OneProcess(os.getpid()), WatchOptions(silent_for=0.1, duration=1,
                                                       output_dir=str(small_disk),
                                                       max_captures=1, interval=0.05),
                say=lines.append, recorder=recorder, stack_sampler=lambda pids: [],
                driver_sampler=lambda pids: ([], "none"))
    code = w.run()
    assert code == 1, lines
    left = _left(small_disk)
    assert [n for n in left if n.endswith((".json", ".txt"))] == [], left
    assert len(left) == 1 and left[0].endswith(".htrace.gz"), left
    failed = [line for line in lines if line.startswith("capture failed")]
    assert len(failed) == 1 and "No space left on device" in failed[0], lines
    assert w.captures == []
