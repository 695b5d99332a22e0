"""What ends a recording early and keeps everything (the trace closed with its end record, the
report built): Ctrl-C, kill, and a hang-up (a terminal closed, an ssh session dropped).

Contract: ``StopFlag.install()`` (in the main thread only: signals reach no other) sets the
handlers of ``STOP_SIGNALS`` and installs ``cut`` as linux/cancel.py's stop, so that the loops
over a target's data stop inside them; each signal sets ``signum`` and counts in ``count``, which
the recording loop reads (session.py); ``restore()`` puts the handlers that were there back.
``cut()``: the work in progress must stop now: a signal before the window opened or after it
closed, a second signal, or ``STOP_GRACE_S`` after the one that ended the window (the end's
probes have that long); ``window_opened()``/``window_closed()`` say where the recording is.
"""
from __future__ import annotations

import signal
import threading
import time
from typing import Optional

from ..linux import cancel

__all__ = ["STOP_SIGNALS", "STOP_GRACE_S", "StopFlag"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
STOP_GRACE_S = 1.0      # the end after a signal that ended the window: stacks, the last look


class StopFlag:
    """Set by STOP_SIGNALS while a recording runs; the recording loop reads it.

    The handler only assigns attributes: no exception is raised at an arbitrary point (say,
    between writing an event and feeding it to the analyzer, or inside a queue's lock) and no
    lock is taken in the handler (Event.set() could wait on a lock its own thread holds), so
    stopping cannot deadlock. The loop notices within 0.1 s (its queue timeout); the loops over
    a target's data within ``cancel.EVERY`` items (linux/cancel.py)."""

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self.count = 0                  # signals so far (one after the window cuts its end)
        self.at: Optional[float] = None  # time.monotonic() of the first
        self.graced = False             # the first came while the window was open
        self._open = False
        self._old: dict = {}

    def _handler(self, signum: int, frame: object) -> None:
        if self.at is None:
            self.at, self.graced = time.monotonic(), self._open
        self.signum = signum
        self.count += 1

    def window_opened(self) -> None:
        self._open = True

    def window_closed(self) -> None:
        self._open = False

    def cut(self) -> bool:
        """Whether the work in progress must stop now (module doc)."""
        if not self.count:
            return False
        if self.count > 1 or not self.graced or self.at is None:
            return True
        return time.monotonic() - self.at >= STOP_GRACE_S

    def why(self) -> Optional[str]:
        """The signal's name when ``cut()``, else None (linux/cancel.py's stop)."""
        if self.signum is None or not self.cut():
            return None
        return signal.Signals(self.signum).name

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return      # signals reach the main thread only; its owner stops us there
        for sig in STOP_SIGNALS:
            self._old[sig] = signal.signal(sig, self._handler)
        cancel.install(self.why)

    def restore(self) -> None:
        cancel.uninstall(self.why)
        for sig, old in self._old.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        self._old.clear()
