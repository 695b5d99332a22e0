"""Hangtrace's own family, never recorded: itself, its ancestors (the shell, sshd, a terminal)
and its helper children (strace, py-spy). ``OwnFamily(roots)(pid)`` says whether ``pid`` is one;
``refuse_own_ancestors(pids)`` is ``watch``'s one-line refusal of an ancestor (record/session.py
re-exports both)."""
from __future__ import annotations

import os
from typing import Sequence

from ..errors import UsageError
from ..linux import access

__all__ = ["OwnFamily", "refuse_own_ancestors"]


def refuse_own_ancestors(pids: Sequence[int]) -> None:
    """UsageError, saying why, for the first of ``pids`` that is this process's ancestor: ``watch``
    refuses it, since the watched tree leaves hangtrace's family out, so what would be watched is
    not that process at all (``watch $$`` from a shell). ``attach`` records an ancestor root's
    other descendants instead (``OwnFamily``)."""
    mine = set(access.ancestors(os.getpid()))
    for pid in pids:
        if pid in mine:
            raise UsageError(f"pid {pid} is hangtrace's own ancestor (a shell or program it "
                             "runs under): watch leaves hangtrace and its ancestors out of "
                             "the tree it watches (their activity is its own output), so "
                             "nothing of that process would be watched; give the pid of the "
                             "process to watch")


class OwnFamily:
    """What must never be recorded: hangtrace itself, its ancestors, and its own helper
    children (strace, py-spy). Tracing an ancestor (the shell, sshd, a terminal) would trace
    hangtrace's own output: each line it prints makes the traced ancestor run syscalls, which
    strace reports to hangtrace, which prints them... and ptrace-stopping the terminal freezes
    it. A descendant of hangtrace is recorded only under a root that is itself one (``hangtrace
    demo`` attaches to the scenario it started; a test records the programs it started)."""

    def __init__(self, roots: Sequence[int] = ()) -> None:
        self.me = os.getpid()
        self.ancestors = set(access.ancestors(self.me))
        self.own_roots = [r for r in roots if r != self.me and access.descends_from(r, self.me)]

    def __call__(self, pid: int) -> bool:
        if pid == self.me or pid in self.ancestors:
            return True
        if pid in self.own_roots:
            return False
        chain = access.ancestors(pid)
        return self.me in chain and not any(r in chain for r in self.own_roots)
