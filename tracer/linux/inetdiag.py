"""TCP byte and segment counters per socket through NETLINK_SOCK_DIAG (the way ``ss -ti`` reads
them): what a process sent on a socket when no syscall tracer runs.

Contract:
- ``build_tcp_request(family, seq)`` gives the bytes of one dump request (every state, with
  INET_DIAG_INFO); ``parse_tcp_diag(data)`` is pure: the bytes of one or more netlink messages ->
  (``TcpCounters`` list, done). Short or odd input is skipped, never raised on; an NLMSG_ERROR
  raises ``SockDiagError``.
- ``tcp_counters()`` dumps every TCP socket (IPv4 and IPv6) of the reader's network namespace:
  ``{inode: TcpCounters}``, or None where the kernel refuses (no CONFIG_INET_DIAG, no
  permission). Sockets of processes in another network namespace are not in it.
Why: /proc/PID/io counts write(2) on sockets but not send(2)/sendmsg(2) (they do not pass through
vfs_write), so a process that only sends on sockets looks silent there; the kernel's tcp_info
carries the socket's own counters, whatever call moved the bytes.

Kernel layout (include/uapi/linux/inet_diag.h, tcp.h), host-endian unless noted:
  struct inet_diag_req_v2 { u8 family, protocol, ext, pad; u32 states; inet_diag_sockid id; } 56
  struct inet_diag_sockid { be16 sport, dport; be32 src[4], dst[4]; u32 if; u32 cookie[2]; } 48
  struct inet_diag_msg    { u8 family, state, timer, retrans; inet_diag_sockid id;
                            u32 expires, rqueue, wqueue, uid, inode; }                        72
  attribute INET_DIAG_INFO (2): struct tcp_info; offsets used: last_data_sent 44,
  last_data_recv 52 (ms ago), bytes_received 128 (u64, 4.1+), data_segs_in 152, data_segs_out
  156 (u32, 4.6+), bytes_sent 200 (u64, 4.19+). A shorter tcp_info (older kernel) leaves the
  missing counters None.
"""
from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from .sockdiag import (NETLINK_SOCK_DIAG, NLM_F_DUMP, NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERROR,
                       SOCK_DIAG_BY_FAMILY, SockDiagError, _NLMSGHDR, _align4, _attrs)

__all__ = ["TcpCounters", "build_tcp_request", "parse_tcp_diag", "tcp_counters"]

INET_DIAG_INFO = 2
ALL_STATES = 0xFFFFFFFF
_REQ = struct.Struct("=BBBBI")                 # + 48 bytes of sockid
_MSG = struct.Struct("=BBBB48sIIIII")
_TCP_STATES = {1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2",
               6: "TIME_WAIT", 7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK", 10: "LISTEN",
               11: "CLOSING"}


@dataclass(frozen=True)
class TcpCounters:
    inode: int
    state: str
    bytes_sent: Optional[int] = None
    bytes_received: Optional[int] = None
    segs_out: Optional[int] = None       # data segments
    segs_in: Optional[int] = None
    last_sent_ms: Optional[int] = None   # ms since data was last sent / received
    last_recv_ms: Optional[int] = None


def build_tcp_request(family: int = socket.AF_INET, seq: int = 1) -> bytes:
    body = _REQ.pack(family, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), 0, ALL_STATES)
    body += b"\0" * 48
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(body), SOCK_DIAG_BY_FAMILY,
                          NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body


def _field(info: bytes, fmt: str, off: int) -> Optional[int]:
    size = struct.calcsize(fmt)
    if len(info) < off + size:
        return None
    return struct.unpack_from(fmt, info, off)[0]


def _counters(inode: int, state: int, info: bytes) -> TcpCounters:
    return TcpCounters(inode, _TCP_STATES.get(state, str(state)),
                       _field(info, "=Q", 200), _field(info, "=Q", 128),
                       _field(info, "=I", 156), _field(info, "=I", 152),
                       _field(info, "=I", 44), _field(info, "=I", 52))


def parse_tcp_diag(data: bytes) -> Tuple[List[TcpCounters], bool]:
    """Sockets in one buffer of netlink messages, and whether NLMSG_DONE was seen (pure)."""
    out: List[TcpCounters] = []
    off, done = 0, False
    while off + _NLMSGHDR.size <= len(data):
        mlen, mtype, _flags, _seq, _pid = _NLMSGHDR.unpack_from(data, off)
        if mlen < _NLMSGHDR.size or off + mlen > len(data):
            break
        body = off + _NLMSGHDR.size
        if mtype == NLMSG_DONE:
            done = True
            break
        if mtype == NLMSG_ERROR:
            (err,) = struct.unpack_from("=i", data, body) if mlen >= _NLMSGHDR.size + 4 else (0,)
            if err:
                raise SockDiagError(-err, "inet_diag refused")
            done = True
            break
        if mtype == SOCK_DIAG_BY_FAMILY and mlen >= _NLMSGHDR.size + _MSG.size:
            fields = _MSG.unpack_from(data, body)
            state, inode = fields[1], fields[-1]
            info = b""
            for atype, payload in _attrs(data, body + _MSG.size, off + mlen):
                if atype == INET_DIAG_INFO:
                    info = payload
            if inode:
                out.append(_counters(inode, state, info))
        off += _align4(mlen)
    return out, done


def _dump(family: int, timeout: float) -> List[TcpCounters]:
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as s:
        s.settimeout(timeout)
        s.sendto(build_tcp_request(family), (0, 0))
        out: List[TcpCounters] = []
        while True:
            data = s.recv(1 << 17)
            socks, done = parse_tcp_diag(data)
            out += socks
            if done or not data:
                return out


def tcp_counters(timeout: float = 1.0) -> Optional[Dict[int, TcpCounters]]:
    """Every TCP socket of this network namespace by inode (module doc); None: refused."""
    table: Dict[int, TcpCounters] = {}
    try:
        for family in (socket.AF_INET, socket.AF_INET6):
            for c in _dump(family, timeout):
                table[c.inode] = c
    except OSError:
        return None
    return table
