"""NVML readings accumulated per GPU (``GpuSample`` events of the NVML backend).

Contract: ``GpuAccumulator.feed`` takes ``events.GpuSample`` and keeps ``GpuStats`` per GPU
(memory bounded by GPUs and pids): samples, how many were busy (``BUSY_UTIL``) or idle
(``IDLE_UTIL``), mean utilization, memory, the compute pids, mean power against the limit and
GPM's SM activity (the power fractions every rule of GPU work uses are here). ``holds_gpu(fds)``: the process
has the NVIDIA device files open. Rules over these readings are in threads/gpu.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, Optional, Set, Tuple

from ... import events as ev
from ...linux.fdtarget import GPU_KINDS as GPU_FD_KINDS

BUSY_UTIL = 90          # percent: the GPU is running a kernel (NVML utilization)
IDLE_UTIL = 5           # percent: nothing runs on the GPU
MOST = 0.8              # fraction of samples that must agree
# Board power against the enforced limit (an H200 draws 17-18% of its 700 W limit idle or with
# a one-thread spinning kernel, 28% capturing CUDA graphs, 98% in bf16 matmuls):
LOW_POWER_FRACTION = 0.25       # below: a resident kernel that barely computes (one that waits)
COMPUTE_POWER_FRACTION = 0.40   # at or above: its kernels are computing hard
SM_ACTIVE_WORK_PCT = 5.0        # GPM SM activity at or above: SMs busy (a spinning kernel: 0.8)


def holds_gpu(fds: Iterable[ev.FdInfo]) -> bool:
    """The process has the NVIDIA device files open (a CUDA context lives in it)."""
    return any(f.kind in GPU_FD_KINDS for f in fds)


@dataclass
class GpuStats:
    """What NVML showed of one GPU during the recording."""
    gpu: int
    uuid: str = ""
    samples: int = 0
    busy: int = 0                 # samples at or above BUSY_UTIL
    idle: int = 0                 # samples at or below IDLE_UTIL
    util_sum: int = 0
    util_known: int = 0
    first_ts: Optional[float] = None
    last_ts: Optional[float] = None
    mem_used: Optional[int] = None
    mem_total: Optional[int] = None
    pids: Set[int] = field(default_factory=set)
    power_sum: int = 0
    power_known: int = 0
    power_limit_mw: Optional[int] = None
    sm_active_sum: float = 0.0
    sm_active_known: int = 0
    # pid -> (ts, bytes) of the first and of the last sample that gave its GPU memory
    pid_mem_first: Dict[int, Tuple[float, int]] = field(default_factory=dict)
    pid_mem_last: Dict[int, Tuple[float, int]] = field(default_factory=dict)

    @property
    def mean_power_mw(self) -> Optional[float]:
        return self.power_sum / self.power_known if self.power_known else None

    @property
    def mean_sm_active(self) -> Optional[float]:
        return self.sm_active_sum / self.sm_active_known if self.sm_active_known else None

    @property
    def mean_util(self) -> Optional[float]:
        return self.util_sum / self.util_known if self.util_known else None

    @property
    def span(self) -> float:
        if self.first_ts is None or self.last_ts is None:
            return 0.0
        return self.last_ts - self.first_ts


class GpuAccumulator:
    """Feeds ``GpuSample`` events into ``GpuStats`` per GPU (memory bounded by GPUs and pids)."""

    def __init__(self) -> None:
        self.gpus: Dict[int, GpuStats] = {}

    def feed(self, e: ev.Event) -> None:
        if not isinstance(e, ev.GpuSample):
            return
        g = self.gpus.get(e.gpu)
        if g is None:
            g = self.gpus[e.gpu] = GpuStats(gpu=e.gpu, uuid=e.uuid)
        g.samples += 1
        if g.first_ts is None:
            g.first_ts = e.ts
        g.last_ts = e.ts
        if e.util_pct is not None:
            g.util_known += 1
            g.util_sum += e.util_pct
            if e.util_pct >= BUSY_UTIL:
                g.busy += 1
            if e.util_pct <= IDLE_UTIL:
                g.idle += 1
        if e.mem_used is not None:
            g.mem_used, g.mem_total = e.mem_used, e.mem_total
        if len(g.pids) < 1024:
            g.pids.update(e.pids)
        power = getattr(e, "power_mw", None)
        if power is not None:
            g.power_sum += power
            g.power_known += 1
        limit = getattr(e, "power_limit_mw", None)
        if limit:
            g.power_limit_mw = limit
        for pid, used in (getattr(e, "pid_mem", None) or {}).items():
            if pid in g.pid_mem_first or len(g.pid_mem_first) < 1024:
                g.pid_mem_first.setdefault(pid, (e.ts, used))
                g.pid_mem_last[pid] = (e.ts, used)
        active = getattr(e, "sm_active_pct", None)
        if active is not None:
            g.sm_active_sum += active
            g.sm_active_known += 1
