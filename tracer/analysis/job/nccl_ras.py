"""NCCL RAS answers (``NcclRasStatus`` events) read into typed facts about the job's ranks.

Contract (pure, never raises; linear in the ranks of the answer):
- ``parse_ras(text, fmt)`` -> ``RasStatus`` or None: the communicators, each rank's pid, GPU and
  collective operation counts (per kind: AllReduce, AllGather, ...), its status and async error,
  and the ranks missing from the answer (with their pid and whether RAS considers them dead).
  JSON or text, as NCCL prints them (the formats: its docstring).
- ``lagging_ranks(status)``: per communicator and operation, the ranks that launched fewer
  operations than the others (``RasLag``: who is behind, its count, who is ahead and how far);
  ``missing_ranks(status)``: ranks that did not answer (``dead`` when RAS gave up on them).
- ``rank_of_pid(status)``: {pid: (rank, cuda device)} for naming processes "rank 1 (GPU 1)".
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ...events.shapes import INT64_MAX
from ...linux.intparse import parse_uint

__all__ = ["RasRank", "RasMissing", "RasComm", "RasStatus", "RasLag", "parse_ras",
           "lagging_ranks", "missing_ranks", "rank_of_pid"]


@dataclass
class RasRank:
    rank: int
    pid: Optional[int] = None
    host: str = ""
    gpu: Optional[int] = None
    counts: Dict[str, int] = field(default_factory=dict)   # operation -> launched up to
    async_error: int = 0
    aborted: bool = False


@dataclass
class RasMissing:
    rank: Optional[int]
    pid: Optional[int] = None
    host: str = ""
    gpu: Optional[int] = None
    dead: bool = False


@dataclass
class RasComm:
    hash: str
    size: int = 0
    ranks: List[RasRank] = field(default_factory=list)
    missing: List[RasMissing] = field(default_factory=list)


@dataclass
class RasStatus:
    fmt: str
    version: str = ""
    comms: List[RasComm] = field(default_factory=list)
    dead_pids: List[int] = field(default_factory=list)


@dataclass
class RasLag:
    comm: str
    op: str
    behind: RasRank
    ahead: List[RasRank]       # one list for every lag of (comm, op)
    ahead_count: int           # what ``ahead`` launched up to


def _int(v: object) -> Optional[int]:
    """A count, rank, pid or GPU of the answer: an int of 0 to 2**63-1 (or its decimal text,
    or a float that is one), else None: the one bound on the answer's numbers."""
    if type(v) is str:
        return parse_uint(v.strip(), 19)
    if type(v) is float and v.is_integer():
        v = int(v)
    return v if type(v) is int and 0 <= v <= INT64_MAX else None


# --------------------------------------------------------------------------- JSON
def _list(v: object) -> list:
    return v if isinstance(v, list) else []


def _loads_repaired(text: str) -> Optional[dict]:
    """json.loads, inserting a comma where the decoder expected one (up to 50 times)."""
    for _ in range(50):
        try:
            doc = json.loads(text)
            return doc if isinstance(doc, dict) else None
        except json.JSONDecodeError as exc:
            if not exc.msg.startswith("Expecting ',' delimiter"):
                return None
            text = text[:exc.pos] + "," + text[exc.pos:]
        except (ValueError, RecursionError):    # a number of over 4,300 digits, deep nesting
            return None
    return None


def _from_json(doc: dict) -> RasStatus:
    st = RasStatus("json", str(doc.get("nccl_version", "")))
    comms = doc.get("communicators")
    for c in comms if isinstance(comms, list) else []:
        if not isinstance(c, dict):
            continue
        comm = RasComm(str(c.get("hash", "")), _int(c.get("size")) or 0)
        for r in _list(c.get("ranks")):
            if not isinstance(r, dict) or _int(r.get("rank")) is None:
                continue
            status = r.get("status") if isinstance(r.get("status"), dict) else {}
            counts = r.get("collective_counts") if isinstance(r.get("collective_counts"),
                                                              dict) else {}
            comm.ranks.append(RasRank(
                _int(r.get("rank")) or 0, _int(r.get("pid")), str(r.get("host", "")),
                _int(r.get("cuda_dev")),
                {str(k): n for k, v in counts.items() if (n := _int(v)) is not None},
                _int(status.get("async_error")) or 0, bool(status.get("abort_flag"))))
        for m in _list(c.get("missing_ranks")):
            if not isinstance(m, dict):
                continue
            status = m.get("status") if isinstance(m.get("status"), dict) else {}
            comm.missing.append(RasMissing(_int(m.get("rank")), _int(m.get("pid")),
                                           str(m.get("host", "")), _int(m.get("cuda_dev")),
                                           bool(status.get("considered_dead"))))
        st.comms.append(comm)
    return st


# --------------------------------------------------------------------------- text
_N = "([0-9]{1,18})"         # a number of the text form: ASCII digits, bounded (a longer run
_D = "[0-9]{1,18}"            # leaves the line unread: int() of 5,000 digits raises)
_VERSION = re.compile(r"^NCCL version (\S+)")
_SECTION = re.compile(rf"^#({_D}-{_D}) \((\w+)\) ([A-Z,]+)")
_OP = re.compile(r"Communicator ranks have different (\w+) operation counts")
_GROUP = re.compile(rf"^\s*{_N} ranks have (?:launched up to operation {_N}|not launched any)")
_RANK = re.compile(rf"^\s*Rank {_N}(?: has launched up to operation {_N}| has not launched any "
                   rf"operations)? -- GPU {_N}(?: \(NVML {_D}\))? managed by process {_N} "
                   r"on node (\S+)")
