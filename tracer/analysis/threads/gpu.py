"""GPU waits as first-class evidence: a thread rule and the notes from NVML readings.

Contract: pure functions of the accumulated recording (no I/O), like threads/thread.py.
- ``rule_gpu_work_completes``: a thread whose own libcuda calls show its GPU work completing
  progresses; it goes before ``rule_gpu_computes``.
- ``rule_gpu_computes``: a busy host thread whose GPU does real work or fills memory
  progresses; it goes before the spin- and yield-sync rules.
- ``rule_gpu_sync_wait``: a busy thread inside a sync that does not return (uprobes).
- ``rule_gpu_yield_wait``: a ``sched_yield`` loop in a process holding /dev/nvidia* fds is a
  yield-sync wait on the GPU, right before ``rule_yield_loop`` in ``THREAD_RULES``.
- ``gpu_findings`` turns the per-GPU statistics (accumulate/gpu.py) and the process verdicts
  into report notes. Facts used: fixtures/gpu-h200/README.md and fixtures/gpu/README.md.
"""
from __future__ import annotations

from typing import List, Mapping, Optional

from ...linux.fdtarget import GPU_KINDS as GPU_FD_KINDS
from ..accumulate.gpu import MOST, GpuStats, holds_gpu
from ..vocab.nodes import real_id
from ..progress.collectives import collective_wait, own_work_stall
from ..progress.gpu import (driver_stall, driver_work, gpu_memory_grows, gpu_work,
                            stalled_sync)
from ..vocab.verdict import BUSY, PROGRESSING, SPIN_CPU, YIELD_MIN_RATE, ThreadVerdict
from .context import ThreadContext


def rule_gpu_work_completes(c: ThreadContext) -> Optional[ThreadVerdict]:
    """Kernels or copies submitted and syncs returning (or captures ending) in the window, by
    uprobes on libcuda: the work this thread waits for completes, however it waits (a spin,
    a yield or a blocking sync) and however silent it is.
    The evidence is progress/gpu.driver_work's (uprobes); the thread progresses whatever it looks
    like on the CPU."""
    text = driver_work(c.proc.driver_calls.get(c.t.tid))
    if text is None:
        return None
    return ThreadVerdict(PROGRESSING, "gpu-work-completes",
                         [text] + ([c.cpu.describe(c.rec.window)] if c.cpu else []), cpu=c.cpu)


def _busy_host(c: ThreadContext) -> bool:
    """On a CPU (a spin) or yielding (a yield loop): a host thread that waits actively."""
    return (c.cpu is not None and c.cpu.demand >= SPIN_CPU) or c.t.yields >= 20


def rule_gpu_computes(c: ThreadContext) -> Optional[ThreadVerdict]:
    """A host thread busy on a CPU (spin- or yield-sync on the GPU, or a launch loop) with no
    output, in a process holding /dev/nvidia* fds, while a GPU it uses does real work
    (progress/gpu.py: SM activity or power, never utilization) or its GPU memory grows
    (weights copied in): the work it waits for advances, however silent the host is (a
    warm-up, a capture, a load).
    Its evidence: progress/gpu.py (``gpu_work``, ``gpu_memory_grows``)."""
    if not _busy_host(c) or c.t.output_bytes or c.t.accepts or not holds_gpu(c.fds):
        return None
    work = gpu_work(c.rec.gpus, c.t.pid) or gpu_memory_grows(c.rec.gpus, c.t.pid)
    if work is None:
        return None
    return ThreadVerdict(PROGRESSING, "gpu-computes",
                         [f"waits for the GPU while {work}"]
                         + ([c.cpu.describe(c.rec.window)] if c.cpu else []), cpu=c.cpu)


