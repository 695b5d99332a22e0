"""decode.py: fd classification and typed events from real strace argument text."""
import pytest

from tracer import events as ev
from tracer.strace.decode import parse_fd, split_args, to_event, ioctl_request, futex_op


@pytest.mark.parametrize("text, fd, kind, target", [
    ("3</dev/nvidiactl<char 195:255>>", 3, "nvidiactl", "/dev/nvidiactl"),
    ("18</dev/nvidia0<char 195:0>>", 18, "nvidia", "/dev/nvidia0"),
    ("5</dev/nvidia-uvm<char 510:0>>", 5, "nvidia-uvm", "/dev/nvidia-uvm"),
    ("16<anon_inode:[eventfd]>", 16, "eventfd", "anon_inode:[eventfd]"),
    ("6<anon_inode:[eventpoll]>", 6, "epoll", "anon_inode:[eventpoll]"),
    ("7<anon_inode:[timerfd]>", 7, "timerfd", "anon_inode:[timerfd]"),
    ("8<anon_inode:[signalfd]>", 8, "signalfd", "anon_inode:[signalfd]"),
    ("9<anon_inode:[pidfd]>", 9, "pidfd", "anon_inode:[pidfd]"),
    ("10<anon_inode:bpf-map>", 10, "anon", "anon_inode:bpf-map"),
    ("34<pipe:[7964]>", 34, "pipe", "pipe:[7964]"),
    ("5<TCP:[127.0.0.1:8000->127.0.0.1:5000]>", 5, "tcp", "TCP:[127.0.0.1:8000->127.0.0.1:5000]"),
    ("9<TCPv6:[[::1]:8000]>", 9, "tcp", "TCPv6:[[::1]:8000]"),
    ("4<UDP:[0.0.0.0:53]>", 4, "udp", "UDP:[0.0.0.0:53]"),
    ("7<UNIX-STREAM:[123->124]>", 7, "unix", "UNIX-STREAM:[123->124]"),
    ("3<NETLINK:[ROUTE:123]>", 3, "netlink", "NETLINK:[ROUTE:123]"),
    ("4<socket:[123]>", 4, "socket", "socket:[123]"),
    ("0</dev/pts/0<char 136:0>>", 0, "tty", "/dev/pts/0"),
    ("2</dev/null<char 1:3>>", 2, "null", "/dev/null"),
    ("1</srv/out/progress.log>", 1, "file", "/srv/out/progress.log"),
    ("3</dev/shm/x>", 3, "file", "/dev/shm/x"),   # tmpfs: a regular file (as /proc says)
    ("AT_FDCWD</tmp/rec>", None, "file", "/tmp/rec"),
    ("3", 3, None, None),
    ("NULL", None, None, None),
])
def test_parse_fd(text, fd, kind, target):
    assert parse_fd(text) == (fd, kind, target)


def test_split_args_respects_structs_and_decorations():
    args = ('5<TCP:[1.2.3.4:5->6.7.8.9:10]>, [{events=EPOLLIN, data={u32=3, u64=3}}], 1024, '
            '{tv_sec=1, tv_nsec=0}, "a, b", NULL')
    assert split_args(args) == ["5<TCP:[1.2.3.4:5->6.7.8.9:10]>",
                                "[{events=EPOLLIN, data={u32=3, u64=3}}]", "1024",
                                "{tv_sec=1, tv_nsec=0}", '"a, b"', "NULL"]


def test_futex_wait_bitset_absolute_infinite():
    e = to_event(10, 11, "futex", "0x7f19275f75e0, FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME, "
                 "0, NULL, FUTEX_BITSET_MATCH_ANY", None, None, 5.9, 100.0, True)
    assert isinstance(e, ev.FutexCall)
    assert (e.op, e.addr, e.val, e.timeout, e.private, e.ongoing) == (
        "WAIT_BITSET", 0x7f19275f75e0, 0, None, True, True)


