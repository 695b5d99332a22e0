"""Unix socket peers through NETLINK_SOCK_DIAG (the way ``ss -xp`` finds them).

Contract:
- ``build_unix_request(seq)`` gives the bytes of one dump request; ``parse_unix_diag(data)`` is
  pure: the bytes of one or more netlink messages -> (sockets, done). It never raises on short
  or odd input: what cannot be parsed is skipped (the kernel's layout: its docstring).
- ``unix_sockets()`` opens a NETLINK_SOCK_DIAG socket, dumps every unix socket of the reader's
  network namespace with its peer and returns ``{inode: UnixSock}``; None where the kernel
  refuses (no CONFIG_UNIX_DIAG, no permission): callers fall back to what strace printed.
- ``unix_peers(inodes)`` narrows that to ``{inode: peer_inode}`` for the inodes asked about.
Why netlink: /proc/net/unix lists inodes but not who is connected to whom; only sock_diag
(UDIAG_SHOW_PEER) says which inode is at the other end. It reads kernel tables only.
"""
from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

__all__ = ["UnixSock", "build_unix_request", "parse_unix_diag", "unix_sockets", "unix_peers",
           "SockDiagError"]

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300          # NLM_F_ROOT | NLM_F_MATCH
NLMSG_ERROR = 2
NLMSG_DONE = 3
UDIAG_SHOW_NAME = 0x1
UDIAG_SHOW_PEER = 0x4
UNIX_DIAG_NAME = 0
UNIX_DIAG_PEER = 2
ALL_STATES = 0xFFFFFFFF

_NLMSGHDR = struct.Struct("=IHHII")
_UNIX_REQ = struct.Struct("=BBHIIIII")
_UNIX_MSG = struct.Struct("=BBBBIII")
_NLATTR = struct.Struct("=HH")
# socket types and TCP-like states as the kernel numbers them (linux/net.h, tcp_states.h)
SOCK_TYPES = {1: "STREAM", 2: "DGRAM", 5: "SEQPACKET"}
STATES = {1: "ESTABLISHED", 7: "CLOSE", 10: "LISTEN"}


class SockDiagError(OSError):
    """The kernel answered with NLMSG_ERROR (errno in ``errno``)."""


@dataclass(frozen=True)
class UnixSock:
    inode: int
    type: str                      # STREAM, DGRAM, SEQPACKET
    state: str                     # ESTABLISHED, LISTEN, CLOSE, ...
    peer: Optional[int] = None     # inode of the socket at the other end, None if unconnected
    name: Optional[str] = None     # bound path ("@name" for the abstract namespace)


def _align4(n: int) -> int:
    return (n + 3) & ~3


def build_unix_request(seq: int = 1, show: int = UDIAG_SHOW_PEER | UDIAG_SHOW_NAME) -> bytes:
    """One SOCK_DIAG_BY_FAMILY dump request for every unix socket in every state."""
    body = _UNIX_REQ.pack(socket.AF_UNIX, 0, 0, ALL_STATES, 0, show, 0xFFFFFFFF, 0xFFFFFFFF)
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(body), SOCK_DIAG_BY_FAMILY,
                          NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body


def _attrs(data: bytes, off: int, end: int) -> Iterable[Tuple[int, bytes]]:
    while off + _NLATTR.size <= end:
        alen, atype = _NLATTR.unpack_from(data, off)
        if alen < _NLATTR.size or off + alen > end:
            return
        yield atype & 0x3FFF, data[off + _NLATTR.size:off + alen]   # drop NLA_F_* flag bits
        off += _align4(alen)


def _name(payload: bytes) -> str:
    if payload[:1] == b"\0":          # abstract namespace: no terminating NUL, shown as @
        return "@" + payload[1:].decode("utf-8", "replace")
    return payload.split(b"\0", 1)[0].decode("utf-8", "replace")


def messages(data: bytes, min_body: int) -> Iterator[Tuple[int, int]]:
    """(body offset, end offset) of each SOCK_DIAG_BY_FAMILY message in one buffer whose body
    holds at least ``min_body`` bytes; stops at NLMSG_DONE or the first malformed header.
    ``done(data)`` says whether the buffer ends the dump. Raises ``SockDiagError`` for an
    NLMSG_ERROR with a non-zero errno (the dump was refused)."""
    off = 0
    while off + _NLMSGHDR.size <= len(data):
        mlen, mtype, _flags, _seq, _pid = _NLMSGHDR.unpack_from(data, off)
        if mlen < _NLMSGHDR.size or off + mlen > len(data) or mtype == NLMSG_DONE:
            return
        body = off + _NLMSGHDR.size
        if mtype == NLMSG_ERROR:
            (err,) = struct.unpack_from("=i", data, body) if mlen >= _NLMSGHDR.size + 4 else (0,)
            if err:
                raise SockDiagError(-err, os.strerror(-err))
            return
        if mtype == SOCK_DIAG_BY_FAMILY and mlen >= _NLMSGHDR.size + min_body:
            yield body, off + mlen
        off += _align4(mlen)