def rule_gpu_sync_wait(c: ThreadContext) -> Optional[ThreadVerdict]:
    """A busy host thread that its libcuda uprobes show inside a sync that has not returned for
    longer than progress/gpu.RECENT_S (progress/gpu.driver_stall) waits for the GPU
    (busy-waiting, ``gpu_wait``), with what it waits behind where libnccl's uprobes say it
    (progress/collectives.py: a collective, or work of its own). It goes right after
    ``rule_gpu_computes`` (a GPU that does real work makes it progress)."""
    calls = c.proc.driver_calls.get(c.t.tid)
    stall = driver_stall(calls)
    if not _busy_host(c) or not stalled_sync(calls) or stall is None:
        return None
    behind = collective_wait(calls) or own_work_stall(calls)
    ev_ = [f"{stall} (libcuda uprobes): the host spin-waits for GPU work that has not "
           "finished"] + ([behind] if behind else [])
    return ThreadVerdict(BUSY, "gpu-sync-wait", ev_ + ([c.cpu.describe(c.rec.window)]
                                                       if c.cpu else []),
                         cpu=c.cpu, gpu_wait=True)


def rule_gpu_yield_wait(c: ThreadContext) -> Optional[ThreadVerdict]:
    """sched_yield loop, no output, in a process holding /dev/nvidia* fds: yield-sync wait.
    The spin-sync rule is ``threads.thread.rule_gpu_spin_wait`` (state R plus a ~1 Hz RM_CONTROL on
    /dev/nvidiactl); the blocking-sync wait is an edge of the wait-for graph (waitgraph/build.py: a
    futex wait in a process whose libcuda event thread runs leads to the GPU)."""
    t = c.t
    if t.yields < 20 or t.output_bytes or t.accepts or not holds_gpu(c.fds):
        return None
    if c.rec.capabilities.get("timestamps", True) and t.yields / c.rec.window < YIELD_MIN_RATE:
        return None
    gpu_calls = sum(n for (kind, _, _), n in t.ioctls.items() if kind in GPU_FD_KINDS)
    ev_ = [f"sched_yield {c.rate(t.yields)} ({t.yields} calls) in a process holding /dev/nvidia* "
           "fds: yield-sync wait on the GPU (cudaDeviceScheduleYield, or an NCCL proxy "
           "yielding while its operations make no progress)"]
    if gpu_calls:
        ev_.append(f"{gpu_calls} ioctls on /dev/nvidia* fds")
    ev_.append("no output")
    return ThreadVerdict(BUSY, "gpu-yield-wait", ev_, cpu=c.cpu, gpu_wait=True)


def _mib(n: Optional[int]) -> str:
    return "?" if n is None else f"{n / 2**20:.0f} MiB"


def gpu_findings(gpus: Mapping[int, GpuStats], verdicts: Mapping[int, str],
                 window: float) -> List[str]:
    """Report notes from NVML readings and process verdicts ({pid: verdict}).

    A GPU counts for the traced tree when one of its compute pids is traced; when NVML lists no
    pids at all (containers hide them) every GPU counts. Host progress = any traced process
    progressing.
    For example "GPU 0 at 100% ... with no host progress: a kernel that does not finish" versus
    "GPU 0 idle while the host waits on it". Facts used: fixtures/gpu-h200/README.md and
    fixtures/gpu/README.md (recorded on an H200)."""
    notes: List[str] = []
    progressing = any(v == "progressing" for v in verdicts.values())
    waiting = [pid for pid, v in verdicts.items() if v in ("busy-waiting", "blocked")]
    for g in sorted(gpus.values(), key=lambda g: g.gpu):
        if not g.util_known:
            continue
        ours = sorted(p for p in g.pids if p in verdicts)
        if g.pids and not ours:
            continue
        who = f" (used by pid {', '.join(str(real_id(p)) for p in ours)})" if ours else ""
        head = (f"GPU {real_id(g.gpu)}{who} at {g.mean_util:.0f}% utilization on average in "
                f"{g.util_known} NVML samples over {g.span:.1f} s, {_mib(g.mem_used)} of "
                f"{_mib(g.mem_total)} used")
        if g.busy >= MOST * g.util_known and not progressing:
            notes.append(f"{head}, with no host progress for {window:.0f} s: a kernel that does "
                         "not finish (or runs far longer than the host expects)")
        elif g.idle >= MOST * g.util_known and waiting:
            notes.append(f"{head}: the GPU is idle while the host waits on it: the wait is not "
                         "for GPU work (a lost launch, an event never recorded, another rank or "
                         "process), not a slow kernel")
        else:
            notes.append(head)
    return notes
