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
