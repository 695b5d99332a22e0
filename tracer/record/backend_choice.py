"""Which backends a recording uses: ``auto``, ``proc``, ``strace`` or ``ebpf`` asked for by
name, and the ones added beside them where the machine has them (NVML's GPU sampling, eBPF's
uprobes on libcuda).

Contract:
- ``choose_backends(name, rate_hz)`` -> (backends, one line saying which and why); ``rate_hz``
  is /proc's samples a second (None: ``PROC_HZ``, ``BESIDE_EBPF_HZ`` beside eBPF). A backend
  asked for by name that cannot run raises errors.py's ToolMissing (a tool not installed), an
  unknown name UsageError, each in one line; ``auto`` takes ebpf, else strace, else proc, and
  says why each one before it was not usable. session.py re-exports it.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from ..errors import ToolMissing, UsageError, shown
from .backends.base import Backend

__all__ = ["choose_backends", "PROC_HZ", "BESIDE_EBPF_HZ"]

PROC_HZ = 10.0
# Beside eBPF, which sees every call, fork, exec and exit, /proc gives thread states, wchan
# and I/O: fewer looks cost the traced tree less (bench/README.md: on a 2-core machine each
# wake-up of hangtrace costs the target time, not only hangtrace).
BESIDE_EBPF_HZ = 2.0


def choose_backends(name: str, rate_hz: Optional[float] = None) -> Tuple[List[Backend], str]:
    """Backends for auto|proc|strace|ebpf, and one line saying which and why; a backend asked for
    by name that cannot run raises ToolMissing (a tool not installed), an unknown name UsageError,
    each in one line."""
    from .backends.proc_backend import ProcBackend
    proc = ProcBackend(rate_hz=rate_hz or PROC_HZ)
    if name == "proc":
        why = proc.check()
        if why:
            raise ToolMissing(f"proc backend unavailable: {why}")
        return _with_nvml([proc], "proc (/proc sampling only, never stops the target)")
    if name not in ("auto", "strace", "ebpf"):
        raise UsageError(f"unknown backend {shown(name)} (auto, proc, strace, ebpf)")
    from .backends.ebpf.backend import EbpfBackend
    ebpf_why = EbpfBackend().check() if name in ("auto", "ebpf") else None
    beside = ProcBackend(rate_hz=rate_hz or BESIDE_EBPF_HZ, beside_ebpf=True)
    if name == "ebpf":
        if ebpf_why:
            raise ToolMissing(f"ebpf backend unavailable: {ebpf_why}")
        ebpf = EbpfBackend()
        return _with_nvml([ebpf, beside], f"ebpf+proc ({ebpf.describe()}; /proc for states)")
    from .backends.strace_backend import StraceBackend     # the strace importer: 60 ms
    strace = StraceBackend()
    strace_why = strace.check()
    if name == "strace":
        if strace_why:
            raise ToolMissing(f"strace backend unavailable: {strace_why}")
        return _with_nvml([strace], "strace (ptrace: the target runs slower while traced)")
    if ebpf_why is None:
        ebpf = EbpfBackend()
        chosen, why = [ebpf, beside], f"ebpf+proc ({ebpf.describe()}; /proc for states)"
    elif strace_why is None:
        chosen, why = [strace, proc], f"strace+proc (ebpf not usable: {ebpf_why})"
    else:
        chosen, why = [proc], f"proc (ebpf not usable: {ebpf_why}; strace not usable: {strace_why})"
    return _with_nvml(chosen, why)


def _with_nvml(backends: List[Backend], why: str) -> Tuple[List[Backend], str]:
    """Add GPU sampling through NVML where the machine has it (never a reason to fail), and
    with eBPF, uprobes on libcuda's CUDA graph calls (ebpf/cuda_uprobes.py)."""
    from .backends.ebpf.cuda_uprobes import with_cuda_uprobes
    from .backends.nvml_backend import NvmlBackend
    nvml = NvmlBackend()
    if nvml.check() is None:
        backends, why = backends + [nvml], why + "; nvml for GPU utilization"
    return with_cuda_uprobes(backends, why)
