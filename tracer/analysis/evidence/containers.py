"""The containers of a tree: each process's ``ProcessCgroup`` (events/evidence.py) grouped by
the container it runs in, for the report's one line per container.

Contract: ``container_entries(table, pids)`` is pure: one dict per container of ``pids``
(``runtime``, ``id``, ``short``, ``pod_uid``, ``qos``, ``cgroup``: the container's own
cgroup, the deciding path cut after the component that names it, ``version``, ``pids``),
ordered by their lowest pid; processes in no container are in none. ``cgroup_of(table, pid)``:
the process's cgroup path, None when it was not read.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional

from ...events.evidence import ProcessCgroup
from .table import EvidenceTable

__all__ = ["container_entries", "cgroup_of"]

_PHASES = ("end", "snapshot", "start")


def _fact(table: EvidenceTable, pid: int) -> Optional[ProcessCgroup]:
    by_phase = table.cgroups.get(pid) or {}
    for phase in _PHASES:
        if phase in by_phase:
            return by_phase[phase]
    return next(iter(by_phase.values()), None)


def cgroup_of(table: EvidenceTable, pid: int) -> Optional[str]:
    """The cgroup path of ``pid``'s latest reading, None when none (module doc)."""
    f = _fact(table, pid)
    return f.path if f is not None and not f.why else None


def _own_cgroup(path: str, cid: str) -> str:
    """``path`` up to and including the component that holds the container's id."""
    parts = path.split("/")
    for i, part in enumerate(parts):
        if cid in part.lower():
            return "/".join(parts[:i + 1]) or "/"
    return path


def container_entries(table: EvidenceTable, pids: Iterable[int]) -> List[Dict[str, Any]]:
    """One entry per container of ``pids`` (module doc)."""
    out: Dict[str, Dict[str, Any]] = {}
    for pid in sorted(set(pids)):
        f = _fact(table, pid)
        if f is None or not f.container_id:
            continue
        entry = out.get(f.container_id)
        if entry is None:
            entry = out[f.container_id] = {
                "runtime": f.runtime, "id": f.container_id, "short": f.container_id[:12],
                "pod_uid": f.pod_uid, "qos": f.qos, "version": f.version,
                "cgroup": _own_cgroup(f.path, f.container_id), "pids": []}
        entry["pids"].append(pid)
    return list(out.values())
