"""Ranks of one job that carry no RANK and no NCCL RAS answer, and the odd rank among them.

Contract: pure functions of the per-process facts, the recording's fd tables and the thread
verdicts.
- ``mark_ranks(procs, rec)`` sets ``ProcessFacts.ranked`` on the processes that are ranks of one
  job although nothing says so in their environment: siblings (one parent) titled with the same
  pattern and a TP index (``…_TP0``, ``…_TP1``: a spawned tokenizer or detokenizer shares the
  command line but not the title), and siblings with the same command line connected to each
  other by a socket (a gloo or NCCL group, a TCPStore). Two at least.
- ``thread_set_suspects(ranks, verdicts)`` compares the ranks the way STAT compares MPI tasks,
  by their threads: each rank's deciding threads as a multiset of what they do (the call they
  wait in and on what kind of fd, spinning, ticking, progressing). With three ranks or more the
  odd one out is the one whose set differs from all the others', which share one; with two, a
  rank that lacks a thread the other has, while that thread waits (for it). Returns {pid: why}.
"""
from __future__ import annotations

from collections import Counter
from typing import Dict, List, Mapping, Optional, Tuple

from ...linux.fdtarget import FdTarget
from ..accumulate.stats import Recording
from ..vocab.verdict import BLOCKED, BUSY, EXITED, UNKNOWN, ThreadVerdict
from .process_facts import ProcessFacts

__all__ = ["mark_ranks", "thread_set_suspects"]

_SOCKETS = ("tcp", "unix", "socket")


def _family(pf: ProcessFacts) -> Optional[Tuple[int, str]]:
    """(parent, title with its TP index taken out) for a titled rank, else None."""
    if pf.role.rank is None or not pf.cmdline:
        return None
    title = pf.cmdline[0]
    k = title.upper().rfind("_TP")
    return (pf.ppid, title[:k]) if k >= 0 else None


def _endpoints(rec: Recording, pid: int) -> set:
    p = rec.processes.get(pid)
    if p is None or p.info is None:
        return set()
    return {e for f in p.info.fds if f.kind in _SOCKETS
            for e in [FdTarget.parse(f.target).endpoints()] if e is not None}


def mark_ranks(procs: Mapping[int, ProcessFacts], rec: Recording) -> None:
    titled: Dict[Tuple[int, str], List[int]] = {}
    same: Dict[Tuple[int, str], List[int]] = {}
    for pid, pf in procs.items():
        if pf.role.kind == "rank" or pf.pid_unknown:
            continue
        fam = _family(pf)
        if fam is not None:
            titled.setdefault(fam, []).append(pid)
        elif pf.cmdline and pf.role.kind == "other":
            same.setdefault((pf.ppid, " ".join(pf.cmdline)), []).append(pid)
    for pids in titled.values():
        if len(pids) >= 2:
            for pid in pids:
                procs[pid].ranked = True
    for pids in same.values():
        if len(pids) < 2:
            continue
        ends = {pid: _endpoints(rec, pid) for pid in pids}
        for pid in pids:
            want = {(b, a) for a, b in ends[pid]}
            if any(q != pid and ends[q] & want for q in pids):
                procs[pid].ranked = True


def _kind(v: ThreadVerdict) -> str:
    if v.verdict == BLOCKED and v.wait is not None:
        return f"blocked in {v.wait.call}" + (f" on {v.wait.fd_kind}" if v.wait.fd_kind else "")
    if v.verdict == BUSY:
        return "ticking" if v.ticks else "spinning"
    return str(v.verdict)


def _signature(tvs: Mapping[int, ThreadVerdict]) -> Counter:
    return Counter(_kind(v) for v in tvs.values()
                   if v.helper is None and not v.parked and v.verdict not in (EXITED, UNKNOWN))


def thread_set_suspects(ranks: Mapping[int, str],
                        verdicts: Mapping[int, Mapping[int, ThreadVerdict]]) -> Dict[int, str]:
    """{pid: why} for the odd rank out (module doc); ``ranks`` maps a rank's pid to its
    label."""
    sigs = {pid: _signature(verdicts.get(pid, {})) for pid in ranks}
    if len(sigs) < 2:
        return {}
    if len(sigs) >= 3:
        groups: Dict[Tuple, List[int]] = {}
        for pid, sig in sigs.items():
            groups.setdefault(tuple(sorted(sig.items())), []).append(pid)
        if len(groups) == 2:
            (a, pa), (b, pb) = sorted(groups.items(), key=lambda g: len(g[1]))
            if len(pa) == 1:
                odd, rest = pa[0], pb
                diff = _diff(sigs[odd], sigs[rest[0]])
                return {odd: f"its threads differ from the {len(rest)} other ranks' "
                             f"({', '.join(ranks[q] for q in rest)}): {diff}"}
        return {}
    (p, sp), (q, sq) = sigs.items()
    for odd, other, so, st in ((p, q, sp, sq), (q, p, sq, sp)):
        missing = st - so
        if missing and not (so - st) and any(k.startswith("blocked") for k in missing):
            kind = next(k for k in missing if k.startswith("blocked"))
            return {odd: f"it has no thread {kind}, where {ranks[other]} has one: the thread "
                         f"that would take its part is missing (a thread died, or never came)"}
    return {}


def _diff(odd: Counter, usual: Counter) -> str:
    lacks = usual - odd
    extra = odd - usual
    parts = []
    if lacks:
        parts.append("it lacks " + ", ".join(f"{n} thread{'s' if n > 1 else ''} {k}"
                                            for k, n in lacks.items()))
    if extra:
        parts.append("it has " + ", ".join(f"{n} thread{'s' if n > 1 else ''} {k}"
                                          for k, n in extra.items()) + " the others do not")
    return "; ".join(parts)
