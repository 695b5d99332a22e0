"""The end of a recording: its last look at the tree and its end probes, after the window or,
for a large tree, mostly in the window's last part, so that the trace ends on time.

Contract:
- ``Ending(probes, roots, ...)``: ``lead_s`` is 0 under ``EARLY_MIN_PROCESSES`` processes
  (the end runs whole after the window, as always), else when ``survey`` runs before the
  window's end: who did nothing since the start (stillness.py; never a root) and the probes
  that read every process. It says when ``early`` runs: the last look and the ``per_process``
  probes (probe_run.mark), for the others only (``notes`` says how many were left).
- ``late(pids, analyzer, take)``, once the backends stopped and their events were taken:
  what did not run before (all of it for a small tree). Each step returns trouble lines.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from .. import events as ev
from ..linux import procfs
from .probe_run import (END_PROBES_S, Probe, after_stop, beside, per_process, probe_name,
                        run_probes)
from .stillness import RunCounts

__all__ = ["Ending", "final_infos", "lead_for", "EARLY_MIN_PROCESSES", "MAX_LEAD_SHARE"]

EARLY_MIN_PROCESSES = 64   # a tree of fewer: its end after the window, whole, as it always was
MAX_LEAD_SHARE = 0.5       # of the window, at most, before its end for the survey
EARLY_FIXED_S = 0.2        # the early part's own: stack motion's pause, a root's stacks

Take = Callable[[ev.Event], None]
Trouble = List[Tuple[str, str]]
Interrupted = Callable[[], bool]


def final_infos(pids: List[int]) -> List[ev.ProcessInfo]:
    """The last look at the live processes: a ProcessInfo each (socket tables read once)."""
    out = []
    tables = procfs.SocketTables()
    for pid in pids:
        info = procfs.read_process_info(pid, tables=tables)
        if info is not None:
            out.append(info)
    return out


def lead_for(processes: int, start_cost_s: float, duration: float) -> float:
    """Seconds before the window's end at which a tree of ``processes`` is surveyed: 0 under
    ``EARLY_MIN_PROCESSES``, else its start's cost (the discovery and the start probes read
    the files the end reads of every process), at most ``MAX_LEAD_SHARE`` of the window."""
    if processes < EARLY_MIN_PROCESSES:
        return 0.0
    return min(max(start_cost_s, 0.0), MAX_LEAD_SHARE * duration)


class Ending:
    """The end of one recording (module doc)."""

    def __init__(self, probes: Sequence[Probe], roots: Sequence[int], *, lead_s: float = 0.0,
                 counts: Optional[RunCounts] = None, cut_before: Sequence[str] = (),
                 ptraced: bool = False, start_cost_s: float = 0.0) -> None:
        self.probes, self.roots, self.lead_s = probes, set(roots), lead_s
        self.counts, self.cut_before, self.ptraced = counts, set(cut_before), ptraced
        self.start_cost_s = start_cost_s
        self.began: Optional[float] = None       # the end's first /proc read (its budget)
        self.ran: Set[str] = set()               # names of the probes run before the stop
        self.still: Optional[Set[int]] = None    # who did nothing, as the survey saw it
        self.notes: List[str] = []               # for the report: who was not read again
        self.looked = False                      # the last look taken (early)

    def _start(self) -> float:
        if self.began is None:
            self.began = time.monotonic()
        return self.began

    def _run(self, probes: Sequence[Probe], pids: List[int], analyzer: object, take: Take,
             interrupted: Interrupted, still: Set[int] = frozenset()) -> Trouble:  # type: ignore
        self.ran.update(probe_name(p) for p in probes)
        return run_probes(probes, pids, analyzer, take, budget_s=END_PROBES_S,
                          began=self._start(), cut_before=self.cut_before,
                          interrupted=interrupted, still=still)[0]

    def _still(self, pids: List[int], analyzer: object) -> Set[int]:
        """The processes that did nothing since the start, less the roots (stillness.py:
        ``quiet`` where ptrace's attach woke every thread, else ``still``)."""
        if self.counts is None:
            return set()
        if not self.ptraced:
            return self.counts.still(pids) - self.roots
        callers = getattr(analyzer, "callers", None)
        if callers is None:
            return set()
        return self.counts.quiet(pids, callers(pids)) - self.roots

    def survey(self, pids: List[int], analyzer: object, take: Take,
               interrupted: Interrupted = lambda: False) -> Tuple[float, Trouble]:
        """(seconds ``early`` will need, trouble): who did nothing, then the probes that
        read every process (module doc). ``early`` is given what the start cost for the
        others, half again (the end reads more: libraries, stacks), the survey's look twice
        (it looks again) and ``EARLY_FIXED_S``."""
        t0 = self._start()
        self.still = self._still(pids, analyzer)
        look = time.monotonic() - t0
        whole = [p for p in self.probes if not after_stop(p) and not per_process(p)]
        trouble = self._run(whole, pids, analyzer, take, interrupted)
        active = len(pids) - len(self.still)
        need = 2 * look + 1.5 * self.start_cost_s * active / max(len(pids), 1) + EARLY_FIXED_S
        return min(need, self.lead_s), trouble

    def early(self, pids: List[int], analyzer: object, take: Take,
              interrupted: Interrupted = lambda: False) -> Trouble:
        """The window's last part (module doc): those still at the survey looked at again,
        the last look and the ``per_process`` probes for the others."""
        self._start()
        surveyed = self.still if self.still is not None else set(pids)
        still = self._still([p for p in pids if p in surveyed], analyzer)
        for info in final_infos([p for p in pids if p not in still]):
            take(info)
        self.looked = True
        now = [p for p in self.probes if not after_stop(p) and probe_name(p) not in self.ran]
        trouble = self._run_beside(now, pids, analyzer, take, interrupted, still)
        if still:
            how = ("no call, fault or user tick" if self.ptraced else "their threads' run counts")
            skipped = "".join(", " + probe_name(p) for p in now if per_process(p))
            self.notes.append(f"{len(still)} of {len(pids)} processes did nothing since the "
                              f"start ({how}): the last look{skipped} read only the others "
                              "(what the start read of those stands)")
        return trouble

    def _run_beside(self, probes: List[Probe], pids: List[int], analyzer: object,
                    take: Take, interrupted: Interrupted, still: Set[int]) -> Trouble:
        """``probes`` run, those marked ``beside`` (probe_run.mark) in a thread of their own
        while the others run here; their events are taken after, in the probes' order."""
        side = [p for p in probes if beside(p)]
        rest = [p for p in probes if not beside(p)]
        if not side or not rest:
            return self._run(probes, pids, analyzer, take, interrupted, still)
        got: Dict[bool, List[ev.Event]] = {True: [], False: []}
        trouble: Dict[bool, Trouble] = {}

        def run(on_side: bool) -> None:
            trouble[on_side] = self._run(side if on_side else rest, pids, analyzer,
                                         got[on_side].append, interrupted, still)
        helper = threading.Thread(target=run, args=(True,), name="hangtrace-stacks",
                                  daemon=True)
        helper.start()
        run(False)
        helper.join()
        first = probes.index(side[0]) < probes.index(rest[0])
        for e in got[first] + got[not first]:
            take(e)
        return trouble.get(True, []) + trouble[False]

    def late(self, pids: List[int], analyzer: object, take: Take,
             interrupted: Interrupted = lambda: False) -> Trouble:
        """After the backends stopped (module doc)."""
        self._start()
        if not self.looked:
            for info in final_infos(pids):
                take(info)
        rest = [p for p in self.probes if probe_name(p) not in self.ran]
        return self._run(rest, pids, analyzer, take, interrupted)
