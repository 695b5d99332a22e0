"""The session's probes run in order under a time budget (session.py's ``EndProbe``s).

Contract:
- ``run_probes(probes, pids, analyzer, take, budget_s=..., phase=...)`` runs each probe and
  hands its events to ``take``; a probe that raises is one (probe, message) line. It returns
  those lines and the names of the probes not run: none is started once ``budget_s`` seconds
  have gone since ``began`` or after a signal came, and those are named in one ("session",
  line) the report shows; an end probe whose start twin was cut is cut too.
- ``mark(probe, ...)`` says when a probe may run; ``run_probes(still=)`` gives a
  ``per_process`` probe only the processes not in ``still``; ``probe_deadline()``, while a
  probe runs, is when its budget ends, so that one that works through many processes stops
  there, the deciding ones taken (pystacks.py).
"""
from __future__ import annotations

import time
from contextvars import ContextVar
from typing import Callable, Collection, List, Optional, Sequence, Set, Tuple

from .. import events as ev

__all__ = ["run_probes", "probe_name", "mark", "after_stop", "per_process", "beside",
           "in_window", "deciding", "probe_deadline", "START_PROBES_S", "END_PROBES_S"]

START_PROBES_S = 1.0
END_PROBES_S = 5.0      # not a share of the window: the end's stacks, logs and memory decide

Probe = Callable[[List[int], object], List[ev.Event]]

_DEADLINE: ContextVar[Optional[float]] = ContextVar("hangtrace_probe_deadline", default=None)


def probe_deadline() -> Optional[float]:
    """When the running probe's budget ends (module doc); None outside ``run_probes``."""
    return _DEADLINE.get()


def probe_name(probe: Probe) -> str:
    return getattr(probe, "__name__", "probe")


def mark(probe: Probe, *, after_stop: bool = False, per_process: bool = False,
         beside: bool = False, in_window: bool = False, deciding: bool = False) -> Probe:
    """``probe`` marked: ``after_stop``, it needs the backends' last events (the calls still
    running), talks to the target or pauses it, so it runs once they stopped; ``per_process``,
    it reads each process again and a process that did nothing since the start need not be;
    ``beside``, it spends its time waiting on helpers (py-spy), so it may run in a thread
    beside the others (record/ending.py); ``in_window``, it reads the target's own doing (stacks,
    memory) and needs no backend's last event, so it runs in the window's last part, in a
    thread beside the recording (record/ending.py's ``Ending.start_window``); ``deciding``,
    it reads the root cause's own evidence (stacks) deciding threads first and stops at its
    deadline (``probe_deadline``), so a spent budget does not cut it whole: it still reads
    its first ones (a signal does)."""
    setattr(probe, "after_stop", after_stop)
    setattr(probe, "per_process", per_process)
    setattr(probe, "beside", beside)
    setattr(probe, "in_window", in_window)
    setattr(probe, "deciding", deciding)
    return probe


def after_stop(probe: Probe) -> bool:
    return bool(getattr(probe, "after_stop", False))


def per_process(probe: Probe) -> bool:
    return bool(getattr(probe, "per_process", False))


def beside(probe: Probe) -> bool:
    return bool(getattr(probe, "beside", False))


def in_window(probe: Probe) -> bool:
    return bool(getattr(probe, "in_window", False))


def deciding(probe: Probe) -> bool:
    return bool(getattr(probe, "deciding", False))


def _start_twin(name: str) -> Optional[str]:
    return name[:-len("(end)")] + "(start)" if name.endswith(" (end)") else None


def run_probes(probes: Sequence[Probe], pids: List[int], analyzer: object,
               take: Callable[[ev.Event], None], *, budget_s: float, phase: str = "end",
               interrupted: Callable[[], bool] = lambda: False,
               cut_before: Set[str] = frozenset(),
               began: Optional[float] = None,
               still: Collection[int] = frozenset()) -> Tuple[List[Tuple[str, str]], List[str]]:
    """(trouble lines, names of the probes not run) (module doc); ``cut_before``: names cut
    by an earlier run (the start probes), whose end twins are cut here; ``began``: when the
    budget started (time.monotonic(); now when None); ``still``: processes a ``per_process``
    probe is not given."""
    errors: List[Tuple[str, str]] = []
    began = time.monotonic() if began is None else began
    why = ""
    signalled = False
    cut: List[str] = []
    for probe in probes:
        name = probe_name(probe)
        if _start_twin(name) in cut_before:
            errors.append(("session", f"{name} not run: {_start_twin(name)} was not"))
            cut.append(name)
            continue
        if not why and interrupted():
            why, signalled = "a signal ended the recording", True
        elif not why and time.monotonic() - began > budget_s:
            why = (f"the {phase} probes' {budget_s:g} s were spent ({len(pids)} processes)")
        if why and (signalled or not deciding(probe)):
            cut.append(name)
            continue
        token = _DEADLINE.set(began + budget_s)
        try:
            mine = [p for p in pids if p not in still] if still and per_process(probe) else pids
            for e in probe(mine, analyzer):
                take(e)
        except Exception as exc:  # a probe is extra evidence; never lose the recording for it
            errors.append((name, str(exc)))
        finally:
            _DEADLINE.reset(token)
    skipped = [n for n in cut if _start_twin(n) not in cut_before]
    if why and skipped:
        errors.append(("session", f"{why}: {', '.join(skipped)} not run"))
    return errors, cut
