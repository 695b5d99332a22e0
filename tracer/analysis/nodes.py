"""Nodes in one analysis of merged traces (tracefile/merge.py): which node a key belongs to, what
may link processes of two nodes, and the job's own view (NCCL RAS) put on keys.

Contract (pure functions; a single trace is node 0 throughout and nothing here changes it):
- ``node_of(key)``, ``real_id(key)``: tracefile/merge.py's keys (node i's pid p is
  i * ID_STRIDE + p); ``NodeMap``: each node's name and addresses, ``name(key)``.
- What links processes: a pipe, a unix socket, an eventfd, a file, a futex or a loopback
  connection links processes of one node only; a TCP 4-tuple between addresses that can name
  different nodes (clock.crosses_nodes) links any two, as its two ends show it reversed.
  ``target_scope(pid, target)`` is None for the latter, else the node of ``pid``: fd holders
  are looked up within the scope (process_facts.FdIndex). ``scoped_inode(pid, inode)`` makes a
  socket inode unique across nodes (the inode itself on node 0).
- ``localize_ras(status, nodes, known)``: NCCL RAS names every rank of the job by (host, pid),
  host being the address the rank's node bound; each becomes the key of that pid on the node
  with that address (or, where no node has it, on the one node where that pid was traced);
  None where that cannot be told. So one trace's RAS answer speaks for every node.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Set

from ..linux.fdtarget import FdTarget
from ..tracefile.clock import crosses_nodes
from ..tracefile.merge import ID_STRIDE, key_of, node_of, real_id
from .nccl_ras import RasStatus

__all__ = ["NodeMap", "node_of", "real_id", "key_of", "ID_STRIDE", "target_scope",
           "scoped_inode", "real_inode", "same_node", "crosses_nodes", "localize_ras"]

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
    """None: ``target`` may link processes of any node; else the node it is local to."""
    return None if crosses_nodes(FdTarget.parse(target)) else node_of(pid)


def scoped_inode(pid: int, inode: int) -> int:
    return node_of(pid) * INODE_STRIDE + inode


def real_inode(scoped: int) -> int:
    return scoped % INODE_STRIDE


def localize_ras(status: RasStatus, nodes: NodeMap, known: Iterable[int]) -> RasStatus:
    """A copy of ``status`` whose pids are keys (module doc)."""
    have = set(known)
    n = len(nodes.names)

    def key(host: str, pid: Optional[int]) -> Optional[int]:
        if pid is None or pid <= 0 or pid >= ID_STRIDE:
            return None
        by_addr = nodes.with_address(host)
        if len(by_addr) == 1:
            return key_of(by_addr[0], pid)
        held = [i for i in (by_addr or range(n)) if key_of(i, pid) in have]
        return key_of(held[0], pid) if len(held) == 1 else None

    out = copy.deepcopy(status)
    for c in out.comms:
        for r in c.ranks:
            r.pid = key(r.host, r.pid)
        for m in c.missing:
            m.pid = key(m.host, m.pid)
    out.dead_pids = [k for p in out.dead_pids if (k := key("", p)) is not None]
    return out
