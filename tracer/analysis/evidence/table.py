"""The evidence events of one recording or snapshot, kept by kind, and the ``Finding`` type
(evidence/build.py's input and output types, shared by evidence/gpu.py and evidence/libs.py).

Contract: ``EvidenceTable.feed`` takes the evidence events (events/evidence.py) and
``feed_gpu`` the ``GpuSample`` readings; memory is bounded by processes and GPUs (at most
``_MAX_SAMPLES`` samples per GPU). The first reading of a process per phase is kept; for GPU
health, the last.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set

from ... import events as ev
from ...events import evidence as xe

__all__ = ["EvidenceTable", "Finding", "GpuLoad", "EVIDENCE_TYPES"]

EVIDENCE_TYPES = xe.EVIDENCE_TYPES


@dataclass
class Finding:
    rule: str
    severity: str
    text: str
    pids: List[int] = field(default_factory=list)
    source: str = ""


@dataclass
class GpuLoad:
    """NVML samples of one GPU during a recording (the newest ``_MAX_SAMPLES``)."""
    util: List[int] = field(default_factory=list)
    power_mw: List[int] = field(default_factory=list)
    clock_mhz: List[int] = field(default_factory=list)
    pids: Set[int] = field(default_factory=set)


_MAX_SAMPLES = 4096


class EvidenceTable:
    """Evidence events of one recording, by kind (module doc)."""

    def __init__(self) -> None:
        self.vitals: Dict[int, Dict[str, xe.ProcessVitals]] = {}
        self.logs: Dict[int, Dict[str, xe.LogTargets]] = {}
        self.cgroups: Dict[int, Dict[str, xe.ProcessCgroup]] = {}
        self.health: Dict[int, Dict[str, xe.GpuHealth]] = {}
        self.load: Dict[int, GpuLoad] = {}
        self.kernel_log: Optional[xe.KernelLog] = None
        self.libs: Dict[int, xe.LoadedLibs] = {}
        self.capture: List[xe.CaptureSite] = []
        self.graph_calls: List[xe.CudaDriverCalls] = []
        self.notes: List[xe.EvidenceNote] = []
        self.fed = 0       # evidence events seen (0: a trace made before they were recorded)

    @property
    def has_gpu_health(self) -> bool:
        return bool(self.health)

    def feed(self, e: ev.Event) -> None:
        self.fed += 1
        t = type(e)
        if t is xe.ProcessVitals:
            self.vitals.setdefault(e.pid, {}).setdefault(e.phase, e)    # type: ignore
        elif t is xe.LogTargets:
            self.logs.setdefault(e.pid, {}).setdefault(e.phase, e)      # type: ignore
        elif t is xe.ProcessCgroup:
            self.cgroups.setdefault(e.pid, {}).setdefault(e.phase, e)   # type: ignore
        elif t is xe.GpuHealth:
            self.health.setdefault(e.gpu, {})[e.phase] = e              # type: ignore
        elif t is xe.KernelLog:
            self.kernel_log = e                                         # type: ignore
        elif t is xe.LoadedLibs:
            self.libs[e.pid] = e                                        # type: ignore
        elif t is xe.CaptureSite:
            self.capture.append(e)                                      # type: ignore
        elif t is xe.CudaDriverCalls:
            self.graph_calls.append(e)                                  # type: ignore
        elif t is xe.EvidenceNote:
            self.notes.append(e)                                        # type: ignore

    def feed_gpu(self, s: ev.GpuSample) -> None:
        """Utilization, power and SM clock of one NVML sample, summed per GPU."""
        load = self.load.setdefault(s.gpu, GpuLoad())
        if s.util_pct is not None:
            load.util.append(s.util_pct)
        power = getattr(s, "power_mw", None)
        if power is not None:
            load.power_mw.append(power)
        clock = getattr(s, "sm_clock_mhz", None)
        if clock is not None:
            load.clock_mhz.append(clock)
        load.pids.update(s.pids)
        for seq in (load.util, load.power_mw, load.clock_mhz):
            if len(seq) > _MAX_SAMPLES:     # keep the newest: bounded memory
                del seq[:len(seq) - _MAX_SAMPLES]
