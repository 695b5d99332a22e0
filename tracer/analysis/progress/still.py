"""What the progress signals said of a tree judged hung: which were looked at and found still,
and which this recording could not give (the verdict says so rather than guessing).

Contract: ``still_signals(rec)`` -> one sentence for a recording made with the progress
probes (it holds ``MemoryProgress`` readings; older traces get None, so their reports stay
as they were): the log files that grew and how many only repeated a heartbeat, the threads
that faulted memory in, the Python threads sampled on a CPU and whether their code moved,
each GPU's SM activity or power against its limit, the threads whose libcuda calls were
counted (uprobes) and whether their GPU work completed or a sync never returned, and the
signals missing (call results without strace or ebpf, which record them, GPU readings
without NVML, libcuda calls without uprobes in a process holding the GPU). The pipeline adds it to the notes of a tree that is not progressing.
"""
from __future__ import annotations

from typing import List, Optional

from ..accumulate.stats import Recording
from ..accumulate.gpu import holds_gpu
from .gpu import driver_stall, driver_work
from .log_lines import judge_log
from .memory import loading
from .stacks import code_moves

__all__ = ["still_signals"]


def _logs(rec: Recording) -> str:
    lines = [e for p in rec.processes.values() for e in p.log_lines.values()]
    if not lines:
        return "log lines (no log file grew)"
    beats = sum(1 for e in lines if (n := judge_log(e)) is not None and n.heartbeat)
    return f"log lines ({len(lines)} file(s) grew, {beats} of them only with a heartbeat)"


def _faults(rec: Recording) -> str:
    n = sum(1 for (pid, tid), t in rec.threads.items()
            if pid in rec.processes and loading(rec.processes[pid], tid, rec.window))
    return f"page faults ({n} thread(s) faulted memory in)" if n else \
        "page faults (no thread faulted memory in)"


def _stacks(rec: Recording) -> Optional[str]:
    samples = [e for p in rec.processes.values() for e in p.stack_samples.values()]
    if not samples:
        return None
    moved = sum(1 for e in samples if code_moves(e))
    return f"Python stacks ({len(samples)} thread(s) on a CPU sampled, {moved} moved)"


def _gpus(rec: Recording) -> Optional[str]:
    out = []
    for g in sorted(rec.gpus.values(), key=lambda g: g.gpu):
        if g.mean_sm_active is not None:
            out.append(f"GPU {g.gpu}: SM activity {g.mean_sm_active:.1f}%")
        elif g.mean_power_mw is not None and g.power_limit_mw:
            out.append(f"GPU {g.gpu}: {g.mean_power_mw / 1000:.0f} W of "
                       f"{g.power_limit_mw / 1000:.0f} W")
    return "; ".join(out) or None


def _driver(rec: Recording) -> Optional[str]:
    calls = [e for p in rec.processes.values() for e in p.driver_calls.values()
             if e.work_probed]
    if not calls:
        return None
    done = sum(1 for e in calls if driver_work(e))
    stalls = [f"thread {e.tid} {s}" for e in calls if (s := driver_stall(e))]
    return (f"libcuda calls ({len(calls)} thread(s) called the driver, {done} completed GPU "
            "work" + (f"; {'; '.join(stalls[:3])}" if stalls else "") + ")")


def _gpu_unprobed(rec: Recording) -> bool:
    return "cuda-uprobes" not in rec.backends and any(
        holds_gpu(p.info.fds) for p in rec.processes.values() if p.info is not None)


def still_signals(rec: Recording) -> Optional[str]:
    """The sentence of the module doc, or None for a recording without progress readings."""
    if not any(p.memory for p in rec.processes.values()):
        return None
    parts: List[str] = [_logs(rec), _faults(rec)]
    missing: List[str] = []
    stacks, gpus, driver = _stacks(rec), _gpus(rec), _driver(rec)
    parts += [x for x in (stacks, gpus, driver) if x]
    if not rec.has_syscalls or not {"strace", "ebpf"} & set(rec.backends):
        missing.append("call results (retries show only with strace, ebpf or a log)")
    if rec.gpus and gpus is None:
        missing.append("GPU power limit and SM activity (NVML gave neither)")
    if _gpu_unprobed(rec):
        missing.append("libcuda calls (uprobes need --backend ebpf)")
    text = "progress signals looked at and found still: " + "; ".join(parts)
    return text + (f"; not in this recording: {', '.join(missing)}" if missing else "")
