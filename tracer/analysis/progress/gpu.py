"""GPU work that advances: the device a host thread waits for does real work, measured by
GPM's SM activity or by board power against the enforced limit, never by utilization.gpu (a
spinning one-thread kernel reads 100% there; measured on the H200: reference/progress-signals).

Contract: ``gpu_work(gpus, pid)`` -> a sentence when a GPU that process ``pid`` uses (NVML
lists it among the GPU's compute pids; every GPU when NVML lists none) did real work over the
recording: mean SM activity at least ``SM_ACTIVE_WORK_PCT`` where GPM was read, else mean
power at least ``LOW_POWER_FRACTION`` of the power limit; else None (no readings, no limit,
or a device near its idle draw: a kernel that never ends, or no work at all).
"""
from __future__ import annotations

from typing import Mapping, Optional

from ..accumulate.gpu import LOW_POWER_FRACTION, SM_ACTIVE_WORK_PCT, GpuStats

__all__ = ["gpu_work"]


def _works(g: GpuStats) -> Optional[str]:
    active, power, limit = g.mean_sm_active, g.mean_power_mw, g.power_limit_mw
    watts = (f"{power / 1000:.0f} W of {limit / 1000:.0f} W ({power / limit:.0%} of its "
             "limit)") if power is not None and limit else None
    if active is not None:
        if active < SM_ACTIVE_WORK_PCT:
            return None
        return f"SM activity {active:.0f}% (GPM)" + (f", {watts}" if watts else "")
    if watts is None or power / limit < LOW_POWER_FRACTION:  # type: ignore[operator]
        return None
    return watts


def gpu_work(gpus: Mapping[int, GpuStats], pid: int) -> Optional[str]:
    """The evidence that a GPU ``pid`` uses does real work (module doc), or None."""
    listed = any(g.pids for g in gpus.values())
    for g in sorted(gpus.values(), key=lambda g: g.gpu):
        if listed and pid not in g.pids:
            continue
        works = _works(g)
        if works:
            return f"GPU {g.gpu}, which it uses, does real work: {works}"
    return None
