"""The session's probes run in order under a time budget (session.py's ``EndProbe``s).

Contract:
- ``run_probes(probes, pids, analyzer, take, budget_s=..., phase=...)`` runs each probe and
  hands its events to ``take``; a probe that raises is one (probe, message) line, never the
  end of the recording. It returns those lines and the names of the probes not run.
- A probe is not started once ``budget_s`` seconds have gone since ``began`` (the run's start
  by default), nor after a signal came; those left out are named in one ("session", line) the
  trace keeps and the report shows: a verdict then lacks that signal and says so. An end
  probe whose start twin was cut ("memory (end)" after "memory (start)") is cut too.
- ``START_PROBES_S`` and ``END_PROBES_S`` bound what a tree of thousands of processes adds to
  a recording's start and end; a small job's probes take a fraction of them.
"""
from __future__ import annotations

import time
from typing import Callable, List, Optional, Sequence, Set, Tuple

from .. import events as ev

__all__ = ["run_probes", "probe_name", "START_PROBES_S", "END_PROBES_S"]

START_PROBES_S = 1.0
END_PROBES_S = 5.0      # not a share of the window: the end's stacks, logs and memory decide

Probe = Callable[[List[int], object], List[ev.Event]]


def probe_name(probe: Probe) -> str:
    return getattr(probe, "__name__", "probe")


def _start_twin(name: str) -> Optional[str]:
    return name[:-len("(end)")] + "(start)" if name.endswith(" (end)") else None


def run_probes(probes: Sequence[Probe], pids: List[int], analyzer: object,
               take: Callable[[ev.Event], None], *, budget_s: float, phase: str = "end",
               interrupted: Callable[[], bool] = lambda: False,
               cut_before: Set[str] = frozenset(),
               began: Optional[float] = None) -> Tuple[List[Tuple[str, str]], List[str]]:
    """(trouble lines, names of the probes not run) (module doc); ``cut_before``: names cut
    by an earlier run (the start probes), whose end twins are cut here; ``began``: when the
    budget started (time.monotonic(); now when None)."""
    errors: List[Tuple[str, str]] = []
    began = time.monotonic() if began is None else began
    why = ""
    cut: List[str] = []
    for probe in probes:
        name = probe_name(probe)
        if _start_twin(name) in cut_before:
            errors.append(("session", f"{name} not run: {_start_twin(name)} was not"))
            cut.append(name)
            continue
        if not why and interrupted():
            why = "a signal ended the recording"
        elif not why and time.monotonic() - began > budget_s:
            why = (f"the {phase} probes' {budget_s:g} s were spent ({len(pids)} processes)")
        if why:
            cut.append(name)
            continue
        try:
            for e in probe(pids, analyzer):
                take(e)
        except Exception as exc:  # a probe is extra evidence; never lose the recording for it
            errors.append((name, str(exc)))
    skipped = [n for n in cut if _start_twin(n) not in cut_before]
    if why and skipped:
        errors.append(("session", f"{why}: {', '.join(skipped)} not run"))
    return errors, cut
