"""What PyTorch's Flight Recorder dumps say about a job's collectives: pure, like fr_trace.

Contract: ``read_recorder(dumps, window_start)`` takes the ``FlightRecorderDump`` events of a
recording (or of a directory alone) and returns a ``Recorder``: per process group, each rank's
last enqueued, started and completed collective, and the findings, most telling first:
"behind", "mismatch", "missing" (each: ``read_recorder``'s docstring).
``lags(recorder, pid_of_rank)`` turns "behind" and "missing" findings into ``RecorderLag``
facts (the rank's pid, why, the operation, the pids that wait for it and in what), which
collective.find_stragglers takes as its source after NCCL RAS. ``notes`` say what could not be
read, and dumps written before the recording began (they may describe an earlier state).
Verdicts never depend on names or pids: the ranks' numbers come from the dump files' names.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence

from ...events.stacks import FlightRecorderDump
from ...linux.intparse import parse_uint
from .process_facts import ProcessFacts

__all__ = ["Recorder", "RankState", "Finding", "RecorderLag", "read_recorder", "lags",
           "pids_of_ranks", "recorder_for"]


@dataclass
class RankState:
    rank: int
    pid: int
    enqueued: int = -1
    started: int = -1
    completed: int = -1
    last: Optional[dict] = None          # its entry at ``enqueued``

    def op_text(self) -> str:
        e = self.last
        if e is None:
            return "no entry"
        sizes = f", sizes {e['input_sizes']}" if e.get("input_sizes") else ""
        caller = _caller(e.get("frames") or [])
        at = f", called from {caller}" if caller else ""
        return f"{e['profiling_name'] or '?'}{sizes}, {_state(e, self)}{at}"


def _caller(frames: List[dict]) -> str:
    """The innermost frame of the entry's stack outside torch.distributed: the job's own call
    of the collective, "step (train.py:57)"."""
    for f in frames:
        name = f.get("filename") or ""
        if "torch/distributed/" not in name and not name.endswith("c10d_logger.py"):
            return f"{f.get('name') or '?'} ({name.rsplit('/', 1)[-1]}:{f.get('line')})"
    return ""


@dataclass
class Finding:
    kind: str                    # behind, mismatch, missing
    group: str
    seq: int
    text: str
    ranks: List[int] = field(default_factory=list)     # the culprits
    waiting: List[int] = field(default_factory=list)   # the ranks that wait for them
    op: str = ""


@dataclass
class Recorder:
    groups: Dict[str, Dict[int, RankState]] = field(default_factory=dict)
    members: Dict[str, List[int]] = field(default_factory=dict)
    findings: List[Finding] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    dumps: List[FlightRecorderDump] = field(default_factory=list)

    def to_json(self) -> Dict[str, object]:
        return {
            "dumps": [{"rank": d.rank, "pid": d.pid or None, "path": d.path, "mtime": d.mtime,
                       "entries": len(d.entries), "version": d.version,
                       "error": d.error or None} for d in self.dumps],
            "groups": [{"group": g, "ranks": self.members.get(g, []),
                        "states": [{"rank": s.rank, "pid": s.pid or None,
                                    "last_enqueued": s.enqueued, "last_started": s.started,
                                    "last_completed": s.completed, "op": s.op_text()}
                                   for s in sorted(st.values(), key=lambda s: s.rank)]}
                       for g, st in sorted(self.groups.items())],
            "findings": [{"kind": f.kind, "group": f.group, "seq": f.seq, "text": f.text,
                          "ranks": f.ranks, "waiting": f.waiting} for f in self.findings],
            "notes": self.notes}


@dataclass
class RecorderLag:
    pid: int
    rank: int
    why: str
    op: str
    waiters: Dict[int, str] = field(default_factory=dict)    # pid -> what it does


def _state(e: dict, s: RankState) -> str:
    seq = e.get("collective_seq_id") or 0
    if e.get("state") == "completed" or (s.completed >= 0 and seq <= s.completed):
        return "completed"
    return e.get("state") or "scheduled"


def _done(e: dict, s: RankState) -> bool:
    return _state(e, s) == "completed"


def _ranks_text(text: str) -> List[int]:
    """The ranks of a group as its dump writes them ("[0, 1]"; intparse's digits, bounded)."""
    out = []
    for x in text.strip("[] ").replace(" ", "").split(","):
        n = parse_uint(x.removeprefix("-"))
        if n is not None:
            out.append(-n if x.startswith("-") else n)
    return out


def _rank_state(d: FlightRecorderDump, group: str, entries: List[dict]) -> RankState:
    s = RankState(rank=d.rank if d.rank is not None else -1, pid=d.pid)
    pg_ids = {e["pg_id"] for e in entries if e.get("pg_id") is not None}
    for st in d.pg_status:
        if st.get("pg_id") is not None and parse_uint(st["pg_id"]) in pg_ids:
            s.enqueued = st.get("last_enqueued_collective") if st.get(
                "last_enqueued_collective") is not None else -1
            s.started = st.get("last_started_collective") or -1
            s.completed = st.get("last_completed_collective") if st.get(
                "last_completed_collective") is not None else -1
    seqs = [e["collective_seq_id"] for e in entries if e.get("collective_seq_id") is not None]
    if seqs and max(seqs) > s.enqueued:
        s.enqueued = max(seqs)
    if s.completed < 0:
        s.completed = max((e["collective_seq_id"] for e in entries
                           if e.get("state") == "completed"), default=-1)
    s.last = next((e for e in reversed(entries) if e.get("collective_seq_id") == s.enqueued),
                  None)
    return s


def _members(dumps: Sequence[FlightRecorderDump], group: str, desc: str) -> List[int]:
    for d in dumps:
        for c in d.pg_config:
            if group in (c.get("key"), c.get("name")) or (desc and desc == c.get("desc")):
                return _ranks_text(c.get("ranks") or "")
    # torch 2.13's gloo records its ranks under an empty name before it has one
    cfgs = {c.get("ranks") for d in dumps for c in d.pg_config}
    return _ranks_text(cfgs.pop() or "") if len(cfgs) == 1 else []


def read_recorder(dumps: Sequence[FlightRecorderDump],
                  window_start: Optional[float] = None) -> Recorder:
    """The ``Recorder`` of these dumps (module doc). Each rank's last enqueued, started and
    completed collective comes from ``pg_status``, else the entries' own sequence numbers and
    states. The findings, most telling first: **behind**: a rank whose last enqueued collective is
    below the others' did not enter the next one; the ranks that did wait in it (their entry there
    is not completed); **mismatch**: the same sequence number is another operation, other sizes or
    dtypes on two ranks (the first such collective, as fr_trace reports the first divergence);
    **missing**: a rank the group lists (``pg_config`` ranks) wrote no dump: when every rank that
    did waits in the same collective, the missing one is the suspect."""
    rec = Recorder(dumps=list(dumps))
    for d in dumps:
        if d.error:
            why = d.error.removeprefix("not read: ")     # the probe's words for a refusal
            rec.notes.append(f"Flight Recorder dump {d.path} not read: {why}")
        elif window_start is not None and d.mtime is not None and d.mtime < window_start - 1:
            rec.notes.append(f"Flight Recorder dump {d.path} was written "
                             f"{window_start - d.mtime:.0f} s before the recording began: what "
                             "it says is as of then")
    good = [d for d in dumps if not d.error and d.rank is not None]
    names: Dict[str, str] = {}
    for d in good:
        for e in d.entries:
            pg = e.get("process_group") or []
            if pg and not e.get("is_p2p"):
                names.setdefault(pg[0], pg[1] if len(pg) > 1 else "")
    for group, desc in names.items():
        states = {}
        for d in good:
            mine = [e for e in d.entries if (e.get("process_group") or [""])[0] == group
                    and not e.get("is_p2p")]
            if mine:
                states[d.rank] = _rank_state(d, group, mine)  # type: ignore[index]
        rec.groups[group] = states
        rec.members[group] = _members(good, group, desc) or sorted(states)
        rec.findings += _group_findings(group, desc, states, rec.members[group], good)
    return rec


def _label(group: str, desc: str) -> str:
    return f"group {group} ({desc})" if desc and desc != group else f"group {group}"


def _group_findings(group: str, desc: str, states: Dict[int, RankState], members: List[int],
                    dumps: Sequence[FlightRecorderDump]) -> List[Finding]:
    out: List[Finding] = []
    if not states:
        return out
    where = _label(group, desc)
    top = max(s.enqueued for s in states.values())
    ahead = [s for s in states.values() if s.enqueued == top]
    waiting = [s.rank for s in ahead if s.last is None or not _done(s.last, s)]
    for s in sorted(states.values(), key=lambda s: s.rank):
        if s.enqueued < top and waiting:
            a = ahead[0]
            out.append(Finding("behind", group, top, (
                f"rank {s.rank} enqueued collectives up to {s.enqueued} in {where} and never "
                f"entered collective {top} ({a.op_text()} on rank {a.rank}); rank"
                f"{'s' if len(waiting) > 1 else ''} {', '.join(map(str, waiting))} wait"
                f"{'' if len(waiting) > 1 else 's'} in it (Flight Recorder)"), [s.rank],
                waiting, (a.last or {}).get("profiling_name", "")))
    out += _mismatches(group, where, states)[:3]
    absent = [r for r in members if r not in states]
    if absent and waiting and len(waiting) == len(states):
        out.append(Finding("missing", group, top, (
            f"no dump from rank{'s' if len(absent) > 1 else ''} {', '.join(map(str, absent))} "
            f"of {where} (ranks {members}), while every rank that wrote one waits in collective "
            f"{top} ({ahead[0].op_text()})"), absent, waiting,
            (ahead[0].last or {}).get("profiling_name", "")))
    return out


def _mismatches(group: str, where: str, states: Dict[int, RankState]) -> List[Finding]:
    by_seq: Dict[int, Dict[int, dict]] = {}
    for d_rank, s in states.items():
        for e in [s.last] if s.last else []:
            by_seq.setdefault(e["collective_seq_id"], {})[d_rank] = e
    out = []
    for seq, per_rank in sorted(by_seq.items()):
        if len(per_rank) < 2:
            continue
        for key, what in (("profiling_name", "operation"), ("input_sizes", "input sizes"),
                          ("input_dtypes", "dtypes")):
            values = {r: e.get(key) for r, e in sorted(per_rank.items())}
            if len({repr(v) for v in values.values()}) > 1:
                common = max(values.values(), key=lambda v: list(values.values()).count(v))
                odd = [r for r, v in values.items() if v != common]
                text = ", ".join(f"rank {r}: {v}" for r, v in values.items())
                out.append(Finding("mismatch", group, seq, (
                    f"collective {seq} of {where} differs in {what} ({text})"), odd,
                    [r for r in values if r not in odd], str(per_rank[odd[0]].get(
                        "profiling_name", ""))))
                break
    return out


def lags(rec: Recorder, pid_of_rank: Mapping[int, int]) -> List[RecorderLag]:
    """The ranks the others wait for, with pids (module doc); unknown pids are left out."""
    out: List[RecorderLag] = []
    for f in rec.findings:
        if f.kind not in ("behind", "missing", "mismatch"):
            continue
        for r in f.ranks:
            pid = pid_of_rank.get(r)
            if pid is None or any(x.pid == pid for x in out):
                continue
            waiters = {pid_of_rank[w]: f"waits in collective {f.seq} ({f.op or '?'})"
                       for w in f.waiting if w in pid_of_rank}
            if waiters:
                out.append(RecorderLag(pid, r, f.text, f.op, waiters))
    return out


def pids_of_ranks(rec: Recorder, ranks: Mapping[int, int]) -> Dict[int, int]:
    """rank -> pid: the dump's own pid (the probe read it from that process's environment),
    else ``ranks`` (the traced processes' RANK)."""
    out = dict(ranks)
    out.update({d.rank: d.pid for d in rec.dumps if d.pid and d.rank is not None})
    return out



def recorder_for(dumps: Sequence[FlightRecorderDump], procs: Mapping[int, ProcessFacts],
                 window_start: Optional[float] = None
                 ) -> "tuple[Optional[Recorder], List[RecorderLag]]":
    """The pipeline's one call: the dumps read (None without any) and their lags, ranks put on
    the traced processes by the dumps' own pids, else by each rank process's RANK."""
    if not dumps:
        return None, []
    rec = read_recorder(dumps, window_start)
    ranks = {pf.role.rank: pid for pid, pf in procs.items()
             if pf.role.kind == "rank" and pf.role.rank is not None}
    return rec, lags(rec, pids_of_ranks(rec, ranks))
