"""Open files and sockets of a process, from /proc/PID/fd, fdinfo and /proc/PID/net.

Contract:
- ``classify_fd_target`` is fdtarget.fd_kind: readlink text -> fd kind (events/__init__.py's kinds).
- ``read_fds`` returns the fd table with kinds refined from what /proc tells: sockets resolved
  to tcp/udp/unix/netlink through the socket tables of the process's OWN network namespace
  (``SocketTables``: read once a namespace), directories from O_DIRECTORY; socket targets
  written like strace -yy; an eventfd named by its id where fdinfo gives one (``read_fds_checked``).
- Nothing here stat()s an fd's target: stat on a file of a dead NFS server blocks forever, and a
  hang tracer must not hang. A named FIFO therefore reads as kind "file".
- Like procfs.py: vanished fds are skipped, unreadable tables give what could be read.
"""
from __future__ import annotations

import os
import re
import socket
import struct
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Tuple

from ..events import FdInfo
from .fdtarget import fd_kind

__all__ = ["SocketEntry", "SocketTables", "classify_fd_target", "eventfd_target", "parse_fdinfo", "read_fds",
           "read_fds_checked", "socket_table", "listening_sockets", "TCP_STATES"]

# The kind of a /proc/PID/fd link text ("pipe:[12]" -> "pipe"): fdtarget.py's reader; sockets
# are "socket" there, only the socket tables tell tcp from unix (read_fds).
classify_fd_target = fd_kind


_O_ACCMODE = 0o3
_O_DIRECTORY = 0o200000
# O_TMPFILE is __O_TMPFILE | O_DIRECTORY: an unnamed regular file, not a directory.
_O_TMPFILE_BIT = 0o20000000
_O_PATH = 0o10000000
_MODES = {0: "r", 1: "w", 2: "rw"}


def parse_fdinfo(text: str) -> Dict[str, int]:
    """pos, flags (octal in the file) and ino (Linux >= 5.14) from /proc/PID/fdinfo/N; for an
    eventfd also eventfd-id (decimal) and eventfd-count (hex in the file)."""
    out: Dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        try:
            if key == "flags":
                out["flags"] = int(value, 8)
            elif key in ("pos", "ino", "eventfd-id"):
                out[key] = int(value)
            elif key == "eventfd-count":
                out[key] = int(value, 16)
        except ValueError:
            pass
    return out


def read_text(path: str) -> Optional[str]:
    """Content of a /proc file, None when unreadable (gone, denied)."""
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


# --------------------------------------------------------------------------- socket tables
TCP_STATES = {1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2",
              6: "TIME_WAIT", 7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK", 10: "LISTEN",
              11: "CLOSING", 12: "NEW_SYN_RECV"}
_UNIX_TYPES = {1: "STREAM", 2: "DGRAM", 5: "SEQPACKET"}
_SO_ACCEPTCON = 0x10000  # __SO_ACCEPTCON in /proc/net/unix Flags: a listening socket


@dataclass(frozen=True, slots=True)
class SocketEntry:
    """One socket of /proc/PID/net/*: proto is tcp, tcp6, udp, udp6, unix or netlink."""
    proto: str
    local: str
    remote: str
    state: str
    listening: bool
    unix_type: str = ""

    def fd_target(self, inode: int) -> str:
        """strace -yy style text for this socket."""
        if self.proto == "unix":
            name = f"{inode},{self.local}" if self.local else str(inode)
            return f"UNIX-{self.unix_type or 'STREAM'}:[{name}]"
        if self.proto == "netlink":
            return f"NETLINK:[{inode}]"
        label = self.proto[:3].upper() + ("v6" if self.proto.endswith("6") else "")
        addr = self.local if self.listening or not self.remote else f"{self.local}->{self.remote}"
        return f"{label}:[{addr}]"


def _decode_addr(hexaddr: str) -> str:
    """ "0100007F:1F40" -> "127.0.0.1:8000"; IPv6 "[::1]:8000".

    The kernel prints the address as 32-bit words in host byte order (little-endian on x86 and
    arm64) and the port as a plain number.
    """
    addr, _, port = hexaddr.partition(":")
    raw = bytes.fromhex(addr)
    words = struct.unpack(f"<{len(raw) // 4}I", raw)
    packed = struct.pack(f">{len(words)}I", *words)
    if len(packed) == 4:
        return f"{socket.inet_ntop(socket.AF_INET, packed)}:{int(port, 16)}"
    return f"[{socket.inet_ntop(socket.AF_INET6, packed)}]:{int(port, 16)}"


