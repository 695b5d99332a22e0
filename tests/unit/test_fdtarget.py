"""fdtarget: one reader of fd target text, for /proc links, strace -y/-yy decorations and the
socket/eventfd names procfs_fds writes. Inputs are real texts (strace 6.1 -yy on this VM, the
H200 logs in fixtures/gpu-h200, /proc/PID/fd links)."""
import pytest

from tracer.linux.fdtarget import FdTarget, fd_kind


@pytest.mark.parametrize("text,kind", [
    ("pipe:[5710]", "pipe"), ("socket:[1234]", "socket"), ("anon_inode:[eventfd]", "eventfd"),
    ("anon_inode:[eventpoll]", "epoll"), ("anon_inode:inotify", "inotify"),
    ("anon_inode:[timerfd]", "timerfd"), ("eventfd:[3]", "eventfd"), ("pidfd:[1029]", "pidfd"),
    ("/dev/nvidiactl<char 195:255>", "nvidiactl"), ("/dev/nvidia0<char 195:0>", "nvidia"),
    ("/dev/nvidia-uvm<char 509:0>", "nvidia-uvm"), ("/dev/null<char 1:3>", "null"),
    ("/dev/pts/0<char 136:0>", "tty"), ("/dev/sda<block 8:0>", "dev"),
    ("/dev/shm/nccl-abc", "file"), ("/tmp/x.log (deleted)", "file"),
    ("/memfd:cuda (deleted)", "anon"), ("net:[4026531840]", "anon"),
    ("TCP:[127.0.0.1:33245->127.0.0.1:52370]", "tcp"), ("TCPv6:[[::]:8000]", "tcp"),
    ("UDP:[0.0.0.0:5353]", "udp"), ("UNIX-STREAM:[12->13]", "unix"),
    ("UNIX-STREAM:[29745,\"/tmp/x.sock\"]", "unix"), ("NETLINK:[12]", "netlink"),
    ("PACKET:[99]", "socket"), ("", None),
])
def test_kinds(text, kind):
    assert fd_kind(text) == kind


def test_tcp_endpoints_and_reverse():
    t = FdTarget.parse("TCP:[127.0.0.1:33245->127.0.0.1:52370]")
    assert (t.local, t.remote, t.connected) == ("127.0.0.1:33245", "127.0.0.1:52370", True)
    assert t.reversed() == "TCP:[127.0.0.1:52370->127.0.0.1:33245]"
    assert t.endpoints() == ("127.0.0.1:33245", "127.0.0.1:52370")
    v6 = FdTarget.parse("TCPv6:[[::ffff:127.0.0.1]:29500->[::ffff:127.0.0.1]:41234]")
    assert v6.endpoints() == ("127.0.0.1:29500", "127.0.0.1:41234")
    listening = FdTarget.parse("TCPv6:[[::]:8000]")
    assert (listening.local, listening.remote, listening.reversed()) == ("[::]:8000", None, None)
    assert FdTarget.parse("TCP:[88123]").inode == 88123


def test_unix_inodes_peer_and_path():
    t = FdTarget.parse("UNIX-STREAM:[12->13]")
    assert (t.inode, t.peer_inode, t.endpoints()) == (12, 13, ("12", "13"))
    bound = FdTarget.parse('UNIX-STREAM:[29745,"/tmp/x.sock"]')
    assert (bound.inode, bound.local, bound.peer_inode) == (29745, "/tmp/x.sock", None)
    proc = FdTarget.parse("UNIX-STREAM:[29745,/tmp/x.sock]")
    assert (proc.inode, proc.local) == (29745, "/tmp/x.sock")


def test_inodes_paths_and_eventfd_ids():
    assert FdTarget.parse("pipe:[5710]").inode == 5710
    assert FdTarget.parse("eventfd:[3]").eventfd_id == 3
    assert FdTarget.parse("anon_inode:[eventfd]").eventfd_id is None
    assert FdTarget.parse("/dev/nvidiactl<char 195:255>").path == "/dev/nvidiactl"
    assert FdTarget.parse(None).kind is None
