"""What an fd points to, parsed once: the one reader of fd target text.

Contract (pure, memoised, never raises):
- ``fd_kind(text)`` is the kind (events/__init__.py's list: file, dir, pipe, tcp, unix,
  eventfd, ...) of a target as /proc/PID/fd links, strace -y/-yy decorations or procfs_fds
  write it.
- ``FdTarget.parse(text)`` gives the typed target: kind, inode, the local and remote ends of
  an inet socket, the peer inode of a connected unix socket, a path, an eventfd id.
  ``reversed()`` is the target the other end of a connection shows (TCP:[b->a] for
  TCP:[a->b]); ``endpoints()`` the pair of addresses, IPv4-mapped IPv6 written as IPv4.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Tuple

from .intparse import ID_DIGITS, is_digits, parse_uint

__all__ = ["FdTarget", "fd_kind", "strip_device", "OUTPUT_KINDS", "SOCKET_KINDS", "GPU_KINDS"]

# Kinds whose writes can carry something to the outside world (a log, a peer, a terminal, a
# FUSE daemon's replies to the readers of its mount).
OUTPUT_KINDS = frozenset({"file", "pipe", "fifo", "tcp", "udp", "unix", "socket", "tty", "fuse"})
SOCKET_KINDS = frozenset({"tcp", "udp", "unix", "socket"})
GPU_KINDS = frozenset({"nvidia", "nvidiactl", "nvidia-uvm"})

_ANON_KINDS = {"eventfd": "eventfd", "eventpoll": "epoll", "timerfd": "timerfd",
               "signalfd": "signalfd", "pidfd": "pidfd", "inotify": "inotify"}
_KERNFS = ("/proc/", "/sys/")     # the kernel's own files: writing them configures, reading
                                  # them asks (a write there is no output)
_NVIDIA_N = re.compile(r"/dev/nvidia[0-9]+$")
_DELETED = " (deleted)"


def strip_device(text: str) -> Tuple[str, bool]:
    """strace -yy appends device numbers: "/dev/nvidiactl<char 195:255>" -> the path."""
    if text.endswith(">"):
        i = text.rfind("<")
        if i > 0 and (text.startswith("char ", i + 1) or text.startswith("block ", i + 1)):
            return text[:i], True
    return text, False


def _path_kind(path: str, device: bool) -> str:
    if path.endswith(_DELETED):
        path = path[:-len(_DELETED)]
    if path.startswith("/memfd:"):                # anonymous memory, not a file on a disk
        return "anon"
    if path.startswith("/dev/") and not path.startswith("/dev/shm/"):  # /dev/shm is tmpfs
        if path == "/dev/nvidiactl":
            return "nvidiactl"
        if path.startswith("/dev/nvidia-uvm"):     # nvidia-uvm and nvidia-uvm-tools
            return "nvidia-uvm"
        if _NVIDIA_N.match(path):
            return "nvidia"
        if path == "/dev/null":
            return "null"
        if path == "/dev/fuse":                    # a FUSE daemon's connection to the kernel
            return "fuse"
        if path.startswith("/dev/pts/") or path.startswith("/dev/tty") \
                or path in ("/dev/console", "/dev/ptmx"):
            return "tty"
        return "dev"
    if path.startswith(_KERNFS):                   # a thread's name, oom_score_adj, a cgroup
        return "kernfs"
    return "dev" if device else "file"


# Target texts longer than this are parsed each time, never cached (a hostile decoration of
# a megabyte would otherwise stay in the caches below).
_CACHED_TEXT_MAX = 4096


def fd_kind(text: str) -> Optional[str]:
    """The kind of an fd from its target text; None for empty text. The text as /proc/PID/fd links
    print it ("pipe:[12]", "socket:[34]", "anon_inode:[eventfd]"), as strace -y/-yy decorations
    print it ("TCP:[1.2.3.4:5->6.7.8.9:10]", "UNIX-STREAM:[12->13]", "/dev/nvidiactl<char
    195:255>"), or as procfs_fds writes sockets and eventfds ("TCPv6:[[::]:8000]",
    "UNIX-STREAM:[12,/tmp/x.sock]", "eventfd:[3]")."""
    return _fd_kind(text) if len(text) <= _CACHED_TEXT_MAX else _fd_kind.__wrapped__(text)


@lru_cache(maxsize=8192)
def _fd_kind(text: str) -> Optional[str]:
    if not text:
        return None
    text, device = strip_device(text)
    if text.startswith("/"):
        return _path_kind(text, device)
    colon = text.find(":")
    if colon <= 0:
        return "anon"
    proto = text[:colon]
    if proto == "anon_inode":
        return _ANON_KINDS.get(text[colon + 1:].strip("[]"), "anon")
    if proto in ("pipe", "socket", "eventfd", "pidfd"):
        return proto
    if proto.startswith("TCP"):
        return "tcp"
    if proto.startswith("UDP"):
        return "udp"
    if proto.startswith("UNIX"):
        return "unix"
    if proto.startswith("NETLINK"):
        return "netlink"
    if text[colon + 1:colon + 2] == "[" and proto.isupper():   # PACKET:[..], RAW:[..], ...
        return "socket"
    return "anon"          # "net:[4026531840]" and other namespace fds


def _norm_addr(addr: str) -> str:
    """"[::ffff:127.0.0.1]:5000" -> "127.0.0.1:5000"; other addresses unchanged."""
    if addr.startswith("[::ffff:") and "]:" in addr:
        host, _, port = addr[8:].partition("]:")
        if "." in host:
            return f"{host}:{port}"
    return addr


@dataclass(frozen=True)
class FdTarget:
    """A parsed fd target (module doc). ``text`` is the text it was parsed from. Kernel facts:
    pipes, sockets and pidfds carry their inode in brackets; an eventfd's link text is the same for
    all ("anon_inode:[eventfd]"), so only fdinfo's eventfd-id names the object (procfs_fds). strace
    -yy prints a connected unix socket as "UNIX-STREAM:[ino->peer_ino]" and a bound one as
    "UNIX-STREAM:[ino,"path"]"; /proc/net/unix gives "UNIX-STREAM:[ino,path]"."""
    text: str
    kind: Optional[str]
    inode: Optional[int] = None
    local: Optional[str] = None        # inet: "127.0.0.1:5000"; unix: its path, if bound
    remote: Optional[str] = None       # inet: the peer's address
    peer_inode: Optional[int] = None   # unix: the connected peer socket's inode (strace -yy)
    path: Optional[str] = None         # files and devices
    eventfd_id: Optional[int] = None

    @staticmethod
    def parse(text: Optional[str]) -> "FdTarget":
        text = text or ""
        return _parse(text) if len(text) <= _CACHED_TEXT_MAX else _parse.__wrapped__(text)

    @property
    def is_socket(self) -> bool:
        return self.kind in SOCKET_KINDS

    @property
    def connected(self) -> bool:
        return self.remote is not None or self.peer_inode is not None

    def endpoints(self) -> Optional[Tuple[str, str]]:
        """(local, remote) of a connected inet socket, or (inode, peer inode) as text for a
        connected unix socket; None otherwise."""
        if self.local is not None and self.remote is not None:
            return self.local, self.remote
        if self.inode is not None and self.peer_inode is not None:
            return str(self.inode), str(self.peer_inode)
        return None

    def reversed(self) -> Optional[str]:
        """The target text the other end of this inet connection shows, or None."""
        if self.remote is None or self.local is None or "[" not in self.text:
            return None
        proto = self.text[:self.text.find("[")]
        return f"{proto}[{self.remote}->{self.local}]"


def _bracket(text: str) -> Optional[str]:
    lb, rb = text.find("["), text.rfind("]")
    return text[lb + 1:rb] if 0 <= lb < rb else None


@lru_cache(maxsize=8192)
def _parse(text: str) -> FdTarget:
    kind = fd_kind(text)
    if kind is None:
        return FdTarget(text, None)
    if text.startswith("/"):
        path, _ = strip_device(text)
        return FdTarget(text, kind, path=path)
    inside = _bracket(text)
    if inside is None:
        return FdTarget(text, kind)
    if kind in ("tcp", "udp"):
        a, arrow, b = inside.partition("->")
        if arrow:
            return FdTarget(text, kind, local=_norm_addr(a), remote=_norm_addr(b))
        if is_digits(inside) and len(inside) <= ID_DIGITS:
            return FdTarget(text, kind, inode=int(inside))
        return FdTarget(text, kind, local=_norm_addr(inside))
    if kind == "unix":
        a, arrow, b = inside.partition("->")
        first, _, path = a.partition(",")
        peer = b.split(",")[0] if arrow else ""
        return FdTarget(text, kind, inode=parse_uint(first), peer_inode=parse_uint(peer),
                        local=path.strip('"') or None)
    if kind == "eventfd" and text.startswith("eventfd:["):
        return FdTarget(text, kind, eventfd_id=parse_uint(inside))
    return FdTarget(text, kind, inode=parse_uint(inside.split(",")[0]))
