"""Nodes in one analysis of merged traces (tracefile/nodes/merge.py): which node a key belongs to
and what may link processes of two nodes (job/ras.py puts NCCL RAS answers on keys).

Contract (pure functions; a single trace is node 0 throughout and nothing here changes it):
- ``node_of(key)``, ``real_id(key)``: tracefile/nodes/merge.py's keys (node i's pid p is
  i * ID_STRIDE + p); ``NodeMap``: each node's name and addresses, ``name(key)``.
- What links processes: only a TCP 4-tuple between addresses that can name different nodes
  (clock.crosses_nodes) links any two; ``target_scope(pid, target)`` is None for it, else the
  node of ``pid``. ``scoped_inode(pid, inode)`` makes a socket inode unique across nodes.
- What scripts read of a merged report: ``locate(key, nodes)``, ``locate_wait(doc, nodes)``,
  ``locate_partial(doc, nodes)`` put the node and the ids it knows beside a key.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set

from ...linux.fdtarget import FdTarget
from ...tracefile.nodes.clock import crosses_nodes
from ...tracefile.nodes.merge import ID_STRIDE, key_of, node_of, real_id

__all__ = ["NodeMap", "node_of", "real_id", "key_of", "ID_STRIDE", "target_scope",
           "scoped_inode", "real_inode", "same_node", "crosses_nodes", "locate", "locate_wait",
           "locate_partial"]

INODE_STRIDE = 1 << 32      # socket and pipe inodes are 32-bit (get_next_ino)


@dataclass
class NodeMap:
    names: List[str]
    addrs: List[Set[str]] = field(default_factory=list)

    def name(self, key: int) -> Optional[str]:
        i = node_of(key)
        return self.names[i] if 0 <= i < len(self.names) else None

    def with_address(self, host: str) -> List[int]:
        h = host.strip().strip("[]")
        return [i for i, a in enumerate(self.addrs) if h and h in a]


def same_node(a: int, b: int) -> bool:
    return node_of(a) == node_of(b)


def target_scope(pid: int, target: str) -> Optional[int]:
    """None: ``target`` may link processes of any node; else the node it is local to.
    A pipe, a unix socket, an eventfd, a file, a futex or a loopback connection links processes of
    one node only; a TCP 4-tuple between addresses that can name different nodes
    (clock.crosses_nodes) links any two, as its two ends show it reversed. Fd holders are looked up
    within the scope (process_facts.FdIndex)."""
    return None if crosses_nodes(FdTarget.parse(target)) else node_of(pid)


def scoped_inode(pid: int, inode: int) -> int:
    """A socket inode unique across nodes (the inode itself on node 0)."""
    return node_of(pid) * INODE_STRIDE + inode


def real_inode(scoped: int) -> int:
    return scoped % INODE_STRIDE


def locate(key: Optional[int], nodes: Optional[NodeMap]) -> Dict[str, Any]:
    """The node and the node's own pid beside a key: ``{"node": name, "node_pid": its pid there}``
    (both None for a single trace, ``nodes`` None)."""
    if nodes is None or key is None:
        return {"node": None, "node_pid": None}
    return {"node": nodes.name(key), "node_pid": real_id(key)}


def locate_wait(doc: Dict[str, Any], nodes: Optional[NodeMap]) -> Dict[str, Any]:
    """A waits_on entry with its tid and pids as their nodes know them: ``node_tid`` and
    ``node_pids`` ([{"pid", "node", "node_pid"}], one per key of ``pids``) added."""
    doc["node_tid"] = real_id(doc["tid"]) if nodes is not None else None
    doc["node_pids"] = [{"pid": p, **locate(p, nodes)} for p in doc["pids"]] \
        if nodes is not None else []
    return doc


def locate_partial(doc: Dict[str, Any], nodes: Optional[NodeMap]) -> Dict[str, Any]:
    """A partial hang with its pid and tids as their node knows them: ``node``, ``node_pid`` and
    ``node_tids`` added."""
    doc.update(locate(doc["pid"], nodes))
    doc["node_tids"] = [real_id(t) for t in doc["tids"]] if nodes is not None else None
    return doc