def test_futex_timeouts():
    rel = to_event(1, 1, "futex", "0xa5b8f8, FUTEX_WAIT_PRIVATE, 2, {tv_sec=1, tv_nsec=500000000}",
                   -1, "ETIMEDOUT", 1.5, 1.0)
    assert rel.op == "WAIT" and rel.timeout == pytest.approx(1.5) and rel.err == "ETIMEDOUT"
    absolute = to_event(1, 1, "futex", "0xa5b8f0, FUTEX_WAIT_BITSET_PRIVATE, 0, {tv_sec=370, "
                        "tv_nsec=9938354}, FUTEX_BITSET_MATCH_ANY", 0, None, 0.1, 1.0)
    assert absolute.timeout == -1.0
    wake = to_event(1, 1, "futex", "0xa5b8f8, FUTEX_WAKE_PRIVATE, 1", 1, None, 0.0, 1.0)
    assert (wake.op, wake.val, wake.timeout) == ("WAKE", 1, None)
    shared = to_event(1, 1, "futex", "0x7f00, FUTEX_LOCK_PI, 0, {tv_sec=5, tv_nsec=0}", 0, None,
                      0.0, 1.0)
    assert (shared.op, shared.private, shared.timeout) == ("LOCK_PI", False, -1.0)
    assert futex_op("0x89") == ("WAIT_BITSET", True)       # -X raw
    assert futex_op("0x80 /* FUTEX_WAIT_PRIVATE */") == ("WAIT", True)


H200_POLL = ("[{fd=16<anon_inode:[eventfd]>, events=POLLIN}, {fd=18</dev/nvidia0<char 195:0>>, "
             "events=POLLIN}, {fd=20</dev/nvidia0<char 195:0>>, events=POLLIN}, "
             "{fd=34<pipe:[7964]>, events=POLLIN}], 4, 100")


def test_poll_h200():
    e = to_event(2312, 2334, "poll", H200_POLL, 0, None, 0.100243, 1.0)
    assert isinstance(e, ev.PollCall)
    assert (e.timeout, e.nfds, e.fd_kinds, e.timed_out) == (0.1, 4, ("eventfd", "nvidia", "pipe"),
                                                            True)
    inf = to_event(1, 1, "poll", "[{fd=3, events=POLLIN}], 1, -1", 1, None, 0.5, 1.0)
    assert (inf.timeout, inf.nfds, inf.fd_kinds, inf.timed_out) == (None, 1, (), False)


def test_epoll_ppoll_pselect():
    ew = to_event(1, 1, "epoll_wait", "6<anon_inode:[eventpoll]>, [], 1023, 20", 0, None, 0.02, 1.0)
    assert (ew.fd, ew.fd_kind, ew.timeout, ew.timed_out) == (6, "epoll", 0.02, True)
    ep = to_event(1, 1, "epoll_pwait", "6<anon_inode:[eventpoll]>, [{events=EPOLLIN, data={u32=3, "
                  "u64=3}}], 1024, -1, NULL, 8", 1, None, 0.1, 1.0)
    assert ep.timeout is None and not ep.timed_out
    pp = to_event(1, 1, "ppoll", "[{fd=5<UNIX-STREAM:[1->2]>, events=POLLIN}], 1, {tv_sec=2, "
                  "tv_nsec=0}, NULL, 8", 0, None, 2.0, 1.0)
    assert (pp.timeout, pp.nfds, pp.fd_kinds) == (2.0, 1, ("unix",))
    ps = to_event(1, 1, "pselect6", "4, [3<pipe:[5710]>], NULL, NULL, {tv_sec=0, "
                  "tv_nsec=10000000}, NULL", 0, None, 0.01, 1.0)
    assert (ps.timeout, ps.nfds, ps.fd_kinds, ps.timed_out) == (0.01, 1, ("pipe",), True)
    sel = to_event(1, 1, "select", "8, [3 4], NULL, NULL, NULL", 1, None, 0.01, 1.0)
    assert (sel.timeout, sel.nfds) == (None, 2)


def test_ioctl_requests():
    e = to_event(466, 466, "ioctl", "8</dev/nvidiactl<char 195:255>>, _IOC(_IOC_READ|_IOC_WRITE, "
                 "0x46, 0x2a, 0x20), 0x7ffed3135b90", 0, None, 0.000365, 1.0)
    assert isinstance(e, ev.IoctlCall)
    assert e.request == (3 << 30) | (0x20 << 16) | (0x46 << 8) | 0x2a == 0xC020462A
    assert (e.fd, e.fd_kind, e.request_name) == (8, "nvidiactl", "RM_CONTROL")
    t = to_event(1, 1, "ioctl", "1</dev/null<char 1:3>>, TCGETS, 0x7ffe35adc8a0", -1, "ENOTTY",
                 0.0, 1.0)
    assert (t.request, t.request_name, t.fd_kind) == (0x5401, "TCGETS", "null")
    assert ioctl_request("_IOC(_IOC_NONE, 0x46, 0x1, 0)") == (0x4601, None)
    assert ioctl_request("0x5401 /* TCGETS */") == (0x5401, "TCGETS")
    assert ioctl_request("0xc0104601") == (0xC0104601, None)


