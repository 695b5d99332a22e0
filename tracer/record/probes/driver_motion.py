"""Whether the GPU work of a silent tree completes, counted for a moment by libcuda's (and
libnccl's) uprobes: what ``watch`` asks before it records a silence (a warm-up or a slow
collective writes nothing, and its stacks stay on the sync's line).

Contract: ``driver_motion_probe(pids, seconds=LOOK_S)`` -> the ``CudaDriverCalls`` of every
thread of ``pids`` that called libcuda during the look (the uprobe backend of the eBPF
recording, record/backends/ebpf/cuda_uprobes.py, attached and detached again: nothing is left
in the kernel, the targets are never stopped). The look lasts ``seconds``, then until the next
completion (``LOOK_MAX_S`` in all): the rule judges the last completion's age at the end, so a
step longer than that (slow work, a busy machine) is not judged still. Nothing (an empty list)
when no process of ``pids`` maps libcuda or the uprobes cannot load (no BPF, not root):
``why_not`` says which. Cost: the probes' load and attach (about 0.2 s) and one trap per call.
"""
from __future__ import annotations

import threading
import time
from typing import List, Optional, Tuple

from ...events.evidence import CudaDriverCalls
from ..backends.base import TargetSet
from ..backends.ebpf.cuda_uprobes import CudaUprobeBackend

__all__ = ["driver_motion_probe", "LOOK_S"]

LOOK_S = 1.5          # a few syncs of a slow step; more than progress/gpu.RECENT_S
LOOK_MAX_S = 8.0      # then until the next completion, at most this long in all
POLL_S = 0.05


def driver_motion_probe(pids: List[int], seconds: float = LOOK_S,
                        stop: Optional[threading.Event] = None, longest: float = LOOK_MAX_S
                        ) -> Tuple[List[CudaDriverCalls], str]:
    """(driver calls counted over the look, why none could be counted) (module doc)."""
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
        waiting = stop or threading.Event()
        end = time.monotonic() + longest
        if not waiting.wait(seconds):
            _until_next_completion(backend, waiting, end)
    finally:
        backend.stop()
    return got, "; ".join(backend.errors)


def _until_next_completion(backend: CudaUprobeBackend, stop: threading.Event,
                           end: float) -> None:
    """Wait until a traced thread's GPU work completes once more, ``end`` (monotonic) at the
    latest."""
    before = backend.latest_completion()
    while time.monotonic() < end and not stop.wait(POLL_S):
        latest = backend.latest_completion()
        if latest is not None and (before is None or latest > before):
            return