def _parse_inet(text: str, proto: str, table: Dict[int, SocketEntry]) -> None:
    for line in text.splitlines()[1:]:
        f = line.split()
        try:
            inode, st = int(f[9]), int(f[3], 16)
            local, remote = _decode_addr(f[1]), _decode_addr(f[2])
        except (IndexError, ValueError):
            continue
        if inode == 0:  # TIME_WAIT and other sockets no longer owned by any fd
            continue
        state = TCP_STATES.get(st, str(st))
        if proto.startswith("tcp"):
            listening = st == 10
        else:  # a bound, unconnected UDP socket (state 7) receives from anyone: "listening"
            listening = st == 7 and not local.endswith(":0")
        if remote in ("0.0.0.0:0", "[::]:0"):  # not connected
            remote = ""
        table[inode] = SocketEntry(proto, local, remote, state, listening)


def _parse_unix(text: str, table: Dict[int, SocketEntry]) -> None:
    # Num RefCount Protocol Flags Type St Inode [Path]; the path may contain spaces.
    for line in text.splitlines()[1:]:
        f = line.split(None, 7)
        try:
            flags, typ, st, inode = int(f[3], 16), int(f[4], 16), int(f[5], 16), int(f[6])
        except (IndexError, ValueError):
            continue
        path = f[7].rstrip("\n") if len(f) > 7 else ""
        # St: 1 unconnected, 2 connecting, 3 connected, 4 disconnecting
        state = {1: "UNCONNECTED", 2: "CONNECTING", 3: "CONNECTED"}.get(st, str(st))
        table[inode] = SocketEntry("unix", path, "", state, bool(flags & _SO_ACCEPTCON),
                                   _UNIX_TYPES.get(typ, str(typ)))


def _parse_netlink(text: str, table: Dict[int, SocketEntry]) -> None:
    for line in text.splitlines()[1:]:
        f = line.split()
        try:
            table[int(f[-1])] = SocketEntry("netlink", f[1], "", "", False)
        except (IndexError, ValueError):
            continue


def socket_table(root: str = "/proc", pid: Optional[int] = None) -> Dict[int, SocketEntry]:
    """inode -> SocketEntry for the network namespace of ``pid`` (of the reader when None)."""
    base = f"{root}/{pid}/net" if pid is not None else f"{root}/net"
    table: Dict[int, SocketEntry] = {}
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        text = read_text(f"{base}/{proto}")
        if text:
            _parse_inet(text, proto, table)
    text = read_text(f"{base}/unix")
    if text:
        _parse_unix(text, table)
    text = read_text(f"{base}/netlink")
    if text:
        _parse_netlink(text, table)
    return table


class SocketTables:
    """The socket tables of one pass over processes (a discovery, the last look at a tree, a
    probe), each network namespace's read once, at the first process of it that has a socket:
    a /proc/PID/net/tcp read walks the kernel's whole TCP hash (5 ms here), and a pass that
    read it twice per process spent 30 ms on each process of a serving tree."""

    def __init__(self, root: str = "/proc") -> None:
        self.root = root
        self._by_ns: Dict[str, Dict[int, SocketEntry]] = {}

    def of(self, pid: int) -> Dict[int, SocketEntry]:
        """inode -> SocketEntry of ``pid``'s network namespace (socket_table's)."""
        try:
            ns = os.readlink(f"{self.root}/{pid}/ns/net")
        except OSError:
            ns = f"pid{pid}"            # unreadable: its own table, not another's
        table = self._by_ns.get(ns)
        if table is None:
            table = self._by_ns[ns] = socket_table(self.root, pid)
        return table


# --------------------------------------------------------------------------- fd table
def eventfd_target(eventfd_id: int) -> str:
    """The fd target read_fds gives an eventfd whose fdinfo names its id: "eventfd:[3]"."""
    return f"eventfd:[{eventfd_id}]"


_INODE_RE = re.compile(r"^(?:socket|pipe|pidfd):\[(\d+)\]$")


