"""Ranks of one job that carry no RANK and no NCCL RAS answer, and the odd rank among them.

Contract: pure functions of the per-process facts, the recording's fd tables and the thread
verdicts.
- ``mark_ranks(procs, rec)`` sets ``ProcessFacts.ranked`` on the processes that are ranks of one
  job although nothing says so in their environment (titled siblings with a TP index, or
  siblings of one command line connected by a socket: its docstring), and their rank where an
  integer argument numbers them, a dead one included.
- ``thread_set_suspects(ranks, verdicts)`` compares the ranks the way STAT compares MPI tasks,
  by their threads (each rank's deciding threads as a multiset of what they do) and returns
  {pid: why} for the odd one out.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

from ...linux.fdtarget import FdTarget
from ...linux.intparse import parse_uint
from ..accumulate.stats import Recording
from ..vocab.verdict import BLOCKED, BUSY, EXITED, UNKNOWN, ThreadVerdict
from .process_facts import ProcessFacts
from .roles import Role

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


def _shape(cmdline: List[str]) -> Tuple[str, ...]:
    """A command line with its integer arguments blanked: the ranks of one job share it."""
    return tuple("#" if parse_uint(a) is not None else a for a in cmdline)


def _index(cmdlines: Mapping[int, List[str]]) -> Dict[int, int]:
    """{pid: rank} from the one integer argument that numbers the command lines 0..n-1."""
    first = next(iter(cmdlines.values()))
    lengths = {len(c) for c in cmdlines.values()}
    if len(lengths) != 1:
        return {}
    varying = [i for i in range(len(first)) if len({c[i] for c in cmdlines.values()}) > 1]
    if len(varying) != 1:
        return {}
    got = {pid: n for pid, c in cmdlines.items() if (n := parse_uint(c[varying[0]])) is not None}
    if len(got) != len(cmdlines):
        return {}
    values = sorted(got.values())
    # 0..n-1, or with one index missing (a rank that died: a zombie has no command line)
    ok = len(set(values)) == len(values) and values[0] == 0 and values[-1] <= len(values)
    return got if ok else {}


def _connected(rec: Recording, pids: List[int]) -> List[int]:
    """The ``pids`` one of whose endpoints another of them holds the other way round (an
    index of endpoints by owner: 2,000 siblings cost 2,000 lookups, not 4 million checks)."""
    ends = {pid: _endpoints(rec, pid) for pid in pids}
    owners: Dict[Any, Set[int]] = {}
    for pid, es in ends.items():
        for e in es:
            owners.setdefault(e, set()).add(pid)
    return [pid for pid in pids
            if any(owners.get((b, a), set()) - {pid} for a, b in ends[pid])]


def mark_ranks(procs: Mapping[int, ProcessFacts], rec: Recording) -> None:
    """Set ``ProcessFacts.ranked`` (module doc) on: siblings (one parent) titled with the same
    pattern and a TP index (``…_TP0``, ``…_TP1``: a spawned tokenizer or detokenizer shares the
    command line but not the title), and siblings with the same command line, or the same up to one
    integer argument (``--rank 2``: a Python launcher passes each rank its index), connected to
    each other by a socket (a gloo or NCCL group, a TCPStore). Two at least. Where that integer
    numbers the set 0..n-1 it is their rank (``rank 2``); where the ranks so numbered lack one
    index and one sibling of theirs died (a zombie has no command line), the dead one is that
    rank."""
    titled: Dict[Tuple[int, str], List[int]] = {}
    same: Dict[Tuple[int, Tuple[str, ...]], List[int]] = {}
    for pid, pf in procs.items():
        if pf.role.kind == "rank" or pf.pid_unknown:
            continue
        fam = _family(pf)
        if fam is not None:
            titled.setdefault(fam, []).append(pid)
        elif pf.cmdline and pf.role.kind == "other":
            same.setdefault((pf.ppid, _shape(pf.cmdline)), []).append(pid)
    for pids in titled.values():
        if len(pids) >= 2:
            for pid in pids:
                procs[pid].ranked = True
    for (ppid, _), pids in same.items():
        if len(pids) < 2:
            continue
        linked = _connected(rec, pids)
        for pid in linked:
            procs[pid].ranked = True
        if len(linked) < 2:
            continue
        index = _index({pid: procs[pid].cmdline for pid in linked})
        for pid, rank in index.items():
            procs[pid].role = Role("rank", rank, f"rank {rank}")
    _name_dead_rank(procs)


def _name_dead_rank(procs: Mapping[int, ProcessFacts]) -> None:
    """The ranks of one parent numbered 0..n-1 but one, and one sibling of theirs that died
    with no rank of its own (module doc): it is the missing rank."""
    by_parent: Dict[int, List[ProcessFacts]] = {}
    for pf in procs.values():
        if pf.role.kind == "rank" and pf.role.rank is not None and pf.gone is None:
            by_parent.setdefault(pf.ppid, []).append(pf)
    for ppid, ranks in by_parent.items():
        have = {pf.role.rank for pf in ranks}
        if len(have) != len(ranks) or len(ranks) < 2:
            continue
        gaps = sorted(set(range(max(have) + 1)) - have)
        missing = gaps if gaps else [max(have) + 1]
        dead = [pf for pf in procs.values() if pf.ppid == ppid and pf.gone is not None
                and pf.role.kind == "other" and not pf.cmdline
                and pf.comm in {r.comm for r in ranks}]
        if len(dead) == 1 and len(missing) == 1:
            rank = missing[0]
            dead[0].role = Role("rank", rank, f"rank {rank}")
            dead[0].ranked = True


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
    label.
    What a thread does: the call it waits in and on what kind of fd, spinning, ticking,
    progressing. With three ranks or more the odd one out is the one whose set differs from all the
    others', which share one; with two, a rank that lacks a thread the other has, while that thread
    waits (for it)."""
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