def test_read_write_scrubbed():
    w = to_event(720, 720, "write", '1</srv/out/progress.log>, "step 3900", 9', 9, None, 4e-05, 1.0)
    assert isinstance(w, ev.WriteCall)
    assert (w.nbytes, w.fd, w.fd_kind, w.fd_target) == (9, 1, "file", "/srv/out/progress.log")
    assert "step" not in w.args and w.args == '1</srv/out/progress.log>, "...", 9'
    s = to_event(1, 1, "sendto", '11<TCP:[127.0.0.1:47550->127.0.0.1:52539]>, "ping", 4, 0, NULL, 0',
                 4, None, 0.0, 1.0)
    assert isinstance(s, ev.WriteCall) and s.nbytes == 4 and s.fd_kind == "tcp"
    r = to_event(1, 1, "recvfrom", '8<UNIX-STREAM:[5712->5711]>, "xxxxxxxxxx", 10, 0, NULL, NULL',
                 10, None, 0.0, 1.0)
    assert isinstance(r, ev.ReadCall) and r.nbytes == 10 and "xxx" not in r.args
    a = to_event(1, 1, "accept4", "9<TCP:[127.0.0.1:52539]>, {sa_family=AF_INET}, [16], SOCK_CLOEXEC",
                 12, None, 0.0, 1.0)
    assert isinstance(a, ev.ReadCall) and a.nbytes == 0 and a.fd == 9
    failed = to_event(1, 1, "read", "3, 0x7ffd, 10", -1, "EAGAIN", 0.0, 1.0)
    assert failed.nbytes == 0 and failed.fd == 3 and failed.fd_kind is None


def test_wait_and_plain():
    w = to_event(1, 1, "wait4", "3819, [{WIFEXITED(s) && WEXITSTATUS(s) == 0}], 0, NULL", 3819,
                 None, 0.008, 1.0)
    assert isinstance(w, ev.WaitChild) and w.child == 3819
    assert to_event(1, 1, "wait4", "-1, 0x7ffd, WNOHANG, NULL", 0, None, 0.0, 1.0).child == -1
    assert to_event(1, 1, "waitid", "P_PID, 77, {}, WEXITED, NULL", 0, None, 0.0, 1.0).child == 77
    o = to_event(1, 1, "openat", 'AT_FDCWD</srv>, "/etc/passwd", O_RDONLY', 3, None, 0.0, 1.0)
    assert type(o) is ev.Syscall and o.fd is None and o.args == 'AT_FDCWD</srv>, "...", O_RDONLY'
    c = to_event(1, 1, "close", "3</etc/ld.so.cache>", 0, None, 0.0, 1.0)
    assert (c.fd, c.fd_kind) == (3, "file")
    g = to_event(1, 1, "getdents64", "3</usr/lib>, 0x55, 32768", 0, None, 0.0, 1.0)
    assert g.fd_kind == "dir"
    b = to_event(1, 1, "brk", "0", 0, None, 0.0, 1.0)
    assert b.fd is None


# strace 6.1 puts "(deleted)" after the decoration of an unlinked file (seen here with
# tempfile.TemporaryFile and O_TMPFILE): the suffix belongs to the fd, not to the next argument.
@pytest.mark.parametrize("args,first,fd_target", [
    ('3</tmp/#2148116>(deleted), ""..., 5', "3</tmp/#2148116>(deleted)",
     "/tmp/#2148116 (deleted)"),
    ('4</tmp/tmpab12 (x)>(deleted), ""..., 19', "4</tmp/tmpab12 (x)>(deleted)",
     "/tmp/tmpab12 (x) (deleted)"),
])
def test_deleted_file_decoration(args, first, fd_target):
    from tracer.strace.decode import first_arg, split_args, to_event
    assert first_arg(args) == first
    assert split_args(args)[0] == first and len(split_args(args)) == 3
    e = to_event(1, 1, "write", args, 5, None, 0.1, 1.0)
    assert (e.fd_kind, e.fd_target, e.nbytes) == ("file", fd_target, 5)
