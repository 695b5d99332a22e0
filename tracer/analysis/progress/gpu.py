"""GPU work that advances: the device a host thread waits for does real work, measured by
GPM's SM activity or by board power against the enforced limit, never by utilization.gpu (a
spinning one-thread kernel reads 100% there; measured on the H200: reference/progress-signals).

Contract (each returns a sentence of evidence, or None):
- ``gpu_work(gpus, pid)``: a GPU that process ``pid`` uses did real work over the recording.
- ``driver_work(e)``: one thread's libcuda calls (a ``CudaDriverCalls``, uprobes) show its GPU
  work completing; a poll that finds long-finished work ready is a heartbeat, not work.
- ``gpu_memory_grows(gpus, pid)``: the GPU memory NVML gives ``pid`` grew fast enough.
- ``driver_stall(e)``: "in a CUDA sync since N s before the end, its last completion M s
  earlier" for a thread inside a sync it was seen entering.
"""
from __future__ import annotations

from typing import List, Mapping, Optional

from ...events.evidence import CudaDriverCalls
from ..accumulate.gpu import LOW_POWER_FRACTION, SM_ACTIVE_WORK_PCT, GpuStats

__all__ = ["gpu_work", "driver_work", "driver_stall", "gpu_memory_grows", "RECENT_S",
           "last_completion", "stalled_sync",
           "GPU_MEM_MIN_BYTES", "GPU_MEM_MIN_RATE"]

RECENT_S = 1.0
GPU_MEM_MIN_BYTES = 16 << 20      # an allocator's churn stays below
GPU_MEM_MIN_RATE = 1 << 20        # bytes a second


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
    """The evidence that a GPU ``pid`` uses (NVML lists it among the GPU's compute pids; every GPU
    when NVML lists none) did real work over the recording: mean SM activity at least
    ``SM_ACTIVE_WORK_PCT`` where GPM was read, else mean power at least ``LOW_POWER_FRACTION`` of
    the power limit; else None (no readings, no limit, or a device near its idle draw: a kernel
    that never ends, or no work at all)."""
    listed = any(g.pids for g in gpus.values())
    for g in sorted(gpus.values(), key=lambda g: g.gpu):
        if listed and pid not in g.pids:
            continue
        works = _works(g)
        if works:
            return f"GPU {g.gpu}, which it uses, does real work: {works}"
    return None


def _rate(n: int, span: float) -> str:
    return f"{n} ({n / span:.1f}/s)" if span > 0 else str(n)


def _recent(e: CudaDriverCalls) -> float:
    span = max(e.ts - e.since, 0.0)
    return max(RECENT_S, span / 4)


def last_completion(e: CudaDriverCalls) -> Optional[float]:
    """When the thread last saw its GPU work complete: a sync returned, a query ready."""
    return max((t for t in (e.last_sync_done, e.last_ready) if t is not None), default=None)


def stalled_sync(e: Optional[CudaDriverCalls]) -> bool:
    """The thread is inside a sync it was seen entering, for longer than ``RECENT_S``."""
    return e is not None and e.work_probed and e.in_sync_since is not None \
        and e.ts - e.in_sync_since > RECENT_S


def driver_stall(e: Optional[CudaDriverCalls]) -> Optional[str]:
    """The thread's unfinished sync (module doc), or None."""
    if e is None or not e.work_probed or e.in_sync_since is None:
        return None
    last = last_completion(e)
    ago = f", its last completion {e.ts - last:.1f} s before the end" if last else \
        ", no completion seen in the window"
    return f"in a CUDA sync since {e.ts - e.in_sync_since:.1f} s before the end{ago}"


def driver_work(e: Optional[CudaDriverCalls]) -> Optional[str]:
    """The evidence that one thread's GPU work completes, or None. Work submitted in the window
    (kernels, graphs, copies) and completions seen (a sync returned with CUDA_SUCCESS, a query
    answered ready), the last of them within ``RECENT_S`` (or a quarter of the window) of its end,
    and the thread not inside a sync since longer than that; or CUDA graph captures ended in the
    window. Else None: a sync that never returns, queries answered "not ready", only old
    completions, or a trace from before these counts (``work_probed`` False). A poll that finds
    long-finished work ready, without new work submitted, is a heartbeat, not work."""
    if e is None or not e.work_probed:
        return None
    span, recent = max(e.ts - e.since, 0.0), _recent(e)
    if e.in_sync_since is not None and e.ts - e.in_sync_since > recent:
        return None
    submitted, done = e.kernels + e.launches + e.copies, e.syncs_done + e.queries_ready
    last = max((t for t in (e.last_sync_done, e.last_ready, e.last_end) if t is not None),
               default=None)
    if last is None or e.ts - last > recent:
        return None
    parts: List[str] = []
    if submitted and done:
        parts += [f"{label} {_rate(n, span)}" for label, n in (
            ("kernels launched", e.kernels), ("graphs launched", e.launches),
            ("copies", e.copies), ("syncs returned", e.syncs_done),
            ("queries answered ready", e.queries_ready)) if n]
    elif e.ends:
        parts.append(f"CUDA graph captures ended {_rate(e.ends, span)}")
    if not parts:
        return None
    return ("its GPU work completes (libcuda uprobes): " + ", ".join(parts)
            + f"; the last {e.ts - last:.2f} s before the end")


def gpu_memory_grows(gpus: Mapping[int, GpuStats], pid: int) -> Optional[str]:
    """The evidence that process ``pid`` fills GPU memory, or None: its GPU memory grew by at least
    ``GPU_MEM_MIN_BYTES`` at ``GPU_MEM_MIN_RATE`` a second or more between its first and last
    samples (weights copied to the GPU, a KV cache allocated)."""
    for g in sorted(gpus.values(), key=lambda g: g.gpu):
        first, last = g.pid_mem_first.get(pid), g.pid_mem_last.get(pid)
        if first is None or last is None or last[0] <= first[0]:
            continue
        grew, span = last[1] - first[1], last[0] - first[0]
        if grew >= GPU_MEM_MIN_BYTES and grew / span >= GPU_MEM_MIN_RATE:
            return (f"its memory on GPU {g.gpu} grew from {first[1] / 2**20:.0f} to "
                    f"{last[1] / 2**20:.0f} MiB ({grew / span / 2**20:.0f} MiB/s, NVML)")
    return None
