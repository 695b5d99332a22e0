"""The one small interface every recording backend implements.

Contract:
- ``check()`` returns None when the backend can run here, else one line saying why not
  (missing tool, no permission); it never raises and has no side effects.
- ``start(targets, emit)`` begins recording the process trees in ``targets`` and returns quickly;
  the backend calls ``emit(event)`` (thread-safe, from any thread) with events/__init__.py objects only.
  Backends never classify: they report what happened.
- A backend that sees a new process in the tree (fork/clone) calls ``targets.add(pid)`` so that
  other backends running beside it follow it too.
- ``stop()`` is idempotent, safe from a signal handler's aftermath and from ``finally`` blocks,
  and returns only when the backend has detached: no strace child, probe or thread left behind,
  and the target never left stopped. After ``stop()`` no more events are emitted.
- ``errors`` collects one-line messages about trouble during recording (a target that vanished,
  a tool that died) for the report; ``notes``, one-line facts about how it recorded (which
  loader, how long attaching took), for the report's notes.
"""
from __future__ import annotations

import threading
from typing import Callable, Dict, Iterable, List, Optional, Set

from ...events import Event

Emit = Callable[[Event], None]


class TargetSet:
    """The pids being recorded (thread-safe); roots are what the user asked for.

    ``exclude(pid)`` (optional) names processes that must never be recorded, whoever finds
    them (hangtrace itself, its children and its ancestors: session.py): ``add`` refuses them
    and ``excluded`` says so; the answer is cached per pid.
    """

    def __init__(self, roots: Iterable[int],
                 exclude: Optional[Callable[[int], bool]] = None) -> None:
        self._exclude = exclude
        self._verdicts: Dict[int, bool] = {}
        self.roots: List[int] = list(roots)
        self._pids: Set[int] = {p for p in self.roots if not self.excluded(p)}
        self._lock = threading.Lock()

    def excluded(self, pid: int) -> bool:
        """True for a pid that must never be recorded (class doc)."""
        if self._exclude is None:
            return False
        known = self._verdicts.get(pid)
        if known is None:
            known = self._verdicts[pid] = bool(self._exclude(pid))
        return known

    def add(self, pid: int) -> bool:
        """Add a pid; True when it was new (False too for an excluded pid)."""
        if self.excluded(pid):
            return False
        with self._lock:
            if pid in self._pids:
                return False
            self._pids.add(pid)
            return True

    def discard(self, pid: int) -> None:
        with self._lock:
            self._pids.discard(pid)

    def pids(self) -> List[int]:
        with self._lock:
            return sorted(self._pids)

    def __contains__(self, pid: int) -> bool:
        with self._lock:
            return pid in self._pids


class Backend:
    name: str = "base"

    def __init__(self) -> None:
        self.errors: List[str] = []
        self.notes: List[str] = []

    def check(self) -> Optional[str]:
        raise NotImplementedError

    def start(self, targets: TargetSet, emit: Emit) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError
