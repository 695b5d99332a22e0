"""Events that say a thread's run state where no /proc sample could (issue 22: a stopped
target, job control or SIGSTOP, is a cause of a hang of its own).

Contract: same rules as events/__init__.py (what was seen, never what it means). Importing this
module registers the classes (tracefile/format.py imports it, and so does what makes them).
- ``ThreadStopped``: the thread is in a group-stop (state T) since ``ts``, stopped by
  ``signal`` (SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU): strace prints ``--- stopped by SIGSTOP
  ---`` for each traced thread when it attaches to a stopped one or when one stops while
  traced (``source`` "strace", live or from a log). A later SIGCONT is a
  ``SignalDelivered``; the /proc backend's ``ThreadSample`` shows the same as state "T".
"""
from __future__ import annotations

from .. import events as _events
from . import Event
from .shapes import Int

__all__ = ["ThreadStopped"]


class ThreadStopped(Event, tag="stop"):
    pid: Int
    tid: Int
    signal: str = ""
    source: str = ""


_events.register(ThreadStopped)
