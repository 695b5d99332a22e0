"""Opening an input file someone named (a trace, an strace log): never blocking on it.

Contract: ``open_raw(path, error, pipes)`` returns the file opened for reading in binary, or
raises ``error`` with one line: missing, a directory, unreadable, a device or a socket (a
device such as /dev/zero never ends). A FIFO or pipe is read once, as it comes, when
``pipes`` (``analyze``, ``export``: one pass); else it is refused with a line saying why
(``merge`` and ``import-strace`` read their inputs more than once). Opening never blocks: a
FIFO is opened non-blocking and waited on for at most ``FIFO_WAIT`` seconds for a writer to
write or close (a FIFO without a writer gave no message and no end); ``check_rereadable``
refuses a FIFO before anything is opened.
"""
from __future__ import annotations

import os
import select
import stat
from typing import IO, Type

__all__ = ["FIFO_WAIT", "open_raw", "check_rereadable"]

FIFO_WAIT = 10.0


def _opened(path: str, error: Type[Exception]) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except PermissionError:
        raise error(f"{path}: permission denied") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory") from None
    except OSError as e:
        raise error(f"{path}: cannot open: {e.strerror}") from None


def _wait_for_writer(fd: int, path: str, error: Type[Exception]) -> None:
    poll = select.poll()
    poll.register(fd, select.POLLIN)
    if not poll.poll(FIFO_WAIT * 1000):
        raise error(f"{path}: is a FIFO with no writer (waited {FIFO_WAIT:g} s)")


def open_raw(path: str, error: Type[Exception], pipes: bool = True) -> IO[bytes]:
    """``path`` opened for reading (module doc)."""
    fd = _opened(path, error)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise error(f"{path}: is a directory")
        if stat.S_ISFIFO(mode):
            if not pipes:
                raise error(f"{path}: is a pipe (FIFO), not a regular file: it is read more "
                            "than once; save it to a file first")
            _wait_for_writer(fd, path, error)
        elif not stat.S_ISREG(mode):
            raise error(f"{path}: is a device or special file, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_rereadable(path: str, error: Type[Exception], why: str) -> None:
    """Refuse a FIFO or pipe at ``path`` (``why``: what reads it more than once), before
    anything opens it; other trouble is left to the reader."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if stat.S_ISFIFO(mode):
        raise error(f"{path}: is a pipe (FIFO): {why}; save it to a file first")
