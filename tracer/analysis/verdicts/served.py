"""A server and its load (issue 44 item 10): a tree one of whose processes serves connections
and makes progress is judged by that progress, not by a client that only ticks between its
requests (connects, asks, reads the answer, sleeps).

Contract: ``a_server_progresses(sources, rec, graph, chains)``: some chain from ``sources``
(tree.py's) ends in a process that makes progress (``EndKind.PROGRESS``) and served connections
(a thread of it accepted some, or sock_diag saw it take some on its listening ports);
``ticks_after_progress(severity)``: the tree's order of ends with ``TICK`` just below
``PROGRESS``, for tree.judge_tree to weigh the ends again when the first holds.
"""
from __future__ import annotations

from typing import List, Sequence

from ..accumulate.accumulator import Recording
from ..waitgraph.chain import Chains, EndKind
from ..waitgraph.graph import WaitGraph

__all__ = ["a_server_progresses", "ticks_after_progress"]


def _serves(rec: Recording, pid: int) -> bool:
    p = rec.processes.get(pid)
    if p is None:
        return False
    return sum(p.served.values()) > 0 or any(t.accepts > 0 for (q, _), t in rec.threads.items()
                                             if q == pid)


def a_server_progresses(sources: Sequence[str], rec: Recording, graph: WaitGraph,
                        chains: Chains) -> bool:
    """The module doc's first test."""
    for src in sources:
        e = chains.end(src)
        node = graph.nodes.get(e.node)
        if e.kind == EndKind.PROGRESS and node is not None and node.pid is not None \
                and _serves(rec, node.pid):
            return True
    return False


def ticks_after_progress(severity: Sequence[EndKind]) -> List[EndKind]:
    """``severity`` with a process that only ticks weighed just below progress."""
    out = [k for k in severity if k != EndKind.TICK]
    out.insert(out.index(EndKind.PROGRESS) + 1, EndKind.TICK)
    return out
