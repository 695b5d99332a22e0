"""The process at the other end of each unix socket of the traced tree (sock_diag).

Contract: ``socket_peers_probe(pids, analyzer)`` is an ``EndProbe`` (and may equally run at the
start of a recording: it does not use the analyzer). It dumps the unix sockets once through
NETLINK_SOCK_DIAG (tracer/linux/sockdiag.py) and returns one ``SocketPeers`` event per process of
``pids`` that has connected unix sockets: {its inode: peer inode}, plus, for peer inodes that no
process of ``pids`` holds, the pids outside the tree that hold them (one scan of /proc/*/fd,
done only when such peers exist). No netlink (no CONFIG_UNIX_DIAG, no permission): no events.

Races: a peer that closed its end between the dump and the /proc scan is reported held by
nobody, which is what it is by then.
"""
from __future__ import annotations

import os
import time
from typing import Dict, List, Optional, Set

from ... import events as ev
from ...linux import cancel, procfs, sockdiag


def socket_inodes(pid: int) -> Set[int]:
    """Inodes of the sockets among /proc/PID/fd (readlink "socket:[N]"), empty when unreadable."""
    out: Set[int] = set()
    base = f"/proc/{pid}/fd"
    try:
        names = os.listdir(base)
    except OSError:
        return out
    for n in names:
        try:
            link = os.readlink(f"{base}/{n}")
        except OSError:
            continue
        if link.startswith("socket:["):
            out.add(int(link[8:-1]))
    return out


def holders_of(inodes: Set[int], skip: Set[int]) -> Dict[int, List[int]]:
    """{inode: pids} for processes (other than ``skip``) holding one of ``inodes``."""
    out: Dict[int, List[int]] = {}
    if not inodes:
        return out
    for pid in cancel.checked(procfs.list_pids(), every=256):
        if pid in skip:
            continue
        for ino in socket_inodes(pid) & inodes:
            out.setdefault(ino, []).append(pid)
    return out


def probe_pids(pids: List[int], table: Optional[Dict[int, sockdiag.UnixSock]] = None,
               now: Optional[float] = None) -> List[ev.SocketPeers]:
    table = sockdiag.unix_sockets() if table is None else table
    if table is None:
        return []
    ts = time.time() if now is None else now
    mine = {pid: socket_inodes(pid) for pid in pids}
    held = set().union(*mine.values()) if mine else set()
    peers = {pid: {i: table[i].peer for i in inodes if i in table and table[i].peer}
             for pid, inodes in mine.items()}
    foreign = {p for m in peers.values() for p in m.values() if p not in held}
    outside = holders_of(foreign, set(pids))
    out = []
    for pid in sorted(peers):
        if peers[pid]:
            out.append(ev.SocketPeers(
                ts=ts, pid=pid, peers=peers[pid],  # type: ignore[arg-type]
                outside={p: outside[p] for p in set(peers[pid].values()) if p in outside}))
    return out


def socket_peers_probe(pids: List[int], analyzer: object = None) -> List[ev.Event]:
    """EndProbe (session.py): SocketPeers for each process of ``pids`` with unix sockets."""
    return list(probe_pids(list(pids)))