_PROCESS = re.compile(rf"^\s*Process {_N} on node (\S+) managing GPUs? {_N}")


def _from_text(text: str) -> RasStatus:
    st = RasStatus("text")
    comms: Dict[str, RasComm] = {}
    by_rank: Dict[str, Dict[int, RasRank]] = {}     # comm hash -> rank -> its entry
    comm: Optional[RasComm] = None
    kind, op, group = "", "", None
    in_dead = False
    for line in text.splitlines():
        if m := _VERSION.match(line):
            st.version = m.group(1)
            continue
        if line.strip() in ("DEAD", "Warnings", "Errors", "========", "======"):
            in_dead = line.strip() == "DEAD"
            continue
        if m := _SECTION.match(line):
            comm = comms.setdefault(m.group(2), RasComm(m.group(2)))
            kind, op, group, in_dead = m.group(3), "", None, False
            continue
        if in_dead and (m := _PROCESS.match(line)):
            st.dead_pids.append(int(m.group(1)))
            continue
        if comm is None:
            continue
        if m := _OP.search(line):
            op, group = m.group(1), None
        elif m := _GROUP.match(line):
            group = int(m.group(2) or 0)
        elif m := _RANK.match(line):
            rank, count, gpu, pid, host = (int(m.group(1)), m.group(2), int(m.group(3)),
                                           int(m.group(4)), m.group(5))
            if "INCOMPLETE" in kind and not op:
                comm.missing.append(RasMissing(rank, pid, host, gpu))
                continue
            index = by_rank.setdefault(comm.hash, {})
            r = index.get(rank)
            if r is None:
                r = index[rank] = RasRank(rank, pid, host, gpu)
                comm.ranks.append(r)
            if op:
                value = int(count) if count is not None else (group if group is not None
                                                              else 0)
                r.counts[op] = value
    st.comms = list(comms.values())
    dead = set(st.dead_pids)
    for c in st.comms:
        for mr in c.missing:
            mr.dead = mr.pid in dead
    return st


def parse_ras(text: str, fmt: str = "json") -> Optional[RasStatus]:
    """The typed answer (module doc); None when ``text`` holds nothing recognisable.
    JSON is read first (NCCL 2.28's ``SET FORMAT json``; a missing comma, which some versions emit,
    is repaired); text (every version's default) is read line by line, with what it prints: the
    mismatching operation counts, the missing and dead processes. Format: NVIDIA/nccl
    src/ras/client_support.cc (2.28.9): JSON fields ``communicators[].ranks[]`` {rank, host, pid,
    cuda_dev, nvml_dev, status{init_state, async_error, ...}, collective_counts{}} and
    ``missing_ranks[]`` {rank, host, pid, cuda_dev, nvml_dev, status{unresponsive,
    considered_dead}}; text lines "Rank 1 has launched up to operation 6 -- GPU 1 managed by
    process 623 on node 10.0.0.1", "Communicator ranks have different AllReduce operation counts",
    "#0-0 (hash) INCOMPLETE", "DEAD" with "Process 623 on node ... managing GPU 1"."""
    if not text.strip():
        return None
    if fmt == "json" or text.lstrip().startswith("{"):
        doc = _loads_repaired(text)
        if doc is not None:
            return _from_json(doc)
    st = _from_text(text)
    return st if st.comms or st.dead_pids or st.version else None


# --------------------------------------------------------------------------- facts
def lagging_ranks(st: RasStatus) -> List[RasLag]:
    """Ranks behind the others in some operation (module doc), most behind first."""
    out: List[RasLag] = []
    for c in st.comms:
        ops = sorted({op for r in c.ranks for op in r.counts})
        for op in ops:
            counts = [r.counts.get(op, 0) for r in c.ranks]
            if len(c.ranks) < 2 or min(counts) == max(counts):
                continue
            top = max(counts)
            ahead = [r for r in c.ranks if r.counts.get(op, 0) == top]
            for r in c.ranks:
                if r.counts.get(op, 0) < top:
                    out.append(RasLag(c.hash, op, r, ahead, top))
    out.sort(key=lambda lag: (lag.behind.counts.get(lag.op, 0) - lag.ahead_count,
                              lag.behind.rank))
    return out


def missing_ranks(st: RasStatus) -> List[Tuple[RasComm, RasMissing]]:
    return [(c, m) for c in st.comms for m in c.missing]


def rank_of_pid(st: RasStatus) -> Dict[int, Tuple[int, Optional[int]]]:
    out: Dict[int, Tuple[int, Optional[int]]] = {}
    for c in st.comms:
        for r in c.ranks:
            if r.pid is not None:
                out.setdefault(r.pid, (r.rank, r.gpu))
        for m in c.missing:
            if m.pid is not None and m.rank is not None:
                out.setdefault(m.pid, (m.rank, m.gpu))
    return out
