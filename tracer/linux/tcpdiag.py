"""TCP sockets with their counters through NETLINK_SOCK_DIAG (the way ``ss -tin`` reads them).

Contract:
- ``build_tcp_request(family, seq)`` gives the bytes of one dump request; ``parse_tcp_diag(data)``
  is pure: the bytes of one or more netlink messages -> (sockets, done). It never raises on
  short or odd input (what cannot be parsed is skipped), only ``SockDiagError`` when the kernel
  refused the dump. The kernel's layout: ``parse_tcp_diag``'s docstring.
- ``tcp_sockets()`` dumps every TCP socket (IPv4 and IPv6, every state) of the reader's network
  namespace and returns ``{cookie: TcpSock}``; None where the kernel refuses (no
  CONFIG_INET_DIAG, no permission). It reads kernel tables only and never touches a process.
Why: /proc/PID/io counts bytes passed to write(2), not to send(2)/sendmsg(2), and Python
servers send with send(); the kernel's per-socket counters count every byte (``tcp_sockets``).
"""
from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Iterable, Dict, List, Optional, Tuple

from .sockdiag import (NLM_F_DUMP, NLM_F_REQUEST, SOCK_DIAG_BY_FAMILY,
                       SockDiagError, _attrs, done, dump_request, messages)

__all__ = ["TcpSock", "build_tcp_request", "parse_tcp_diag", "tcp_sockets", "TCP_STATES",
           "SockDiagError"]

INET_DIAG_INFO = 2
ALL_TCP_STATES = 0xFFF
TCP_STATES = {1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2",
              6: "TIME_WAIT", 7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK", 10: "LISTEN",
              11: "CLOSING"}

_NLMSGHDR = struct.Struct("=IHHII")
_REQ = struct.Struct("=BBBBI")                 # then the 48-byte sockid
_SOCKID = struct.Struct(">HH16s16s")            # big-endian ports, addresses; if, cookie follow
_MSG_HEAD = struct.Struct("=BBBB")
_MSG_TAIL = struct.Struct("=IIIII")            # expires, rqueue, wqueue, uid, inode
_COOKIE = struct.Struct("=II")
_SOCKID_SIZE = 48
_MSG_SIZE = _MSG_HEAD.size + _SOCKID_SIZE + _MSG_TAIL.size
_OFF_BYTES_ACKED, _OFF_BYTES_RECEIVED, _OFF_DATA_SEGS_OUT = 120, 128, 156
_OFF_DATA_SEGS_IN, _OFF_BYTES_SENT = 152, 200


@dataclass(frozen=True)
class TcpSock:
    cookie: int                    # the kernel's id of the socket (unique while it exists)
    inode: int                     # 0: no file refers to it (accept queue, TIME_WAIT)
    state: str                     # ESTABLISHED, LISTEN, TIME_WAIT, ...
    local: Tuple[str, int]         # (address, port)
    remote: Tuple[str, int]
    bytes_acked: Optional[int] = None
    bytes_received: Optional[int] = None
    data_segs_out: Optional[int] = None
    data_segs_in: Optional[int] = None       # tcpi_data_segs_in, u32 at 152 (Linux >= 4.6)
    bytes_sent: Optional[int] = None         # tcpi_bytes_sent, u64 at 200 (Linux >= 4.19)


def build_tcp_request(family: int = socket.AF_INET, seq: int = 1) -> bytes:
    """One SOCK_DIAG_BY_FAMILY dump request for every TCP socket of ``family``, with tcp_info."""
    body = _REQ.pack(family, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), 0,
                     ALL_TCP_STATES) + bytes(_SOCKID_SIZE)
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(body), SOCK_DIAG_BY_FAMILY,
                          NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body


def _addr(family: int, raw: bytes) -> str:
    if family == socket.AF_INET:
        return socket.inet_ntop(socket.AF_INET, raw[:4])
    return socket.inet_ntop(socket.AF_INET6, raw)


def _u64(b: bytes, off: int) -> Optional[int]:
    return struct.unpack_from("=Q", b, off)[0] if len(b) >= off + 8 else None


def _u32(b: bytes, off: int) -> Optional[int]:
    return struct.unpack_from("=I", b, off)[0] if len(b) >= off + 4 else None


