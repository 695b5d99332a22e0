"""Whether the GPU work of a silent tree completes, counted for a moment by libcuda's (and
libnccl's) uprobes: what ``watch`` asks before it records a silence (a warm-up or a slow
collective writes nothing, and its stacks stay on the sync's line).

Contract: ``driver_motion_probe(pids, seconds=LOOK_S)`` -> the ``CudaDriverCalls`` of every
thread of ``pids`` that called libcuda during ``seconds`` (the uprobe backend of the eBPF
recording, record/backends/ebpf/cuda_uprobes.py, attached and detached again: nothing is left
in the kernel, the targets are never stopped). Nothing (an empty list) when no process of
``pids`` maps libcuda or the uprobes cannot load here (no BPF, not root): ``why_not`` then says
which. Cost: the probes' load and attach (about 0.2 s here) and one trap per driver call while
they are in.
"""
from __future__ import annotations

import threading
from typing import List, Optional, Tuple

from ...events.evidence import CudaDriverCalls
from ..backends.base import TargetSet
from ..backends.ebpf.cuda_uprobes import CudaUprobeBackend

__all__ = ["driver_motion_probe", "LOOK_S"]

LOOK_S = 1.5          # a few syncs of a slow step; more than progress/gpu.RECENT_S


def driver_motion_probe(pids: List[int], seconds: float = LOOK_S,
                        stop: Optional[threading.Event] = None
                        ) -> Tuple[List[CudaDriverCalls], str]:
    """(driver calls counted over ``seconds``, why none could be counted) (module doc)."""
    backend = CudaUprobeBackend()
    why = backend.check()
    if why is not None:
        return [], why
    got: List[CudaDriverCalls] = []

    def keep(e: object) -> None:
        if isinstance(e, CudaDriverCalls):
            got.append(e)
    try:
        backend.start(TargetSet(pids), keep)     # reads the maps once; loads only for libcuda
        if not backend.loaded:
            return [], "no process maps libcuda"
        (stop or threading.Event()).wait(seconds)
    finally:
        backend.stop()
    return got, "; ".join(backend.errors)