def read_fds_checked(pid: int, root: str = "/proc",
                     sockets: Optional[Dict[int, SocketEntry]] = None,
                     tables: Optional[SocketTables] = None) -> Optional[List[FdInfo]]:
    """The fd table sorted by fd, or None when /proc/PID/fd cannot be listed (gone, denied).

    ``sockets`` is a socket_table of the process's namespace; when none is given it is read
    here (from ``tables`` when given), once, when the process has a socket.
    Sockets are resolved through /proc/PID/net/*, not /proc/net, which is the reader's, and written
    like strace -yy: "TCP:[127.0.0.1:5000->127.0.0.1:8000]", "TCPv6:[[::]:8000]",
    "UNIX-STREAM:[123,/tmp/x.sock]". An eventfd's link reads "anon_inode:[eventfd]" for every
    eventfd (one anon inode for all), so its target is "eventfd:[ID]" when fdinfo has an
    "eventfd-id:" line (seen on 6.18): the id names the eventfd object, shared by every fd (of any
    process) that refers to it. Without that line the target stays "anon_inode:[eventfd]". The kind
    is "eventfd" either way."""
    fd_dir = f"{root}/{pid}/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return None
    out: List[FdInfo] = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            target = os.readlink(f"{fd_dir}/{name}")
        except OSError:  # closed between listdir and readlink
            continue
        kind = classify_fd_target(target)
        info = parse_fdinfo(read_text(f"{root}/{pid}/fdinfo/{name}") or "")
        m = _INODE_RE.match(target)
        inode = int(m.group(1)) if m else info.get("ino")
        flags = info.get("flags")
        mode = "" if flags is None or flags & _O_PATH else _MODES.get(flags & _O_ACCMODE, "")
        if kind == "file" and flags is not None and flags & _O_DIRECTORY \
                and not flags & _O_TMPFILE_BIT:
            kind = "dir"
        if kind == "eventfd" and "eventfd-id" in info:
            target = eventfd_target(info["eventfd-id"])
        if kind == "socket" and inode is not None:
            if sockets is None:
                sockets = tables.of(pid) if tables is not None else socket_table(root, pid)
            entry = sockets.get(inode)
            if entry is not None:
                kind = {"tcp6": "tcp", "udp6": "udp"}.get(entry.proto, entry.proto)
                target = entry.fd_target(inode)
        out.append(FdInfo(int(name), kind, target, mode, info.get("pos"), inode))
    out.sort(key=lambda f: f.fd)
    return out


def written_positions(pid: int, fds: Iterable[int],
                      root: str = "/proc") -> Dict[int, Tuple[str, int]]:
    """{fd: (path, position)} of those of ``fds`` that are regular files open for writing (a log,
    stdout sent to a file): two fdinfo reads each, cheap enough for every look of ``watch``. An
    fd closed, reopened on something else or unreadable is left out."""
    out: Dict[int, Tuple[str, int]] = {}
    for fd in fds:
        try:
            target = os.readlink(f"{root}/{pid}/fd/{fd}")
        except OSError:
            continue
        if classify_fd_target(target) != "file":
            continue
        info = parse_fdinfo(read_text(f"{root}/{pid}/fdinfo/{fd}") or "")
        flags, pos = info.get("flags"), info.get("pos")
        if flags is None or pos is None or flags & (_O_PATH | _O_DIRECTORY) \
                or _MODES.get(flags & _O_ACCMODE, "r") == "r":
            continue
        out[fd] = (target, pos)
    return out


def read_fds(pid: int, root: str = "/proc",
             sockets: Optional[Dict[int, SocketEntry]] = None,
             tables: Optional[SocketTables] = None) -> List[FdInfo]:
    """The fd table sorted by fd; [] when it cannot be read (see read_fds_checked)."""
    return read_fds_checked(pid, root, sockets, tables) or []


def listening_sockets(pid: int, root: str = "/proc", fds: Optional[List[FdInfo]] = None,
                      sockets: Optional[Dict[int, SocketEntry]] = None,
                      tables: Optional[SocketTables] = None) -> List[str]:
    """Listening sockets owned by ``pid``: "tcp 127.0.0.1:8000", "tcp6 [::]:8000",
    "udp 0.0.0.0:5353" (bound, unconnected), "unix /tmp/x.sock" ("unix @name" is abstract).

    A socket shared by several processes (inherited listen fd) is listed for each of them.
    """
    fds = read_fds(pid, root, sockets, tables) if fds is None else fds
    inodes = [f.inode for f in fds if f.kind in ("tcp", "udp", "unix", "socket") and f.inode]
    if not inodes:
        return []
    if sockets is None:
        sockets = tables.of(pid) if tables is not None else socket_table(root, pid)
    out = []
    for inode in inodes:
        e = sockets.get(inode)
        if e is not None and e.listening:
            out.append(f"{e.proto} {e.local or f'socket:[{inode}]'}")
    return sorted(set(out))