def done(data: bytes) -> bool:
    """Whether the buffer holds the dump's end (NLMSG_DONE, or an NLMSG_ERROR of 0)."""
    off = 0
    while off + _NLMSGHDR.size <= len(data):
        mlen, mtype = _NLMSGHDR.unpack_from(data, off)[:2]
        if mlen < _NLMSGHDR.size or off + mlen > len(data):
            return False
        if mtype in (NLMSG_DONE, NLMSG_ERROR):
            return True
        off += _align4(mlen)
    return False


def parse_unix_diag(data: bytes) -> Tuple[List[UnixSock], bool]:
    """Sockets in one buffer of netlink messages, and whether the dump ended in it (pure).

    Raises ``SockDiagError`` for an NLMSG_ERROR with a non-zero errno (the dump was refused).

    Kernel layout (include/uapi/linux/netlink.h, sock_diag.h, unix_diag.h), all host-endian:
      struct nlmsghdr      { u32 len; u16 type; u16 flags; u32 seq; u32 pid; }          16 bytes
      struct unix_diag_req { u8 family; u8 protocol; u16 pad; u32 states; u32 ino;
                             u32 show; u32 cookie[2]; }                                  24 bytes
      struct unix_diag_msg { u8 family; u8 type; u8 state; u8 pad; u32 ino; u32 cookie[2]; } 16
      followed by attributes  struct nlattr { u16 len; u16 type; } + payload, 4-byte aligned:
      UNIX_DIAG_NAME (0) the bound path (abstract names start with NUL), UNIX_DIAG_PEER (2) u32
      peer inode. The reply is a multipart dump ended by NLMSG_DONE; NLMSG_ERROR carries -errno."""
    out: List[UnixSock] = []
    for body, end in messages(data, _UNIX_MSG.size):
        fam, stype, state, _pad, ino, _c0, _c1 = _UNIX_MSG.unpack_from(data, body)
        peer: Optional[int] = None
        name: Optional[str] = None
        for atype, payload in _attrs(data, body + _UNIX_MSG.size, end):
            if atype == UNIX_DIAG_PEER and len(payload) >= 4:
                peer = struct.unpack_from("=I", payload)[0] or None
            elif atype == UNIX_DIAG_NAME and payload:
                name = _name(payload)
        if fam == socket.AF_UNIX:
            out.append(UnixSock(ino, SOCK_TYPES.get(stype, str(stype)),
                                STATES.get(state, str(state)), peer, name))
    return out, done(data)


def dump_request(request: bytes, timeout: float = 2.0, bufsize: int = 1 << 17) -> List[bytes]:
    """Send one sock_diag dump request; the raw reply buffers up to NLMSG_DONE (or EOF)."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as s:
        s.settimeout(timeout)
        s.sendto(request, (0, 0))
        bufs: List[bytes] = []
        while True:
            data = s.recv(bufsize)
            bufs.append(data)
            if not data or done(data):
                return bufs


def dump_raw(timeout: float = 2.0) -> List[bytes]:
    """The raw reply buffers of one unix dump (for tests that want real bytes)."""
    return dump_request(build_unix_request(), timeout)


def unix_sockets(timeout: float = 2.0) -> Optional[Dict[int, UnixSock]]:
    """Every unix socket of this network namespace by inode, or None where netlink refuses.
    Why netlink: /proc/net/unix lists inodes but not who is connected to whom; only the kernel's
    sock_diag interface (UDIAG_SHOW_PEER) says which inode is at the other end of a connected or
    socketpair() socket. It reads kernel tables only and never touches the target."""
    try:
        bufs = dump_raw(timeout)
    except OSError:
        return None
    out: Dict[int, UnixSock] = {}
    for data in bufs:
        socks, _ = parse_unix_diag(data)
        for s in socks:
            out[s.inode] = s
    return out


def unix_peers(inodes: Iterable[int], table: Optional[Dict[int, UnixSock]] = None
               ) -> Optional[Dict[int, int]]:
    """{inode: peer inode} for the connected unix sockets among ``inodes``; None: no netlink."""
    table = unix_sockets() if table is None else table
    if table is None:
        return None
    return {i: table[i].peer for i in inodes if i in table and table[i].peer}  # type: ignore
