"""TCP sockets and their counters through sock_diag (tracer/linux/tcpdiag.py)."""
from __future__ import annotations

import os
import socket
import struct
import time

import pytest

from tracer.linux import tcpdiag
from tracer.linux.tcpdiag import TcpSock, build_tcp_request, parse_tcp_diag, tcp_sockets


def _msg(family, state, sport, dport, src, dst, inode, cookie, info=b"", mtype=20):
    sockid = struct.pack(">HH16s16s", sport, dport, src, dst) + struct.pack("=III", 0, cookie
                                                                            & 0xFFFFFFFF,
                                                                            cookie >> 32)
    body = struct.pack("=BBBB", family, state, 0, 0) + sockid + struct.pack("=IIIII", 0, 0, 0,
                                                                            1000, inode)
    if info:
        attr = struct.pack("=HH", 4 + len(info), tcpdiag.INET_DIAG_INFO) + info
        body += attr + b"\0" * (-len(attr) % 4)
    return struct.pack("=IHHII", 16 + len(body), mtype, 2, 1, 0) + body


def _info(acked, received, segs):
    b = bytearray(232)
    struct.pack_into("=Q", b, 120, acked)
    struct.pack_into("=Q", b, 128, received)
    struct.pack_into("=I", b, 156, segs)
    return bytes(b)


def test_request_layout():
    req = build_tcp_request(socket.AF_INET6, seq=7)
    length, mtype, flags, seq, _ = struct.unpack_from("=IHHII", req)
    assert length == len(req) == 16 + 56 and mtype == 20 and seq == 7 and flags & 0x300
    fam, proto, ext, _pad, states = struct.unpack_from("=BBBBI", req, 16)
    assert (fam, proto, ext, states) == (socket.AF_INET6, socket.IPPROTO_TCP, 2, 0xFFF)


@pytest.mark.parametrize("data, want, done", [
    (_msg(2, 1, 8000, 5555, socket.inet_aton("127.0.0.1") + bytes(12),
          socket.inet_aton("10.0.0.2") + bytes(12), 42, (7 << 32) | 9, _info(100, 5, 3))
     + struct.pack("=IHHII", 20, 3, 2, 1, 0) + b"\0" * 4,
     [TcpSock((7 << 32) | 9, 42, "ESTABLISHED", ("127.0.0.1", 8000), ("10.0.0.2", 5555),
              100, 5, 3, 0, 0)], True),
    # TIME_WAIT leftovers carry no tcp_info and no inode
    (_msg(10, 6, 8000, 1, socket.inet_pton(socket.AF_INET6, "::1"),
          socket.inet_pton(socket.AF_INET6, "::1"), 0, 5),
     [TcpSock(5, 0, "TIME_WAIT", ("::1", 8000), ("::1", 1))], False),
    # an old kernel's short tcp_info: the counters it lacks are None, never 0
    (_msg(2, 10, 80, 0, bytes(16), bytes(16), 3, 1, bytes(100)),
     [TcpSock(1, 3, "LISTEN", ("0.0.0.0", 80), ("0.0.0.0", 0))], False),
    (b"", [], False),
    (b"\x10\x00\x00", [], False),                                  # cut short
    (_msg(2, 1, 1, 2, bytes(16), bytes(16), 1, 1)[:40], [], False),  # length beyond the data
])
def test_parse_table(data, want, done):
    assert parse_tcp_diag(data) == (want, done)


def test_kernel_refusal_raises():
    err = struct.pack("=IHHII", 36, 2, 0, 1, 0) + struct.pack("=i", -13) + bytes(16)
    with pytest.raises(tcpdiag.SockDiagError):
        parse_tcp_diag(err)


def test_live_loopback_counters():
    """A real connection: inodes match fstat, the accepted socket has the listener's port, and
    bytes_acked / data_segs_out count exactly what was sent."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    cli = socket.create_connection(srv.getsockname())
    acc, _ = srv.accept()
    try:
        before = tcp_sockets()
        if before is None:
            pytest.skip("sock_diag refused here")
        ino = {name: os.fstat(s.fileno()).st_ino for name, s in
               (("srv", srv), ("cli", cli), ("acc", acc))}
        by_inode = {s.inode: s for s in before.values()}
        assert by_inode[ino["srv"]].state == "LISTEN"
        assert by_inode[ino["acc"]].local[1] == srv.getsockname()[1]
        a0 = by_inode[ino["cli"]]
        cli.sendall(b"x" * 12345)          # send(2): /proc/PID/io does not see these bytes
        deadline = time.monotonic() + 5
        while True:
            after = {s.inode: s for s in (tcp_sockets() or {}).values()}
            a1 = after[ino["cli"]]
            if a1.bytes_acked - a0.bytes_acked == 12345 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert a1.cookie == a0.cookie and a1.bytes_acked - a0.bytes_acked == 12345
        assert a1.data_segs_out > a0.data_segs_out
        assert after[ino["acc"]].bytes_received >= 12345
    finally:
        for s in (cli, acc, srv):
            s.close()
