"""Spinners waiting for work elsewhere in the job (issue 30 item 7): a thread that spins while
a process it started does work that advances waits for that work, and the tree progresses.

Contract: ``spinner_edges(b)`` (b: build.py's builder, as ``stack_waits.GraphBuilder`` plus
``fdx``) adds, for each deciding thread whose activity is ``spin`` and that has no edge yet,
an edge (kind pipe) to each process that holds the write end of a pipe the spinner's process
holds the read end of, when that process is a descendant of the spinner's and one of its
deciding threads makes progress (activity ``progress``): a reader polling the pipe of a
compiler it started. Nothing else is linked: a pipe to a process that is not its own child,
or to one that is stuck, leaves the spinner the end of its chain.
"""
from __future__ import annotations

from typing import Any, Dict, List, Set

from .graph import EdgeKind, tnode

__all__ = ["spinner_edges"]


def _descendants(procs: Dict[int, Any], pid: int) -> Set[int]:
    out: Set[int] = set()
    todo = [pid]
    while todo:
        for kid in getattr(procs.get(todo.pop()), "children", None) or ():
            if kid not in out:
                out.add(kid)
                todo.append(kid)
    return out


def _progressing(b: Any, pid: int) -> bool:
    return any(n.activity == "progress" for n in b.g.deciders(pid))


def _read_pipes(b: Any, pid: int) -> List[str]:
    p = b.rec.processes.get(pid)
    fds = p.info.fds if p is not None and p.info is not None else []
    return sorted({f.target for f in fds if f.kind == "pipe" and f.target
                   and "r" in (getattr(f, "mode", "") or "")})


def spinner_edges(b: Any) -> None:
    """The edges of the module doc."""
    for pid, tvs in sorted(b.inp.threads.items()):
        kids = None
        for tid in sorted(tvs):
            nid = tnode(tid)
            node = b.g.nodes.get(nid)
            if node is None or node.activity != "spin" or not node.decides or b.g.out(nid):
                continue
            if kids is None:
                kids = _descendants(b.procs, pid)
            for target in _read_pipes(b, pid):
                for q in b.fdx.holders(target, "w", near=pid):
                    if q in kids and _progressing(b, q):
                        b.edge(nid, b.process(q), EdgeKind.PIPE, target,
                               f"{node.label} spins reading {target}, whose writers include "
                               f"{b.plabel(q)}, which makes progress")
