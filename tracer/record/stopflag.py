"""What ends a recording early and keeps everything (the trace closed with its end record, the
report built): Ctrl-C, kill, and a hang-up (a terminal closed, an ssh session dropped).

Contract: ``StopFlag.install()`` (in the main thread only: signals reach no other) sets the
handlers of ``STOP_SIGNALS``; each signal sets ``signum`` and counts in ``count``, which the
recording loop reads (session.py); ``restore()`` puts the handlers that were there back.
"""
from __future__ import annotations

import signal
import threading
from typing import Optional

__all__ = ["STOP_SIGNALS", "StopFlag"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class StopFlag:
    """Set by STOP_SIGNALS while a recording runs; the recording loop reads it.

    The handler only assigns an attribute: no exception is raised at an arbitrary point (say,
    between writing an event and feeding it to the analyzer, or inside a queue's lock) and no
    lock is taken in the handler (Event.set() could wait on a lock its own thread holds), so
    stopping cannot deadlock. The loop notices within 0.1 s (its queue timeout)."""

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self.count = 0                  # signals so far (one after the window cuts its end)
        self._old: dict = {}

    def _handler(self, signum: int, frame: object) -> None:
        self.signum = signum
        self.count += 1

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return      # signals reach the main thread only; its owner stops us there
        for sig in STOP_SIGNALS:
            self._old[sig] = signal.signal(sig, self._handler)

    def restore(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        self._old.clear()
