"""The loops over what a target controls (symbols, sources, RAS answers) stopped inside them.

Contract:
- ``install(should_stop)`` / ``uninstall(should_stop)``: the recording's stop flag
  (record/stopflag.py's ``StopFlag.cut``) says here whether the work in progress must stop now.
  Process-wide, as the signals it stands for; one at a time (the one that holds the handlers).
- ``check(deadline=None)`` raises ``Cancelled`` (one line: why) when that says stop, or
  ``time.monotonic()`` passed ``deadline``; about 0.1 us when neither: loops call it every
  ``EVERY`` items (``checked(items)`` does; ``CheckedReader`` every 64 reads of a file) and
  waits go in slices of ``SLICE_S`` (``join``, ``wait``): a stop is seen within about 0.1 s.
- ``stopping()``: why, without raising (nothing installed: None). ``Cancelled`` is an
  ``Exception``: a probe's trouble line where it escapes one, never a crash.
"""
from __future__ import annotations

import threading
import time
from typing import BinaryIO, Callable, Iterable, Iterator, Optional, TypeVar, Union

__all__ = ["Cancelled", "CheckedReader", "install", "uninstall", "check", "checked", "stopping",
           "join", "wait", "EVERY", "SLICE_S"]

EVERY = 4096            # items between two checks: a symbol's read is ~0.3 us, a name's ~1 us
SLICE_S = 0.1           # the longest sleep between two checks of a wait

T = TypeVar("T")
StopSays = Callable[[], Optional[str]]

_installed: Optional[StopSays] = None


class Cancelled(Exception):
    """The work in progress was stopped: a signal ended the recording, or its deadline passed."""


def install(should_stop: StopSays) -> None:
    """``should_stop()`` -> why to stop now ("SIGTERM"), or None; it must not block."""
    global _installed
    _installed = should_stop


def uninstall(should_stop: StopSays) -> None:
    global _installed
    if _installed == should_stop:       # a bound method: equal, not the same object
        _installed = None


def stopping() -> Optional[str]:
    """Why the work in progress must stop now (a signal's name), or None."""
    says = _installed
    return says() if says is not None else None


def check(deadline: Optional[float] = None) -> None:
    """Raise ``Cancelled`` when a stop came or ``deadline`` (time.monotonic()) passed."""
    why = stopping()
    if why is not None:
        raise Cancelled(f"stopped: {why} ended the recording")
    if deadline is not None and time.monotonic() >= deadline:
        raise Cancelled("stopped: its time was spent")


def checked(items: Iterable[T], every: int = EVERY, deadline: Optional[float] = None
            ) -> Iterator[T]:
    """``items``, with ``check(deadline)`` before the first and every ``every`` after."""
    for i, item in enumerate(items):
        if i % every == 0:
            check(deadline)
        yield item


class CheckedReader:
    """A binary file as a parser (pyelftools) reads it, ``check(deadline)`` before every
    ``every``-th read: pyelftools reads a name 64 bytes at a time to its NUL, to the end of
    the file where there is none (a NUL-less table: millions of reads for one name)."""

    def __init__(self, f: BinaryIO, deadline: Optional[float] = None, every: int = 64) -> None:
        self._f, self._deadline, self._every, self._n = f, deadline, every, 0

    def read(self, size: int = -1) -> bytes:
        self._n += 1
        if self._n % self._every == 0:
            check(self._deadline)
        return self._f.read(size)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def __getattr__(self, name: str) -> object:
        return getattr(self._f, name)


def join(thread: threading.Thread, seconds: float) -> None:
    """``thread.join(seconds)`` in slices, each after ``check()``: a stop raises
    ``Cancelled`` (the thread, a daemon, is left to its own bound)."""
    until = time.monotonic() + max(seconds, 0.0)
    while thread.is_alive():
        check()
        left = until - time.monotonic()
        if left <= 0:
            return
        thread.join(min(left, SLICE_S))


def wait(event: Union[threading.Event, threading.Thread], seconds: float,
         stop: Optional[Callable[[], bool]] = None) -> bool:
    """Whether ``event`` is set (a thread: finished) within ``seconds``, waited for in slices;
    False as soon as ``stop()`` (default: ``stopping()``) says so. Never raises."""
    until = time.monotonic() + max(seconds, 0.0)
    done = event.is_set if isinstance(event, threading.Event) else (
        lambda: not event.is_alive())      # type: ignore[union-attr]
    while not done():
        if (stop() if stop is not None else stopping() is not None):
            return False
        left = until - time.monotonic()
        if left <= 0:
            return False
        if isinstance(event, threading.Event):
            event.wait(min(left, SLICE_S))
        else:
            event.join(min(left, SLICE_S))
    return True
