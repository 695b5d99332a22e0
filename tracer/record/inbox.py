"""The queue between the backends and the recording loop, bounded in size and in the time its
last drain may take.

Contract:
- ``Inbox(limit)``: ``put(event)`` is the backends' ``emit`` (any thread): it never blocks;
  past ``limit`` queued events the event is dropped and counted (``dropped``).
  ``get(timeout)`` is the recording loop's (queue.Empty when nothing came).
- ``drain(take, budget_s, interrupted)`` hands what is queued to ``take`` once the backends
  stopped, within a time budget (why: its docstring); returns the events left unread.
- ``lost(ts, left)``: the ``Lost`` events that say what was dropped and left unread (none
  when nothing was), for the trace and the report.
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Callable, List

from .. import events as ev

MAX_QUEUED = 200_000       # events: about 100 MB of them at the most
DRAIN_BUDGET_S = 0.5       # the longest the last drain may take
CHECK_EVERY = 256          # events between two looks at the clock and the stop flag


class Inbox:
    def __init__(self, limit: int = MAX_QUEUED) -> None:
        self._q: "queue.Queue[ev.Event]" = queue.Queue(maxsize=limit)
        self._lock = threading.Lock()
        self.dropped = 0

    def put(self, event: ev.Event) -> None:
        """The backends' ``emit`` (any thread). It never blocks (a blocked strace reader would
        leave the target stopped in ptrace): past ``limit`` queued events the event is dropped and
        counted (``dropped``)."""
        try:
            self._q.put_nowait(event)
        except queue.Full:
            with self._lock:
                self.dropped += 1

    def get(self, timeout: float) -> ev.Event:
        return self._q.get(timeout=timeout)

    def drain(self, take: Callable[[ev.Event], None], budget_s: float = DRAIN_BUDGET_S,
              interrupted: Callable[[], bool] = lambda: False) -> int:
        """Take what is queued, within ``budget_s`` and until ``interrupted()``;
        the number of events left unread.
        It runs until the queue is empty, ``budget_s`` seconds have passed or ``interrupted()``
        says a signal came since (looked at every ``CHECK_EVERY`` events). A fork storm queued
        events faster than the loop wrote them, and the unbounded drain at the end held ``attach -d
        2`` past 60 s, deaf to SIGTERM."""
        until = time.monotonic() + budget_s
        n = 0
        while True:
            try:
                e = self._q.get_nowait()
            except queue.Empty:
                return 0
            take(e)
            n += 1
            if n % CHECK_EVERY == 0 and (time.monotonic() >= until or interrupted()):
                return self._q.qsize()

    def lost(self, ts: float, left: int) -> List[ev.Lost]:
        out = []
        if self.dropped:
            out.append(ev.Lost(ts=ts, count=self.dropped,
                               reason=f"the backends sent more than {self._q.maxsize} events "
                               "faster than they could be written: the rest were dropped"))
        if left:
            out.append(ev.Lost(ts=ts, count=left, reason="still queued when the recording "
                               f"ended (the last drain is bounded to {DRAIN_BUDGET_S} s or a "
                               "signal): not read"))
        return out
