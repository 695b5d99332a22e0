"""GPU work that advances (analysis/progress/gpu.py), on the H200's measured readings
(reference/progress-signals.md): power against the limit and GPM's SM activity tell a
computing device from a spinning kernel; utilization does not."""
from __future__ import annotations

import pytest

from tracer import events as ev
from tracer.analysis.accumulate.gpu import GpuAccumulator
from tracer.analysis.progress.gpu import gpu_work


def _gpus(util, watts, active=None, pids=(42,), limit_w=700):
    acc = GpuAccumulator()
    for i in range(5):
        acc.feed(ev.GpuSample(ts=float(i), gpu=0, util_pct=util, pids=list(pids),
                              power_mw=int(watts * 1000), power_limit_mw=limit_w * 1000,
                              sm_active_pct=active))
    return acc.gpus


@pytest.mark.parametrize("util,watts,active,works", [
    (0, 118, None, None),                         # an idle context
    (100, 121, None, None),                       # a one-thread kernel that never ends
    (100, 118, 0.8, None),                        # the same, with GPM
    (95, 688, None, "688 W of 700 W (98% of its limit)"),   # bf16 matmuls
    (98, 647, 93.6, "SM activity 94% (GPM), 647 W of 700 W"),
    (22, 195, None, "195 W of 700 W (28% of its limit)"),   # CUDA graph capture
])
def test_real_work_by_power_and_sm_activity(util, watts, active, works):
    got = gpu_work(_gpus(util, watts, active), 42)
    assert (got is None) if works is None else (works in got)


def test_only_a_gpu_the_process_uses_counts():
    assert gpu_work(_gpus(95, 688, pids=(7,)), 42) is None
    assert gpu_work(_gpus(95, 688, pids=()), 42) is not None     # NVML lists no pid at all
    assert gpu_work(_gpus(95, 688, limit_w=0), 42) is None       # no limit: power says nothing
    assert gpu_work({}, 42) is None


# ------------------------------------------------------ libcuda driver calls (uprobes)
from tracer.analysis.progress.gpu import driver_stall, driver_work  # noqa: E402
from tracer.events.evidence import CudaDriverCalls  # noqa: E402


def _calls(**kw):
    base = dict(ts=108.0, pid=42, tid=43, since=100.0, work_probed=True)
    base.update(kw)
    return CudaDriverCalls(**base)


# The H200 recordings of fixtures/gpu/driver-calls-run/serving-ebpf.txt, in a window of 8 s.
@pytest.mark.parametrize("name,kw,works", [
    ("warm-up", dict(kernels=8178, syncs=4089, syncs_done=4089, last_sync_done=107.99),
     "kernels launched 8178 (1022.2/s), syncs returned 4089 (511.1/s)"),
    ("capture", dict(kernels=86852, launches=9924, syncs=4963, syncs_done=4963, begins=2482,
                     ends=2481, last_sync_done=107.9, last_end=107.95),
     "graphs launched 9924"),
    ("a capture alone", dict(begins=3, ends=3, last_end=107.5), "CUDA graph captures ended 3"),
    ("a sync entered in the window that never returned",
     dict(kernels=800, syncs=101, syncs_done=100, last_sync_done=102.0, in_sync_since=102.0),
     None),
    ("completions long before the end", dict(kernels=800, syncs=100, syncs_done=100,
                                             last_sync_done=103.0), None),
    ("a poll that finds old work ready, nothing new submitted",
     dict(queries_ready=8, last_ready=107.9), None),
    ("queries that never find the work done",
     dict(kernels=8, queries_not_ready=4000), None),
    ("a trace from before the counts", dict(kernels=8, syncs_done=8, last_sync_done=107.9,
                                            work_probed=False), None),
    ("inside a sync at the very end (a step in progress)",
     dict(kernels=1768, copies=221, syncs=221, syncs_done=220, last_sync_done=107.99,
          in_sync_since=107.995), "copies 221"),
])
def test_gpu_work_completes_by_driver_calls(name, kw, works):
    got = driver_work(_calls(**kw))
    assert (got is None) if works is None else (works in got), (name, got)


def test_a_sync_that_never_returns_is_said():
    stall = driver_stall(_calls(kernels=800, syncs=101, syncs_done=100, last_sync_done=102.0,
                                in_sync_since=102.0))
    assert stall == ("in a CUDA sync since 6.0 s before the end, its last completion 6.0 s "
                     "before the end")
    assert driver_stall(_calls(kernels=8)) is None
    assert driver_stall(_calls(in_sync_since=101.0, work_probed=False)) is None


# ------------------------------------------------------ per-process GPU memory (NVML)
from tracer.analysis.progress.gpu import gpu_memory_grows  # noqa: E402


def _mem(*readings, pid=42):
    acc = GpuAccumulator()
    for ts, mib in readings:
        acc.feed(ev.GpuSample(ts=ts, gpu=0, pids=[pid], pid_mem={pid: mib << 20}))
    return acc.gpus


@pytest.mark.parametrize("readings,grows", [
    ([(0.0, 1200), (3.0, 1800), (6.0, 2400)], "grew from 1200 to 2400 MiB (200 MiB/s, NVML)"),
    ([(0.0, 1200), (6.0, 1208)], None),            # an allocator's churn
    ([(0.0, 2400), (6.0, 1200)], None),            # memory freed
    ([(0.0, 1200)], None),                         # one sample says nothing
])
def test_gpu_memory_that_grows(readings, grows):
    got = gpu_memory_grows(_mem(*readings), 42)
    assert (got is None) if grows is None else (grows in got)
    assert gpu_memory_grows(_mem(*readings), 7) is None        # another process's