def parse_tcp_diag(data: bytes) -> Tuple[List[TcpSock], bool]:
    """Sockets in one buffer of netlink messages, and whether the dump ended in it (pure).

    Kernel layout (include/uapi/linux/inet_diag.h, tcp.h), host-endian except ports and addresses:
      struct inet_diag_req_v2 { u8 family; u8 protocol; u8 ext; u8 pad; u32 states;
                                struct inet_diag_sockid id; }                            56 bytes
      struct inet_diag_sockid { be16 sport; be16 dport; be32 src[4]; be32 dst[4]; u32 if;
                                u32 cookie[2]; }                                         48 bytes
      struct inet_diag_msg    { u8 family; u8 state; u8 timer; u8 retrans; sockid;
                                u32 expires; u32 rqueue; u32 wqueue; u32 uid; u32 inode; } 72
      followed by attributes; INET_DIAG_INFO (2), asked for with ext bit 1 << (2 - 1), holds
      struct tcp_info: tcpi_bytes_acked u64 at offset 120, tcpi_bytes_received u64 at 128,
      tcpi_data_segs_out u32 at 156 (Linux >= 4.6; a shorter struct leaves these None).
      inode is 0 for a socket no file refers to: a connection still in a listener's accept queue,
      or a TIME_WAIT leftover."""
    out: List[TcpSock] = []
    for body, end in messages(data, _MSG_SIZE):
        fam, state, _timer, _retrans = _MSG_HEAD.unpack_from(data, body)
        sport, dport, src, dst = _SOCKID.unpack_from(data, body + _MSG_HEAD.size)
        c0, c1 = _COOKIE.unpack_from(data, body + _MSG_HEAD.size + 40)
        *_, inode = _MSG_TAIL.unpack_from(data, body + _MSG_HEAD.size + _SOCKID_SIZE)
        info = b""
        for atype, payload in _attrs(data, body + _MSG_SIZE, end):
            if atype == INET_DIAG_INFO:
                info = payload
        if fam in (socket.AF_INET, socket.AF_INET6):
            out.append(TcpSock(
                cookie=c0 | (c1 << 32), inode=inode, state=TCP_STATES.get(state, str(state)),
                local=(_addr(fam, src), sport), remote=(_addr(fam, dst), dport),
                bytes_acked=_u64(info, _OFF_BYTES_ACKED),
                bytes_received=_u64(info, _OFF_BYTES_RECEIVED),
                data_segs_out=_u32(info, _OFF_DATA_SEGS_OUT),
                data_segs_in=_u32(info, _OFF_DATA_SEGS_IN),
                bytes_sent=_u64(info, _OFF_BYTES_SENT)))
    return out, done(data)


def _dump(family: int, timeout: float) -> List[bytes]:
    return dump_request(build_tcp_request(family), timeout)


def tcp_sockets(timeout: float = 2.0) -> Optional[Dict[int, TcpSock]]:
    """Every TCP socket of this network namespace by cookie, or None where netlink refuses.
    Why: /proc/PID/io counts bytes passed to write(2), but not to send(2)/sendmsg(2) (the kernel
    adds to wchar in vfs_write, not in sock_sendmsg), and Python servers send with send(). The
    kernel's per-socket counters (struct tcp_info) count every byte: ``bytes_acked`` (delivered to
    the peer and acknowledged, plus one for the SYN) and ``data_segs_out`` (segments that carried
    data; keep-alive probes carry none)."""
    out: Dict[int, TcpSock] = {}
    try:
        for family in (socket.AF_INET, socket.AF_INET6):
            for data in _dump(family, timeout):
                for s in parse_tcp_diag(data)[0]:
                    out[s.cookie] = s
    except OSError:
        return None
    return out


def on_listening_port(s: TcpSock, listening: Iterable[Tuple[str, int]]) -> bool:
    """``s`` is on one of the (address, port) pairs a listener binds (a wildcard address
    included)."""
    addr, port = s.local
    return any(p == port and (a == addr or a in ("0.0.0.0", "::") or addr == "::ffff:" + a)
               for a, p in listening)


def accepted_since(before: Dict[int, TcpSock], now: Dict[int, TcpSock],
                   listening: Iterable[Tuple[str, int]]) -> Dict[int, int]:
    """{port: connections} taken on the listening ports between two dumps: a socket on such a
    port that a file refers to (accepted: the tree took it out of the accept queue) or that the
    server's side closed first (TIME_WAIT), and that was absent from ``before`` or was then
    still waiting in the accept queue. A connection accepted and closed by its client between
    two dumps leaves nothing in the kernel's tables."""
    listening = list(listening)
    ports: Dict[int, int] = {}
    for cookie, s in now.items():
        if s.state in ("LISTEN", "SYN_RECV") or not (s.inode or s.state == "TIME_WAIT") \
                or not on_listening_port(s, listening):
            continue
        old = before.get(cookie)
        if old is None or (not old.inode and old.state != "TIME_WAIT"):
            ports[s.local[1]] = ports.get(s.local[1], 0) + 1
    return ports
