"""Which node a recording was made on: host name, network namespace, addresses.

Contract (readers take an injectable ``root`` like procfs.py; parsers are pure and never raise):
- ``node_identity()`` -> {"hostname", "netns", "netns_name", "addrs"}: what ``attach`` writes
  into a trace's header so that ``merge`` can tell nodes apart and match the hosts NCCL RAS
  names.
- ``netns_inode(root)``: the inode of /proc/self/ns/net (None where it cannot be read);
  ``netns_name(inode, run)``: the name ``ip netns`` gave that namespace, "" for none.
- ``parse_fib_trie(text)``: the IPv4 addresses of this namespace's interfaces;
  ``parse_if_inet6(text)``: the global IPv6 addresses. Loopback and link-local addresses name
  no node and are left out.
"""
from __future__ import annotations

import os
import socket
from typing import Any, Dict, List, Optional

__all__ = ["node_identity", "netns_inode", "netns_name", "parse_fib_trie", "parse_if_inet6"]


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read(1 << 20)
    except OSError:
        return ""


def parse_fib_trie(text: str) -> List[str]:
    """IPv4 addresses of local interfaces, in the order first seen, without 127.0.0.0/8.
    They are the "/32 host LOCAL" leaves of /proc/net/fib_trie. Kernel facts: /proc/net is
    /proc/self/net, the reader's own network namespace; an unprivileged reader sees fib_trie too."""
    out: List[str] = []
    last = ""
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("|-- "):
            last = s[4:].strip()
        elif s.startswith("/32 host LOCAL") and last:
            if not last.startswith("127.") and last not in out:
                out.append(last)
            last = ""
    return out


def parse_if_inet6(text: str) -> List[str]:
    """Global-scope IPv6 addresses ("2001:db8::1") from /proc/net/if_inet6 lines:
    "ADDR32HEX IFINDEX PREFIXLEN SCOPE FLAGS NAME"; scope 00 is global."""
    out: List[str] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 6 or len(parts[0]) != 32 or parts[3] != "00":
            continue
        try:
            addr = socket.inet_ntop(socket.AF_INET6, bytes.fromhex(parts[0]))
        except (ValueError, OSError):
            continue
        if addr not in out:
            out.append(addr)
    return out


def netns_inode(root: str = "/proc") -> Optional[int]:
    """The inode of /proc/self/ns/net, None where it cannot be read. A namespace's inode is the
    same through every path to it (/proc/PID/ns/net, the /run/netns bind mount), so ``stat``
    matches them."""
    try:
        return os.stat(f"{root}/self/ns/net").st_ino
    except OSError:
        return None


def netns_name(inode: Optional[int], run: str = "/run/netns") -> str:
    """The ``ip netns`` name of the namespace with this inode, "" when it has none.
    The name is a bind mount of the namespace under /run/netns."""
    if inode is None:
        return ""
    try:
        names = sorted(os.listdir(run))
    except OSError:
        return ""
    for name in names:
        try:
            if os.stat(os.path.join(run, name)).st_ino == inode:
                return name
        except OSError:
            continue
    return ""


def node_identity(root: str = "/proc", run: str = "/run/netns") -> Dict[str, Any]:
    """This node as a trace header records it (module doc).
    Two containers or network namespaces of one machine share a host name, not a network namespace;
    NCCL RAS names a rank's node by the address it bound, not by name."""
    inode = netns_inode(root)
    return {"hostname": socket.gethostname(), "netns": inode,
            "netns_name": netns_name(inode, run),
            "addrs": parse_fib_trie(_read(f"{root}/net/fib_trie"))
            + parse_if_inet6(_read(f"{root}/net/if_inet6"))}
