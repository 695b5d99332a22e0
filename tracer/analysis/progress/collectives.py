"""What one thread's GPU wait waits for, from its libcuda and libnccl calls (uprobes): a
collective, whose work needs the other ranks, or work it launched itself.

Contract (pure, on one ``CudaDriverCalls``; None when the calls cannot say, e.g. libnccl was
not probed, or the thread was seen in no sync): ``collective_wait(e)`` and
``own_work_stall(e)``, each a sentence when it holds (their docstrings say when); the two
never both hold for one thread.
"""
from __future__ import annotations

from typing import Optional

from ...events.evidence import CudaDriverCalls
from .gpu import RECENT_S, last_completion, stalled_sync

__all__ = ["collective_wait", "own_work_stall"]


def _after(t: Optional[float], than: Optional[float]) -> bool:
    return t is not None and (than is None or t > than)


def _polls_unready(e: CudaDriverCalls) -> bool:
    return e.queries_not_ready > 0 and (e.last_ready is None or e.ts - e.last_ready > RECENT_S)


def collective_wait(e: Optional[CudaDriverCalls]) -> Optional[str]:
    """A sentence when the thread waits on the GPU (inside a sync for longer than
    ``RECENT_S``, or polling queries that answer "not ready") behind a collective it called
    after its last completed sync or ready query, or when it is inside an NCCL call since
    longer than that (a blocking group end, a communicator init waiting for its peers): its
    work completes only when the other ranks join. Else None."""
    if e is None or not e.nccl_probed:
        return None
    if e.in_nccl_since is not None and e.ts - e.in_nccl_since > RECENT_S:
        return (f"inside nccl{e.last_op or ''} since {e.ts - e.in_nccl_since:.1f} s before "
                "the end (libnccl uprobes): an NCCL call that returns when the other ranks "
                "join")
    if not (stalled_sync(e) or _polls_unready(e)):
        return None
    if not _after(e.last_collective, last_completion(e)):
        return None
    assert e.last_collective is not None
    how = (f"in a CUDA sync since {e.ts - e.in_sync_since:.1f} s before the end"
           if stalled_sync(e) and e.in_sync_since is not None
           else f"polls the GPU ({e.queries_not_ready} queries answered not ready)")
    return (f"{how}, behind nccl{e.last_op or 'AllReduce'} called "
            f"{e.ts - e.last_collective:.1f} s before the end, after its last completed sync "
            f"({e.collectives} collectives in the window; libnccl uprobes): its GPU work "
            "completes when the other ranks join")


def own_work_stall(e: Optional[CudaDriverCalls]) -> Optional[str]:
    """A sentence when the thread is inside a sync since longer than ``RECENT_S`` behind work
    it launched itself (kernels, graphs or copies outside NCCL) after its last completion,
    with no collective called since: a kernel of its own never finishes, whatever the other
    ranks do. Else None."""
    if e is None or not e.nccl_probed or not stalled_sync(e) or collective_wait(e):
        return None
    done = last_completion(e)
    if not _after(e.last_own_work, done) or _after(e.last_collective, done):
        return None
    assert e.in_sync_since is not None and e.last_own_work is not None
    return (f"in a CUDA sync since {e.ts - e.in_sync_since:.1f} s before the end behind work "
            f"it launched itself {e.ts - e.last_own_work:.1f} s before the end, with no "
            "collective called since its last completed sync (libnccl uprobes): a kernel of "
            "its own never finishes")
