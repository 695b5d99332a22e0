"""The evidence an engineer checks by hand, gathered at the start and end of a recording and by
``snapshot`` (issue 14): process vitals, log targets and cgroups (procinfo.py), NVIDIA driver lines of
the kernel log (kmsg.py), library versions (libs.py, elfver.py), GPU health (gpu/nvml_health.py,
read by the NVML backend or here) and CUDA graph capture in Python stacks (capture.py).

Contract:
- ``evidence_start_probe`` and ``evidence_end_probe`` are session probes (session.py
  ``EndProbe`` signature): they only read /proc, /sys, /dev/kmsg, NVML and the files the targets
  map, and return ``evidence_events`` objects for the trace. The end probe also says, in one
  ``EvidenceNote``, why GPU health is missing when the recording had none.
- ``collect(pids, phase)`` is the same for ``snapshot``: everything at one instant.
- Nothing here raises for what cannot be read: it becomes a note.
"""
from __future__ import annotations

import time
from typing import List, Optional

from ... import events as ev
from ...events.evidence import EvidenceNote, ProcessVitals
from .kmsg import read_nvrm_lines
from .libs import read_loaded_libs
from .procinfo import read_cgroup_fact, read_log_targets, read_vitals

__all__ = ["evidence_start_probe", "evidence_end_probe", "collect", "gpu_health_now"]


def _per_process(pids: List[int], phase: str, now: float) -> List[ev.Event]:
    out: List[ev.Event] = []
    for pid in pids:
        v = read_vitals(pid, phase=phase, ts=now)
        if v is None:
            continue        # gone: its exit is in the trace already
        out.append(v)
        out.append(read_log_targets(pid, phase=phase, ts=now))
        cg = read_cgroup_fact(pid, phase=phase, ts=now)
        if cg is not None:
            out.append(cg)
    return out


def gpu_health_now(phase: str, now: Optional[float] = None) -> List[ev.Event]:
    """GpuHealth of every GPU (and, for snapshot, one GpuSample each), or one note why not."""
    from ...gpu.nvml import NvmlError, open_nvml
    ts = time.time() if now is None else now
    try:
        nv = open_nvml()
    except NvmlError as exc:
        return [EvidenceNote(ts=ts, what="gpu", why=str(exc))]
    except Exception as exc:   # a broken library must not break the recording
        return [EvidenceNote(ts=ts, what="gpu", why=f"NVML unusable: {exc}")]
    try:
        out: List[ev.Event] = list(nv.health(ts, phase))
        if phase == "snapshot":
            out.extend(nv.read(ts))
        return out
    except Exception as exc:
        return [EvidenceNote(ts=ts, what="gpu", why=f"NVML read failed: {exc}")]
    finally:
        nv.close()


def _oldest_start(events: List[ev.Event]) -> Optional[float]:
    starts = [e.start_time for e in events if isinstance(e, ProcessVitals) and e.start_time]
    return min(starts) if starts else None


def evidence_start_probe(pids: List[int], analyzer: object = None) -> List[ev.Event]:
    """Session probe at the start of a recording: vitals, log targets and cgroups (phase
    "start")."""
    return _per_process(list(pids), "start", time.time())


def evidence_end_probe(pids: List[int], analyzer: object = None) -> List[ev.Event]:
    """Session probe at the end: vitals and log targets again, NVRM kernel log lines since the
    oldest process started, loaded library versions, and GPU health if the recording has none."""
    now = time.time()
    out = _per_process(list(pids), "end", now)
    out.append(read_nvrm_lines(_oldest_start(out)))
    out.extend(read_loaded_libs([e.pid for e in out if isinstance(e, ProcessVitals)], ts=now))
    table = getattr(analyzer, "evidence", None)
    if table is None or not getattr(table, "has_gpu_health", False):
        out.extend(gpu_health_now("end", now))
    return out


evidence_start_probe.__name__ = "evidence (start)"
evidence_end_probe.__name__ = "evidence (end)"


def collect(pids: List[int], phase: str = "snapshot") -> List[ev.Event]:
    """Everything at one instant (``snapshot``): per-process evidence, kernel log, libraries,
    GPU health and utilization."""
    now = time.time()
    out = _per_process(list(pids), phase, now)
    out.append(read_nvrm_lines(_oldest_start(out)))
    out.extend(read_loaded_libs([e.pid for e in out if isinstance(e, ProcessVitals)], ts=now))
    out.extend(gpu_health_now(phase, now))
    return out

