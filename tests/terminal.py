"""Running a program on a pseudo-terminal, for the tests (and bench/) that check what it draws.

Contract: ``run_on_pty(argv, cols=.., rows=..)`` starts ``argv`` with a new pty of that size as
its stdout (and stdin, and stderr unless ``stderr`` says otherwise), reads everything it writes
until it closes the terminal or exits, and returns a :class:`PtyRun`: its exit status, the raw
bytes it wrote on the terminal, and what it wrote to a pipe (``stdout="pipe"``: a report on
stdout, a bar on the terminal). ``on_output(raw, terminal_fd)`` is called after each read with
everything read so far (to type Ctrl-C once a line appeared, say). ``timeout`` only bounds a
hang: past it the program is killed and AssertionError says what it had written. With
``controlling`` the pty is the program's controlling terminal (its own session), so Ctrl-C
typed on it reaches it as SIGINT. The environment is the test's, without COLUMNS, LINES and
NO_COLOR (the pty's size is what a program must read), with TERM=xterm-256color and ``env``'s
entries on top. ``plain(raw)``: the text with escape sequences and carriage returns removed.

Only the standard library: bench/ scripts import it too.
"""
from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import termios
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

__all__ = ["PtyRun", "run_on_pty", "plain", "ESCAPES"]

ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
OnOutput = Callable[[bytes, int], None]


@dataclass
class PtyRun:
    returncode: int
    raw: bytes              # everything written on the terminal
    stdout: bytes = b""     # what went to the pipe, with stdout="pipe"

    @property
    def text(self) -> str:
        """What was written on the terminal, escape sequences and carriage returns removed."""
        return plain(self.raw)


def plain(raw: bytes) -> str:
    return ESCAPES.sub("", raw.decode("utf-8", "replace")).replace("\r", "")


def _become_terminal_owner() -> None:
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def run_on_pty(argv: List[str], *, cols: int = 80, rows: int = 24, timeout: float = 120.0,
               stdout: str = "pty", stderr: str = "pty", env: Optional[Dict[str, str]] = None,
               cwd: Optional[str] = None, controlling: bool = False,
               on_output: Optional[OnOutput] = None) -> PtyRun:
    """(module doc) ``stdout``: "pty" or "pipe"; ``stderr``: "pty", "pipe" (read, dropped) or
    "devnull"."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    full_env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    full_env["TERM"] = "xterm-256color"
    full_env.update(env or {})
    err = {"pty": slave, "devnull": subprocess.DEVNULL, "pipe": subprocess.PIPE}[stderr]
    p = subprocess.Popen(argv, stdin=slave,
                         stdout=slave if stdout == "pty" else subprocess.PIPE, stderr=err,
                         env=full_env, cwd=cwd, close_fds=True,
                         preexec_fn=_become_terminal_owner if controlling else None)
    os.close(slave)
    raw, piped = bytearray(), bytearray()
    pipes = {f.fileno(): f for f in (p.stdout, p.stderr) if f is not None}
    open_fds = [master, *pipes]
    deadline = time.monotonic() + timeout
    try:
        while master in open_fds or pipes.keys() & set(open_fds):
            if time.monotonic() > deadline:
                raise AssertionError(f"{argv[:4]} still running after {timeout:.0f} s; it "
                                     f"wrote: {plain(bytes(raw[-3000:]))!r}")
            ready = select.select(open_fds, [], [], 0.2)[0]
            for fd in ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:          # EIO: every holder of the terminal closed it
                    data = b""
                if not data:
                    open_fds.remove(fd)
                elif fd == master:
                    raw += data
                    if on_output is not None:
                        on_output(bytes(raw), master)
                elif p.stdout is not None and fd == p.stdout.fileno():
                    piped += data
            # the program is gone but a child of it holds the terminal: stop reading
            if not ready and p.poll() is not None:
                break
        rc = p.wait(timeout=max(10.0, deadline - time.monotonic()))
    finally:
        os.close(master)
        for f in pipes.values():
            f.close()
        if p.poll() is None:
            p.kill()
            p.wait()
    return PtyRun(rc, bytes(raw), bytes(piped))
