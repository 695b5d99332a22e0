"""The end of a recording: its last look at the tree and its end probes, mostly in the window's
last part, so that the report comes soon after the window.

Contract:
- ``Ending(probes, roots, ...)``: ``lead_s`` > 0 (``EARLY_MIN_PROCESSES`` processes or more)
  has ``survey`` and ``early`` run before the window's end (their docstrings), for those that
  did something since the start; ``notes`` says how many were left.
- ``start_window(alive, window_end)`` (``lead_s`` 0): the probes marked ``in_window`` run in
  the window's last part, beside the recording (its docstring); ``window_over()``: it ended.
- ``late(pids, analyzer, take)`` after the stop: the rest, then what the window part gave.
  The end's budget (``END_PROBES_S``) counts from the window's end; each step returns trouble.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from .. import events as ev
from ..linux import cancel, procfs
from .probe_run import (END_PROBES_S, Probe, after_stop, beside, in_window, per_process,
                        probe_name, run_probes)
from .stillness import RunCounts

__all__ = ["Ending", "final_infos", "lead_for", "window_lead", "EARLY_MIN_PROCESSES",
           "MAX_LEAD_SHARE", "WINDOW_WORK_S"]

EARLY_MIN_PROCESSES = 64   # a tree of fewer: its end after the window, whole, as it always was
MAX_LEAD_SHARE = 0.5       # of the window, at most, before its end for the survey
EARLY_FIXED_S = 0.2        # the early part's own: stack motion's pause, a root's stacks
# the window thread's work on a quiet machine: stack motion's samples (8, 0.12 s apart) and a
# py-spy dump of each Python process (about 0.3 s for 9 of 100 threads each, 2 cores)
WINDOW_WORK_S = 1.4
# the window's probes bound themselves by the end's budget, but for the deciding processes'
# stacks, which only py-spy's own time bounds (pystacks.py): waited for as long
WINDOW_WAIT_S = 10.0

Take = Callable[[ev.Event], None]
Trouble = List[Tuple[str, str]]
Interrupted = Callable[[], bool]


def final_infos(pids: List[int]) -> List[ev.ProcessInfo]:
    """The last look at the live processes: a ProcessInfo each (socket tables read once)."""
    out = []
    tables = procfs.SocketTables()
    for pid in cancel.checked(pids, every=64):
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


def window_lead(duration: float, load: Optional[float] = None,
                cpus: Optional[int] = None) -> float:
    """Seconds before the window's end at which the window thread begins: ``WINDOW_WORK_S``
    times the share of a CPU it can expect (the run queue's length, ``load`` (the last
    minute's average: os.getloadavg) over ``cpus``, at least 1: at load 4 on 2 cores, 2.5),
    at most ``MAX_LEAD_SHARE`` of the window."""
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = 0.0
    cpus = cpus or os.cpu_count() or 1
    return min(WINDOW_WORK_S * max(1.0, (load + 1.0) / cpus), MAX_LEAD_SHARE * duration)


class _WindowPart:
    """The window thread's state (Ending.start_window): per probe, its events and trouble
    once it has finished (``done``), kept until the recording's thread takes them."""

    def __init__(self, probes: Sequence[Probe]) -> None:
        self.probes = list(probes)
        self.events: List[List[ev.Event]] = [[] for _ in probes]
        self.trouble: List[Trouble] = [[] for _ in probes]
        self.done = [threading.Event() for _ in probes]
        self.wake = threading.Event()          # the window ended early: begin now

    def finished(self) -> bool:
        return all(d.is_set() for d in self.done)


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
        self.window_end: Optional[float] = None  # time.monotonic() of the window's end
        self.window: Optional[_WindowPart] = None

    def _start(self) -> float:
        """When the end's budget began: the window's end (``start_window``, ``window_over``),
        else the end's first /proc read."""
        if self.window_end is not None:
            return self.window_end
        if self.began is None:
            self.began = time.monotonic()
        return self.began

    def start_window(self, alive: Callable[[], List[int]], window_end: float,
                     interrupted: Interrupted = lambda: False,
                     lead_s: Optional[float] = None,
                     at_begin: Callable[[], None] = lambda: None) -> None:
        """Start the window thread (module doc): ``alive()`` gives the live targets when it
        begins, ``window_end`` is time.monotonic() at the window's end; ``lead_s`` by default
        ``window_lead`` of the window left; ``at_begin()`` runs in it first (the end's
        priority: session.py). Nothing for a tree the survey reads (``lead_s``: its early part
        reads the same, in the window) or without such probes."""
        self.window_end = window_end
        mine = [p for p in self.probes if in_window(p) and not after_stop(p)]
        if self.lead_s > 0 or not mine:
            return
        lead = window_lead(max(window_end - time.monotonic(), 0.0)) if lead_s is None \
            else lead_s
        part = self.window = _WindowPart(mine)
        self.ran.update(probe_name(p) for p in mine)

        def one(k: int) -> None:
            try:
                part.trouble[k] = run_probes([mine[k]], pids, None, part.events[k].append,
                                             budget_s=END_PROBES_S, began=self._start(),
                                             cut_before=self.cut_before,
                                             interrupted=interrupted)[0]
            except Exception as exc:  # noqa: BLE001 - extra evidence: never the recording
                part.trouble[k].append((probe_name(mine[k]), f"failed in the window: {exc}"))
            finally:
                part.done[k].set()

        def begin() -> None:
            """At ``lead`` before the window's end: each probe in a thread of its own (they
            wait on py-spy or on the time between samples: stack motion's second of samples
            is the Python stacks' time too)."""
            part.wake.wait(max(0.0, window_end - lead - time.monotonic()))
            try:
                at_begin()
                pids.extend(alive())
            finally:
                for k in range(len(mine)):
                    threading.Thread(target=one, args=(k,), daemon=True,
                                     name=f"hangtrace-window-{k}").start()
        pids: List[int] = []
        threading.Thread(target=begin, name="hangtrace-window", daemon=True).start()

    def window_over(self) -> None:
        """The window ended (now, or earlier than asked: a signal, the targets gone): the
        window thread begins at once if it has not, and the budget counts from now."""
        now = time.monotonic()
        if self.window_end is None or now < self.window_end:
            self.window_end = now
        if self.window is not None:
            self.window.wake.set()

    def _take_window(self, take: Take, wait: bool,
                     interrupted: Interrupted = lambda: False) -> Trouble:
        """The window thread's events and trouble, once all its probes have finished
        (``wait``: until the budget's end, or ``WINDOW_WAIT_S`` after the window's end if
        later, and a second more, or until ``interrupted()``; then what every probe gave is
        taken, and those not finished said: a probe that gives its events as they come, the
        Python stacks, keeps the deciding processes' that came first)."""
        part = self.window
        if part is None:
            return []
        if wait:
            until = self._start() + max(END_PROBES_S, WINDOW_WAIT_S) + 1.0
            for d in part.done:
                if not cancel.wait(d, until - time.monotonic(), stop=interrupted):
                    break
        elif not part.finished():
            return []
        self.window = None
        trouble: Trouble = []
        late = []
        for k, probe in enumerate(part.probes):
            finished = part.done[k].is_set()
            got = list(part.events[k])       # a probe still running: what it gave so far
            if not finished:
                late.append(f"{probe_name(probe)} ({len(got)} events came)")
            for e in got:
                take(e)
            trouble += part.trouble[k] if finished else []
        if late:
            trouble.append(("session", f"{', '.join(late)} did not finish within "
                            f"{max(END_PROBES_S, WINDOW_WAIT_S) + 1:g} s of the window's end: "
                            "what came by then is kept"))
        return trouble

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
        t0 = time.monotonic()
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
        """After the backends stopped (module doc): the last look, the window thread's events
        if it has finished, the probes not run; then the window thread waited for."""
        self._start()
        if not self.looked:
            for info in final_infos(pids):
                take(info)
        trouble = self._take_window(take, wait=False)
        rest = [p for p in self.probes if probe_name(p) not in self.ran]
        trouble += self._run(rest, pids, analyzer, take, interrupted)
        return trouble + self._take_window(take, wait=True, interrupted=interrupted)
