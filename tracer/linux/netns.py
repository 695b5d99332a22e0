"""Which node a recording was made on (host name, network namespace, addresses), and sockets
made in a target's network namespace.

Contract (readers take an injectable ``root`` like procfs.py; parsers are pure and never raise):
- ``node_identity()`` -> {"hostname", "netns", "netns_name", "addrs"}: what ``attach`` writes
  into a trace's header so that ``merge`` can tell nodes apart and match NCCL RAS's hosts.
- ``netns_inode(root)``: the inode of /proc/self/ns/net (None where unreadable);
  ``netns_name(inode, run)``: the name ``ip netns`` gave that namespace, "" for none.
- ``parse_fib_trie(text)``, ``parse_if_inet6(text)``: the IPv4 and global IPv6 addresses of
  this namespace's interfaces (no loopback, no link-local: they name no node).
- ``socket_in_netns_of(pid, family)``: a TCP socket of ``pid``'s network namespace (its
  docstring); ``NetnsRefused`` (one line) where that namespace cannot be entered.
"""
from __future__ import annotations

import ctypes
import os
import socket
import threading
from typing import Any, Dict, List, Optional

__all__ = ["node_identity", "netns_inode", "netns_name", "parse_fib_trie", "parse_if_inet6",
           "socket_in_netns_of", "NetnsRefused"]

CLONE_NEWNET = 0x40000000


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


class NetnsRefused(Exception):
    """A process's network namespace that cannot be entered; ``str()`` is one line saying why."""


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(ctypes.c_int(fd), ctypes.c_int(CLONE_NEWNET)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def socket_in_netns_of(pid: int, family: int = socket.AF_INET, root: str = "/proc"
                       ) -> socket.socket:
    """A new TCP socket (module doc) of ``pid``'s network namespace. In hangtrace's own
    namespace it is made here; in another, by a thread made for it that enters the namespace
    (setns: per thread, CAP_SYS_ADMIN), makes the socket, goes back to its own namespace and
    ends. A socket stays in the namespace it was made in, whichever thread uses it later."""
    try:
        target = os.open(f"{root}/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise NetnsRefused(f"the network namespace of pid {pid}: {exc.strerror}") from None
    try:
        ours = os.stat("/proc/thread-self/ns/net").st_ino
        if os.fstat(target).st_ino == ours:
            return socket.socket(family, socket.SOCK_STREAM)
        box: List[object] = []
        t = threading.Thread(target=_make_inside, args=(target, family, box),
                             name="hangtrace-netns", daemon=True)
        t.start()
        t.join()
    finally:
        os.close(target)
    got = box[0] if box else OSError(0, "no answer")
    if isinstance(got, OSError):
        raise NetnsRefused(f"cannot enter the network namespace of pid {pid}: "
                           f"{got.strerror or got}")
    return got  # type: ignore[return-value]


def _make_inside(target: int, family: int, box: List[object]) -> None:
    """The thread of ``socket_in_netns_of``: it ends after, so a failed return to its own
    namespace leaves nothing in it (the socket is made only once inside)."""
    try:
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        box.append(exc)
        return
    try:
        _setns(target)
        try:
            box.append(socket.socket(family, socket.SOCK_STREAM))
        finally:
            _setns(own)
    except OSError as exc:
        if not box:
            box.append(exc)
    finally:
        os.close(own)
