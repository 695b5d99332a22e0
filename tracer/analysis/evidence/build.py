"""Evidence a person would check by hand, turned into typed facts and findings (issue 14).

Contract:
- ``EvidenceTable`` is fed the evidence events (events/evidence.py) and the ``GpuSample`` power
  readings of a recording or a snapshot; memory is bounded by processes and GPUs.
- ``build_evidence(table, procs, window=None, now=None)`` is pure: with one ``ProcFacts`` per
  process of the tree it returns an ``Evidence``: vitals, log targets, containers, ports,
  GPU health, kernel log lines, library versions, CUDA graph capture, the ``findings`` that follow and
  ``missing`` (one line per datum that could not be gathered, with why).
- Each finding carries its rule, a severity ("warn": points at the cause of a hang or a broken
  machine; "info": context), the pids concerned and the source it rests on.
- Rules here read events only, never /proc, and never the text of other findings.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ..vocab.nodes import real_id
from .containers import cgroup_of, container_entries
from .gpu import gpu_evidence
from .libs import capture_evidence, fd_conditions, lib_evidence
from .ports import check_ports
from .table import EVIDENCE_TYPES, EvidenceTable, Finding

__all__ = ["EvidenceTable", "ProcFacts", "Finding", "Evidence", "build_evidence",
           "recording_evidence",
           "LOG_SILENT_MIN_S", "EVIDENCE_TYPES"]

LOG_SILENT_MIN_S = 60.0       # logs quiet this long (and 3 windows) before the window: a finding


@dataclass
class ProcFacts:
    pid: int
    ppid: int
    role: str
    argv: List[str]
    listening: List[str]
    start_time: Optional[float] = None
    conditions: Set[str] = field(default_factory=set)    # evidence/libs.py fd_conditions


@dataclass
class Evidence:
    ref_ts: float
    window: Optional[Tuple[float, float]]
    processes: List[Dict[str, Any]] = field(default_factory=list)
    containers: List[Dict[str, Any]] = field(default_factory=list)
    ports: Dict[str, Any] = field(default_factory=dict)
    gpus: List[Dict[str, Any]] = field(default_factory=list)
    kernel_log: Dict[str, Any] = field(default_factory=dict)
    host: List[Dict[str, Any]] = field(default_factory=list)
    capture: List[Dict[str, Any]] = field(default_factory=list)
    graph_calls: List[Dict[str, Any]] = field(default_factory=list)
    findings: List[Finding] = field(default_factory=list)
    missing: List[Dict[str, Any]] = field(default_factory=list)
    recorded: bool = True

    def to_json(self) -> Dict[str, Any]:
        out = asdict(self)
        out["window"] = list(self.window) if self.window else None
        return out


def _latest(by_phase: Dict[str, Any]) -> Any:
    for phase in ("end", "snapshot", "start"):
        if phase in by_phase:
            return by_phase[phase]
    return next(iter(by_phase.values()), None)


def _log_entries(table: EvidenceTable, pid: int, window: Optional[Tuple[float, float]]
                 ) -> Tuple[List[Dict[str, Any]], str]:
    by_phase = table.logs.get(pid, {})
    last, first = _latest(by_phase), by_phase.get("start")
    if last is None:
        return [], ""
    before = {t["fd"]: t for t in (first.targets if first is not None else [])}
    out = []
    for t in last.targets:
        e = dict(t)
        old = before.get(t["fd"])
        same = old is not None and old.get("path") == t.get("path")
        if same and t.get("size") is not None and old.get("size") is not None:
            e["grew_bytes"] = t["size"] - old["size"]
        if window is not None and t.get("mtime") is not None:
            e["written_in_window"] = t["mtime"] >= window[0] - 0.5
        out.append(e)
    return out, last.why


def _process_entries(table: EvidenceTable, procs: Sequence[ProcFacts],
                     window: Optional[Tuple[float, float]], ref: float) -> List[Dict[str, Any]]:
    out = []
    for p in procs:
        by_phase = table.vitals.get(p.pid, {})
        v, v0 = _latest(by_phase), by_phase.get("start")
        logs, why = _log_entries(table, p.pid, window)
        if v is None and not logs and not why:
            continue
        start = (v.start_time if v is not None else None) or p.start_time
        entry: Dict[str, Any] = {
            "pid": p.pid, "role": p.role, "age_s": round(ref - start, 1) if start else None,
            "start_time": start, "rss_bytes": v.rss_bytes if v else None,
            "cpu_s": v.cpu_s if v else None, "threads": v.num_threads if v else None,
            "cpu_window_s": round(v.cpu_s - v0.cpu_s, 2)
            if v is not None and v0 is not None and v is not v0 and v.cpu_s is not None
            and v0.cpu_s is not None else None,
            "logs": logs, "logs_why": why, "cgroup": cgroup_of(table, p.pid),
            "source": "/proc/PID/stat, /proc/PID/statm; fstat of /proc/PID/fd/N"}
        out.append(entry)
    return out


def _log_findings(processes: List[Dict[str, Any]], window: Optional[Tuple[float, float]],
                  ref: float) -> List[Finding]:
    """"logs-silent": no log target of the tree was written in the window and the newest was
    last written long before it (LOG_SILENT_MIN_S, and three windows)."""
    dated = [(e["mtime"], p["pid"], e) for p in processes for e in p["logs"]
             if e.get("mtime") is not None and e.get("kind") in ("file", "pipe", "fifo", "tty")]
    if not dated:
        return []
    start = window[0] if window else ref
    span = (window[1] - window[0]) if window else 0.0
    grew = [e for _, _, e in dated if (e.get("grew_bytes") or 0) > 0]
    newest, pid, e = max(dated, key=lambda d: d[0])
    quiet = start - newest
    if grew or quiet < max(LOG_SILENT_MIN_S, 3 * span):
        return []
    where = f"{e['role']} → {e['path']}"
    return [Finding("logs-silent", "warn",
                    f"no log of the tree was written for {human_duration(quiet)} before "
                    f"{'the window' if window else 'this snapshot'}: the newest, {where} "
                    f"(pid {real_id(pid)}), last changed {human_duration(ref - newest)} ago",
                    sorted({d[1] for d in dated}), "mtime of the fds' files (fstat)")]


def _port_findings(asks: list) -> List[Finding]:
    out = []
    for a in asks:
        if a.listened_by or not a.local:
            continue
        what = f"{a.option} {a.port}" if a.option.startswith("-") else f"{a.host}:{a.port}"
        who = ", ".join(str(real_id(p)) for p in a.pids)
        if a.serves:
            text = (f"the command line of pid {who} asks for port {a.port} ({what}); nothing "
                    "in the tree listens on it")
        else:
            text = (f"pid {who} names port {a.port} ({what}); nothing in the tree listens on "
                    "it (a rendezvous port is served by one rank or node only)")
        out.append(Finding("port-not-listening", "warn" if a.serves else "info", text,
                           list(a.pids), "/proc/PID/cmdline; /proc/PID/net/tcp*"))
    return out


def human_duration(s: float) -> str:
    """'45 s', '12 min', '3.5 h', '2.0 days' (the renderers' too)."""
    s = max(0.0, s)
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


def build_evidence(table: EvidenceTable, procs: Sequence[ProcFacts],
                   window: Optional[Tuple[float, float]] = None,
                   now: Optional[float] = None) -> Evidence:
    """Evidence and findings (module doc). ``procs``: one ``ProcFacts`` per process of the tree
    (pid, parent, role label, argv, listening sockets, start time). The ``Evidence`` holds
    per-process vitals and log targets, ports, GPU health and kernel log lines (evidence/gpu.py),
    library versions and CUDA graph capture (evidence/libs.py), the ``findings`` that follow from
    them, and ``missing``. ``window`` is (start, end) of a recording; a snapshot has none and uses
    ``now``."""
    ref = window[1] if window else (now if now is not None else 0.0)
    out = Evidence(ref_ts=ref, window=window, recorded=table.fed > 0)
    out.processes = _process_entries(table, procs, window, ref)
    out.containers = container_entries(table, (p.pid for p in procs))
    out.findings.extend(_log_findings(out.processes, window, ref))
    listening, asks = check_ports((p.pid, p.argv, p.listening) for p in procs)
    out.ports = {"listening": [{"pid": pid, "socket": s} for pid, s in listening],
                 "asked": [a.to_json() for a in asks],
                 "source": "/proc/PID/cmdline; /proc/PID/net/tcp*, unix (listening sockets)"}
    out.findings.extend(_port_findings(asks))
    tree = {p.pid for p in procs}
    roles = {p.pid: p.role for p in procs}
    out.gpus, out.kernel_log, gpu_findings = gpu_evidence(table, tree, window)
    out.findings.extend(gpu_findings)
    out.capture, out.graph_calls, cap_findings = capture_evidence(table, roles, window)
    out.findings.extend(cap_findings)
    conditions: Dict[str, Set[int]] = {}
    for p in procs:
        for c in p.conditions:
            conditions.setdefault(c, set()).add(p.pid)
    libs_by_pid, out.host, lib_findings, lib_missing = lib_evidence(table, roles, out.capture,
                                                                    conditions)
    out.findings.extend(lib_findings)
    for p in out.processes:
        p["libs"] = libs_by_pid.pop(p["pid"], [])
    for pid, libs in libs_by_pid.items():    # processes with libraries but no vitals
        out.processes.append({"pid": pid, "role": roles.get(pid, ""), "libs": libs, "logs": []})
    out.missing = [{"what": n.what, "why": n.why, "pid": n.pid} for n in table.notes]
    out.missing.extend(lib_missing)
    cuda = [p["pid"] for p in out.processes if any(x.get("name") == "libcuda"
                                                   for x in p.get("libs") or [])]
    if cuda and window and not out.graph_calls \
            and not any(n.what == "cuda-uprobes" for n in table.notes):
        out.missing.append({"what": "cuda-uprobes", "pid": None,
                            "why": "libcuda's graph calls were not counted: the uprobes run "
                                   "with the eBPF backend only"})
    if out.kernel_log.get("why"):
        out.missing.append({"what": "kmsg", "why": out.kernel_log["why"], "pid": None})
    out.findings.sort(key=lambda f: (f.severity != "warn",))
    return out


def recording_evidence(table: EvidenceTable, processes: Dict[int, Any],
                       roles: Dict[int, str], window: Tuple[float, float]) -> Dict[str, Any]:
    """The evidence of a recording as JSON: ``processes`` are the accumulator's ProcessStats
    (their latest ProcessInfo), ``roles`` the report's role labels."""
    procs = []
    for pid in sorted(processes):
        info = processes[pid].info or processes[pid].first_info
        if info is None:
            continue
        procs.append(ProcFacts(pid, info.ppid, roles.get(pid, ""), list(info.cmdline),
                               list(info.listening), info.start_time,
                               fd_conditions(f.target for f in info.fds)))
    return build_evidence(table, procs, window=window).to_json()

