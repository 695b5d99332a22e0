"""What the job itself said (NCCL RAS answers saved in the trace), as typed facts and notes.

Contract: ``read_ras(events)`` takes the ``NcclRasStatus`` events of a recording and returns
``JobFacts``: the parsed answer (nccl_ras.RasStatus; the last one that parses, None when none
did) and report notes that quote it: the operation counts per rank where they differ, the
ranks RAS got no data from, asynchronous errors, or why RAS did not answer. Pure.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence

from .. import events as ev
from .nccl_ras import RasStatus, lagging_ranks, missing_ranks, parse_ras
from .verdict import Note, NoteKind


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
    for comm, m in missing_ranks(st):
        who = f"rank {m.rank}" + (f" (pid {m.pid})" if m.pid is not None else "")
        lines.append(f"no data from {who} of communicator {comm.hash}"
                     + ("; RAS considers it dead" if m.dead else ""))
    for c in st.comms:
        for r in c.ranks:
            if r.async_error:
                lines.append(f"rank {r.rank} (pid {r.pid}) reports asynchronous error "
                             f"{r.async_error}")
    return [Note(NoteKind.JOB, "; ".join(lines))]
