"""Loaded library versions, known hang bugs and CUDA graph capture as evidence (pure;
evidence/build.py gathers them).

Contract:
- ``lib_evidence(table, roles, capture)`` -> (libs by pid, host facts, findings, missing):
  "version-mismatch", "driver-mismatch" and "known-bug" (tracer/data/known_hang_bugs.json,
  each with its public references, under the conditions it lists: its docstring).
- ``capture_evidence(table, roles, window)`` -> (capture sites, uprobe counts, findings):
  "in-graph-capture" for a thread inside a capture, "in-capture-phase" for one in a runner's
  capture loop (warm-up runs included).
- ``version_key("2.21.5")`` -> (2, 21, 5): the numeric dotted prefix, for comparisons.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from .table import EvidenceTable, Finding

__all__ = ["lib_evidence", "capture_evidence", "load_known_bugs", "bug_matches", "version_key",
           "KNOWN_BUGS_PATH", "condition_pids", "fd_conditions"]

KNOWN_BUGS_PATH = Path(__file__).resolve().parents[2] / "data" / "known_hang_bugs.json"
_NUM = re.compile(r"^\d+(\.\d+)*")
_known_cache: Dict[str, List[Dict[str, Any]]] = {}
_LABELS = {"nccl": "NCCL", "libcuda": "libcuda", "cudart": "CUDA runtime", "torch": "torch",
           "flashinfer": "flashinfer", "sgl-kernel": "sgl-kernel", "vllm": "vLLM"}


def version_key(v: str) -> Tuple[int, ...]:
    m = _NUM.match(v or "")
    return tuple(int(x) for x in m.group(0).split(".")) if m else ()


def load_known_bugs(path: Optional[Path] = None) -> List[Dict[str, Any]]:
    p = str(path or KNOWN_BUGS_PATH)
    if p not in _known_cache:
        try:
            with open(p) as f:
                _known_cache[p] = list(json.load(f).get("bugs", []))
        except (OSError, ValueError):
            _known_cache[p] = []
    return _known_cache[p]


def bug_matches(bug: Dict[str, Any], name: str, version: str) -> bool:
    if bug.get("library") != name or not version_key(version):
        return False
    v = version_key(version)
    if any(version_key(x) == v for x in bug.get("versions", [])):
        return True
    lo, hi = bug.get("from"), bug.get("before")
    if lo is None and hi is None:
        return False
    return (lo is None or v >= version_key(lo)) and (hi is None or v < version_key(hi))


def _who(pids: Sequence[int], roles: Dict[int, str]) -> str:
    parts = [f"{p} ({roles[p]})" if roles.get(p) and roles[p] != "other" else str(p)
             for p in sorted(pids)]
    return "pid " + ", ".join(parts[:6]) + (f" and {len(parts) - 6} more" if len(parts) > 6 else "")


def _short_ref(url: str) -> str:
    m = re.match(r"https://github\.com/([^/]+/[^/]+)/(?:issues|pull)/(\d+)", url)
    return f"{m.group(1)}#{m.group(2)}" if m else url


def lib_evidence(table: EvidenceTable, roles: Dict[int, str],
                 capture: Sequence[Dict[str, Any]],
                 conditions: Optional[Mapping[str, Iterable[int]]] = None
                 ) -> Tuple[Dict[int, List[Dict[str, Any]]], List[Dict[str, Any]],
                            List[Finding], List[Dict[str, Any]]]:
    """(libs by pid, host facts, findings, missing): "version-mismatch" when processes of the tree
    load different versions of one library (ranks built from different environments),
    "driver-mismatch" when libcuda's version differs from the NVIDIA kernel module's, "known-bug"
    when a loaded version matches an entry of tracer/data/known_hang_bugs.json (each with its
    public references) and every condition it lists under "when" holds in a process that loads it:
    "capture" (inside CUDA graph capture or a capture phase), "multi-node" (a TCP connection to
    another host), "rdma" (an RDMA device open); ``conditions`` maps the last two to the pids where
    they hold (``tree_conditions``)."""
    by_pid = {pid: list(e.libs) for pid, e in table.libs.items() if pid != 0}
    host = list(table.libs[0].libs) if 0 in table.libs else []
    missing = []
    whys = sorted({e.why for pid, e in table.libs.items() if e.why})
    for why in whys:
        missing.append({"what": "libs", "why": why, "pid": None})
    findings: List[Finding] = []
    versions: Dict[str, Dict[str, List[int]]] = {}
    for pid, libs in by_pid.items():
        for lib in libs:
            if lib.get("version"):
                versions.setdefault(lib["name"], {}).setdefault(lib["version"], []).append(pid)
    for name, vers in sorted(versions.items()):
        if len(vers) > 1:
            parts = [f"{v} in {_who(p, roles)}" for v, p in sorted(vers.items())]
            findings.append(Finding("version-mismatch", "warn",
                                    f"processes of the tree load different {_LABELS.get(name, name)}"
                                    f" versions: {'; '.join(parts)}",
                                    sorted(p for ps in vers.values() for p in ps),
                                    "/proc/PID/maps and the libraries' version strings"))
    kmod = next((h.get("version") for h in host if h.get("name") == "nvidia.ko"), None)
    for v, pids in (versions.get("libcuda") or {}).items():
        if kmod and v != kmod:
            findings.append(Finding("driver-mismatch", "warn",
                                    f"{_who(pids, roles)} load libcuda {v} but the NVIDIA kernel "
                                    f"module is {kmod}: a driver/library version mismatch",
                                    sorted(pids), "/proc/PID/maps; /sys/module/nvidia/version"))
    holds = {"capture": {c["pid"] for c in capture}}
    holds.update({k: set(v) for k, v in (conditions or {}).items()})
    for bug in load_known_bugs():
        name = bug.get("library", "")
        for v, pids in sorted((versions.get(name) or {}).items()):
            if not bug_matches(bug, name, v):
                continue
            now = condition_pids(bug, pids, holds)
            if not now:
                continue           # its conditions do not hold in this tree: not this bug
            refs = ", ".join(_short_ref(r) for r in bug.get("refs", []))
            text = (f"{_LABELS.get(name, name)} {v} ({_who(pids, roles)}) has a known hang: "
                    f"{bug.get('summary', '')}"
                    + (f", fixed in {bug['fixed_in']}" if bug.get("fixed_in") else "")
                    + (f" ({refs})" if refs else ""))
            said = [_CONDITION_TEXT[c] for c in _conditions(bug) if c in _CONDITION_TEXT]
            if said:
                text += f"; {_who(now, roles)} " + " and ".join(said) + " now"
            findings.append(Finding("known-bug", "warn", text, sorted(pids),
                                    "tracer/data/known_hang_bugs.json"))
    return by_pid, host, findings, missing


def _host(addr: str) -> str:
    """The address of "host:port" ("[::1]:80" too)."""
    return addr.rsplit(":", 1)[0].strip("[]")


def _loopback(host: str) -> bool:
    return host.startswith("127.") or host in ("::1", "localhost") \
        or host.startswith("::ffff:127.")


def fd_conditions(targets: Iterable[str]) -> Set[str]:
    """The conditions a process's fd targets show ("TCP:[a:p->b:q]", "/dev/infiniband/uverbs0"):
    "multi-node" for a TCP connection whose two ends are on different, non-loopback addresses,
    "rdma" for an RDMA device."""
    from ...linux.fdtarget import FdTarget
    out: Set[str] = set()
    for text in targets:
        if text.startswith("/dev/infiniband/"):
            out.add("rdma")
            continue
        if not text.startswith(("TCP", "tcp")):
            continue
        t = FdTarget.parse(text)
        if t.local and t.remote:
            a, b = _host(t.local), _host(t.remote)
            if a != b and not _loopback(a) and not _loopback(b) and b not in ("0.0.0.0", "::"):
                out.add("multi-node")
    return out


_CONDITION_TEXT = {"capture": "is inside CUDA graph capture",
                   "multi-node": "talks to another host", "rdma": "has an RDMA device open"}


def _conditions(bug: Dict[str, Any]) -> List[str]:
    when = bug.get("when") or []
    return [when] if isinstance(when, str) else list(when)


def condition_pids(bug: Dict[str, Any], pids: Sequence[int],
                   holds: Mapping[str, Set[int]]) -> List[int]:
    """Those of ``pids`` (the processes that load the bug's version) where every condition of
    the bug holds; a bug without conditions holds wherever it is loaded. ``holds``: condition
    -> the pids where it holds; a condition nothing measures holds nowhere."""
    out = set(pids)
    for c in _conditions(bug):
        out &= holds.get(c, set())
    return sorted(out)


def capture_evidence(table: EvidenceTable, roles: Dict[int, str],
                     window: Optional[Tuple[float, float]]
                     ) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]], List[Finding]]:
    """(capture sites, uprobe counts, findings) (module doc): one finding per thread, naming
    every source that saw it.
    "in-graph-capture": a capture call or a ``with torch.cuda.graph`` body on the thread's Python
    stack, or a capture begun without end seen by the libcuda uprobes."""
    sites: List[Dict[str, Any]] = []
    seen: Dict[Tuple[int, int], List[Tuple[bool, str, str]]] = {}   # (inside, text, source)
    for c in table.capture:
        inside = c.how in ("capture-call", "with-block")
        sites.append({"pid": c.pid, "tid": c.tid, "how": c.how, "frame": c.frame,
                      "detail": c.detail, "inside": inside, "source": "Python stack (py-spy)"})
        text = {"capture-call": f"starting or ending a capture in {c.frame}",
                "with-block": f"{c.detail} at {c.frame}",
                "phase": f"in a capture phase: {c.detail} at {c.frame}",
                "runner": f"in a CUDA graph runner's capture loop (warm-up or capture): "
                          f"{c.frame}"}[c.how]
        seen.setdefault((c.pid, c.tid), []).append((inside, text, "Python stack"))
    calls: List[Dict[str, Any]] = []
    for g in table.graph_calls:
        calls.append({"pid": g.pid, "tid": g.tid, "begins": g.begins, "ends": g.ends,
                      "launches": g.launches, "open_streams": list(g.open_streams),
                      "since": g.since, "until": g.ts, "source": "uprobes on libcuda"})
        if g.work_probed:
            calls[-1].update(kernels=g.kernels, copies=g.copies, syncs=g.syncs,
                             syncs_done=g.syncs_done, syncs_failed=g.syncs_failed,
                             queries_ready=g.queries_ready,
                             queries_not_ready=g.queries_not_ready,
                             in_sync_since=g.in_sync_since)
        if g.nccl_probed:
            calls[-1].update(collectives=g.collectives, last_op=g.last_op,
                             in_nccl_since=g.in_nccl_since)
        if g.open_streams:
            streams = ", ".join(g.open_streams)
            sites.append({"pid": g.pid, "tid": g.tid, "how": "uprobe", "frame": "",
                          "detail": f"cuStreamBeginCapture without end on stream {streams}",
                          "inside": True, "source": "uprobes on libcuda"})
            seen.setdefault((g.pid, g.tid), []).append(
                (True, f"began capturing stream {streams} and has not ended it",
                 "libcuda uprobes"))
    findings: List[Finding] = []
    for (pid, tid), items in seen.items():
        inside = any(i for i, _, _ in items)
        what = "is inside CUDA graph capture" if inside else "is in a CUDA graph capture phase"
        detail = "; ".join(f"{src}: {text}" for _, text, src in items)
        findings.append(Finding("in-graph-capture" if inside else "in-capture-phase",
                                "warn" if inside else "info",
                                f"{_who([pid], roles)} thread {tid} {what} ({detail})", [pid],
                                " and ".join(sorted({src for _, _, src in items}))))
    return sites, calls, findings
