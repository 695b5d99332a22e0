"""The one small interface every recording backend implements (``Backend``).

Contract (each method's docstring says the rest):
- ``check()``: None when the backend can run here, else one line why not; no side effects.
- ``start(targets, emit)`` begins recording the trees of ``targets`` (record/targets.py's
  ``TargetSet``, walked once per recording) and returns quickly; ``emit(event)`` takes
  events/__init__.py objects only, from any thread. Backends never classify.
- ``stop()`` is idempotent and returns only when the backend has detached; no event after it.
  ``window_ends_at(t)`` (optional): when the window ends; ``helpers()``: its helper pids.
- ``errors``: one-line messages about trouble during recording (a target that vanished, a tool
  that died), for the report; ``notes``: one-line facts about how it recorded (which loader,
  how long attaching took), for the report's notes.
"""
from __future__ import annotations

from typing import Callable, List, Optional

from ...events import Event
from ..targets import TargetSet

Emit = Callable[[Event], None]
__all__ = ["Backend", "Emit", "TargetSet"]


class Backend:
    name: str = "base"

    def __init__(self) -> None:
        self.errors: List[str] = []
        self.notes: List[str] = []

    def check(self) -> Optional[str]:
        """None when the backend can run here, else one line saying why not (missing tool, no
        permission); it never raises and has no side effects."""
        raise NotImplementedError

    def start(self, targets: TargetSet, emit: Emit) -> None:
        """Begin recording the process trees in ``targets`` and return quickly; the backend calls
        ``emit(event)`` (thread-safe, from any thread) with events/__init__.py objects only.
        ``targets`` is record/targets.py's ``TargetSet``: the tree is walked once per recording
        (``targets.discover()``, which a backend calls too: it does nothing the second time) and
        every backend starts from what that walk found. A backend that sees a new process in the
        tree (fork/clone) calls ``targets.add(pid)`` so that other backends beside it follow it
        too."""
        raise NotImplementedError

    def window_ends_at(self, at: float) -> None:
        """The window ends at ``at`` (time.monotonic(); module doc); nothing by default."""

    def helpers(self) -> List[int]:
        """The pids of helper processes this backend started and still runs (module doc)."""
        return []

    def stop(self) -> None:
        """Idempotent, safe from a signal handler's aftermath and from ``finally`` blocks; returns
        only when the backend has detached: no strace child, probe or thread left behind, and the
        target never left stopped. After ``stop()`` no more events are emitted."""
        raise NotImplementedError
