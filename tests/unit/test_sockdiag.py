"""sock_diag: the pure parser on bytes captured from a real kernel, and a live round trip."""
from __future__ import annotations

import os
import socket
import struct

import pytest

from tracer.linux import sockdiag

# One NETLINK_SOCK_DIAG unix dump (UDIAG_SHOW_PEER | UDIAG_SHOW_NAME) captured on this VM
# (Linux 6.18, x86_64) while the test process held: a socketpair (inodes 78123, 78124), a
# listening socket bound to /tmp/ht-sd.sock (78125), a client connected to it (78126) and its
# accepted end (78127), and a datagram socket bound to the abstract name "hangtrace-abs"
# (78128); 1680/1681 are a socketpair of the system.
CAPTURED = bytes.fromhex(
    "30000000140002000100000072690000010101002b3101001a00000000000000080002002c3101000500060000"
    "00000030000000140002000100000072690000010101002c3101001b00000000000000080002002b3101000500"
    "06000000000030000000140002000100000072690000010101009006000017000000000000000800020091060000"
    "05000600000000003c00000014000200010000007269000001010a002d3101001c000000000000001400000"
    "02f746d702f68742d73642e736f636b00050006000000000044000000140002000100000072690000010101002f"
    "3101001d00000000000000140000002f746d702f68742d73642e736f636b00080002002e310100050006000000"
    "000030000000140002000100000072690000010101002e3101001e00000000000000080002002f310100050006"
    "000000000030000000140002000100000072690000010101009106000019000000000000000800020090060000"
    "05000600000000003c00000014000200010000007269000001020700303101001f000000000000001200000000"
    "68616e6774726163652d61627300000500060000000000")
DONE = bytes.fromhex("1400000003000200010000007269000000000000")


def test_parser_reads_peers_names_and_states_from_real_bytes():
    socks, done = sockdiag.parse_unix_diag(CAPTURED)
    assert not done
    by = {s.inode: s for s in socks}
    assert by[78123].peer == 78124 and by[78124].peer == 78123
    assert by[78123].type == "STREAM" and by[78123].state == "ESTABLISHED"
    assert by[78125].state == "LISTEN" and by[78125].name == "/tmp/ht-sd.sock"
    assert by[78125].peer is None
    assert by[78126].peer == 78127 and by[78127].peer == 78126
    assert by[78127].name == "/tmp/ht-sd.sock"        # the accepted end shows the bound path
    assert by[78128].type == "DGRAM" and by[78128].name == "@hangtrace-abs"
    assert by[1680].peer == 1681
    assert sockdiag.parse_unix_diag(DONE) == ([], True)


def test_parser_never_raises_on_cut_or_odd_input():
    for n in range(0, len(CAPTURED), 7):
        socks, _ = sockdiag.parse_unix_diag(CAPTURED[:n])
        assert all(isinstance(s.inode, int) for s in socks)
    assert sockdiag.parse_unix_diag(b"\xff" * 40) == ([], False)


def test_parser_raises_the_kernels_error():
    err = struct.pack("=IHHII", 36, sockdiag.NLMSG_ERROR, 0, 1, 0) + struct.pack("=i", -22) \
        + bytes(16)
    with pytest.raises(sockdiag.SockDiagError):
        sockdiag.parse_unix_diag(err)


def test_request_layout():
    req = sockdiag.build_unix_request(7)
    length, mtype, flags, seq, _ = struct.unpack_from("=IHHII", req)
    assert (length, mtype, seq) == (40, 20, 7) and flags == 0x301
    family, _, _, states, ino, show = struct.unpack_from("=BBHIII", req, 16)
    assert family == socket.AF_UNIX and states == 0xFFFFFFFF and ino == 0 and show == 5


def test_live_socketpair_peers():
    table = sockdiag.unix_sockets()
    if table is None:
        pytest.skip("no NETLINK_SOCK_DIAG for unix sockets here")
    a, b = socket.socketpair()
    with a, b:
        ia, ib = os.fstat(a.fileno()).st_ino, os.fstat(b.fileno()).st_ino
        assert sockdiag.unix_peers([ia, ib, 1]) == {ia: ib, ib: ia}
