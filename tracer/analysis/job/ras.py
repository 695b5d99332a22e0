"""What the job itself said (NCCL RAS answers saved in the trace), as typed facts and notes.

Contract (pure): ``read_ras(events)`` -> ``JobFacts``: the parsed answer (nccl_ras.RasStatus;
the last one that parses, None when none did) and notes that quote it: the operation counts per
rank where they differ, the ranks RAS got no data from, asynchronous errors (``MAX_LISTED`` of
each named, the rest counted), or why RAS did not answer.
``localize_ras(status, nodes, known)``: in merged traces, a copy of the answer whose pids are
node keys (vocab/nodes.py): NCCL RAS names every rank by (host, pid), host being the address
its node bound; each becomes the key of that pid on the node with that address (or, where no
node has it, on the one node where that pid was traced); None where that cannot be told.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Sequence

from ... import events as ev
from .nccl_ras import RasStatus, lagging_ranks, missing_ranks, parse_ras
from ..vocab.nodes import ID_STRIDE, NodeMap, key_of
from ..vocab.verdict import Note, NoteKind


MAX_LISTED = 8     # ranks named one by one per kind of note; the rest are counted


@dataclass
class JobFacts:
    status: Optional[RasStatus] = None
    notes: List[Note] = field(default_factory=list)


def _where(e: ev.NcclRasStatus) -> str:
    return f"NCCL RAS at {e.host}:{e.port}"


def read_ras(events: Sequence[ev.NcclRasStatus]) -> JobFacts:
    out = JobFacts()
    for e in events:
        if e.error and not e.text:
            out.notes.append(Note(NoteKind.JOB, f"{_where(e)} did not answer: {e.error}"))
            continue
        st = parse_ras(e.text, e.fmt)
        if st is None:
            out.notes.append(Note(NoteKind.JOB, f"{_where(e)} answered nothing readable "
                                  f"({len(e.text)} bytes of {e.fmt})"))
            continue
        out.status = st
        out.notes += _notes(e, st)
    return out


def _notes(e: ev.NcclRasStatus, st: RasStatus) -> List[Note]:
    version = f" (NCCL {st.version})" if st.version else ""
    ranks = sum(len(c.ranks) + len(c.missing) for c in st.comms)
    lines = [f"{_where(e)}{version}: {len(st.comms)} communicator"
             f"{'s' if len(st.comms) != 1 else ''}, {ranks} ranks in all"]
    done = set()
    for lag in lagging_ranks(st):
        key = (lag.comm, lag.op)
        if key in done:
            continue
        done.add(key)
        counts = ", ".join(f"rank {r.rank} up to {r.counts.get(lag.op, 0)}"
                           for r in sorted(lag.ahead + [lag.behind], key=lambda r: r.rank)[:8])
        lines.append(f"{lag.op} operations launched differ: {counts}")
    missing = missing_ranks(st)
    for comm, m in missing[:MAX_LISTED]:
        who = f"rank {m.rank}" + (f" (pid {m.pid})" if m.pid is not None else "")
        lines.append(f"no data from {who} of communicator {comm.hash}"
                     + ("; RAS considers it dead" if m.dead else ""))
    if len(missing) > MAX_LISTED:
        dead = sum(m.dead for _, m in missing[MAX_LISTED:])
        lines.append(f"no data from {len(missing) - MAX_LISTED} more ranks"
                     + (f" ({dead} considered dead)" if dead else ""))
    errors = [r for c in st.comms for r in c.ranks if r.async_error]
    for r in errors[:MAX_LISTED]:
        lines.append(f"rank {r.rank} (pid {r.pid}) reports asynchronous error {r.async_error}")
    if len(errors) > MAX_LISTED:
        lines.append(f"{len(errors) - MAX_LISTED} more ranks report asynchronous errors")
    return [Note(NoteKind.JOB, "; ".join(lines))]


def localize_ras(status: RasStatus, nodes: NodeMap, known: Iterable[int]) -> RasStatus:
    """A copy of ``status`` whose pids are keys (module doc)."""
    have = set(known)
    n = len(nodes.names)

    def key(host: str, pid: Optional[int]) -> Optional[int]:
        if pid is None or pid <= 0 or pid >= ID_STRIDE:
            return None
        by_addr = nodes.with_address(host)
        if len(by_addr) == 1:
            return key_of(by_addr[0], pid)
        held = [i for i in (by_addr or range(n)) if key_of(i, pid) in have]
        return key_of(held[0], pid) if len(held) == 1 else None

    out = copy.deepcopy(status)
    for c in out.comms:
        for r in c.ranks:
            r.pid = key(r.host, r.pid)
        for m in c.missing:
            m.pid = key(m.host, m.pid)
    out.dead_pids = [k for p in out.dead_pids if (k := key("", p)) is not None]
    return out
