"""Fds followed without -y (strace/fdtable.py, convert.py): real logs taken without -y, and the
real H200 start-up log with its -yy decorations taken off."""
import gzip
import os
from collections import Counter

import pytest

from tracer import events as ev
from tracer.tracefile.format import TraceReader
from tracer.strace.args import decoration_end
from tracer.strace.convert import StraceConverter
from tracer.strace.fdtable import FD_CALLS, FdTables, fd_calls, poll_fds
from tracer.strace.importer import import_strace
from tracer.linux.syscall_table import AARCH64

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tests/
DATA = os.path.join(HERE, "data", "strace")
STARTUP = os.path.join(HERE, "..", "fixtures", "gpu-h200", "startup.strace.gz")


def convert_lines(lines, **kw):
    conv = StraceConverter(**kw)
    out = []
    for text in lines:
        out.extend(conv.feed_text(text))
    out.extend(conv.finish())
    return conv, out


def undecorate(line: str) -> str:
    """The line strace would have printed without -y/-yy: every "<...>" that follows an fd
    number (or AT_FDCWD) goes; -T's " <0.000012>" and "<unfinished ...>" stay."""
    out, i = [], 0
    while True:
        lt = line.find("<", i)
        if lt < 0:
            out.append(line[i:])
            return "".join(out)
        if lt > 0 and (line[lt - 1].isdigit() or line.endswith("AT_FDCWD", 0, lt)):
            end = decoration_end(line, lt)
            if end > 0:
                out.append(line[i:lt])
                i = end + 1
                continue
        out.append(line[i:lt + 1])
        i = lt + 1


def test_undecorate_is_what_strace_prints_without_y():
    assert undecorate("444   1.0 ioctl(8</dev/nvidiactl<char 195:255>>, _IOC(_IOC_READ, 0x46, "
                      "0x2a, 0x20), 0x7ffe) = 0 <0.000365>") == \
        "444   1.0 ioctl(8, _IOC(_IOC_READ, 0x46, 0x2a, 0x20), 0x7ffe) = 0 <0.000365>"
    assert undecorate('444   1.0 openat(AT_FDCWD</srv>, "/etc/x", O_RDONLY) = 3</etc/x> <0.1>') \
        == '444   1.0 openat(AT_FDCWD, "/etc/x", O_RDONLY) = 3 <0.1>'
    assert undecorate("461   1.0 poll([{fd=16<anon_inode:[eventfd]>, events=POLLIN}], 1, 100 "
                      "<unfinished ...>") == \
        "461   1.0 poll([{fd=16, events=POLLIN}], 1, 100 <unfinished ...>"


def test_h200_startup_without_y_names_the_same_nvidia_requests(tmp_path):
    """The real CUDA start-up log, as strace -f -ttt -T would print it without -yy: every
    NVIDIA ioctl is named as in the decorated log (345 on /dev/nvidiactl, 94 on
    /dev/nvidia-uvm, 33 on /dev/nvidia0: fixtures/gpu-h200/README.md), poll sets know their
    fd kinds, and the capability says the log had no fd paths."""
    plain = tmp_path / "startup-noy.strace"
    with gzip.open(STARTUP, "rt") as f:
        plain.write_text("".join(undecorate(t.rstrip("\n")) + "\n" for t in f))
    assert "</" not in plain.read_text()
    ioctls, polls = {}, {}
    for name, path in (("yy", STARTUP), ("noy", str(plain))):
        res = import_strace(path, str(tmp_path / f"{name}.htrace"))
        evs = list(TraceReader(str(tmp_path / f"{name}.htrace")).events())
        ioctls[name] = Counter((e.fd_kind, e.request_name) for e in evs
                               if isinstance(e, ev.IoctlCall) and not e.ongoing
                               and e.fd_kind in ("nvidiactl", "nvidia-uvm", "nvidia"))
        polls[name] = {(e.tid, e.ts): set(e.fd_kinds) for e in evs
                       if isinstance(e, ev.PollCall)}
        if name == "noy":
            assert res.capabilities["fd_paths"] is False
            kinds = Counter(e.fd_kind for e in evs if isinstance(e, ev.IoctlCall))
            assert (kinds["nvidiactl"], kinds["nvidia-uvm"], kinds["nvidia"]) == (345, 94, 33)
            # only the fds the process inherited (stdin/stdout/stderr) stay unknown
            assert {e.fd for e in evs if isinstance(e, ev.Syscall) and e.fd is not None
                    and e.fd_kind is None and e.name != "close"} <= {0, 1, 2}
    assert ioctls["noy"] == ioctls["yy"]
    # the poll sets of cuda-EvtHandlr (eventfd + /dev/nvidia0) and of the UVM thread
    # (eventfd, pipe, unix socket) have the kinds the decorations gave
    assert polls["noy"] == polls["yy"] and {"eventfd", "nvidia"} in polls["noy"].values()
    assert sum(n for (k, _), n in ioctls["noy"].items() if k == "nvidiactl") == 345
    assert ioctls["noy"][("nvidiactl", "RM_CONTROL")] > 0


def test_recorded_log_without_y_follows_every_kind_of_fd():
    """strace -f -tt of tests/data/strace/programs/thr.c, on stderr, without -y: pipe2, eventfd2,
    socket, dup, fcntl(F_DUPFD_CLOEXEC), dup2 onto 20, a thread opening /dev/null, a fork
    child closing an inherited socket, close."""
    with open(os.path.join(DATA, "stderr_f_tt_noy.log")) as f:
        conv, evs = convert_lines(f, unprefixed_tid=13436)
    writes = {(e.tid, e.fd): (e.fd_kind, e.fd_target) for e in evs
              if isinstance(e, ev.WriteCall)}
    assert writes[(13436, 20)] == ("eventfd", "anon_inode:[eventfd]")   # dup2(5, 20)
    assert writes[(13436, 7)] == ("pipe", "pipe:[log#1]")                # dup(4)
    assert writes[(13437, 8)] == ("null", "/dev/null")                   # the thread's open
    assert writes[(13438, 4)] == ("pipe", "pipe:[log#1]")                # the fork child's copy
    assert writes[(13436, 1)] == (None, None)                            # inherited: unknown
    closes = {(e.tid, e.fd): e.fd_kind for e in evs
              if isinstance(e, ev.Syscall) and e.name == "close" and e.tid != 13436}
    assert closes[(13438, 6)] == "tcp"                                   # socket(AF_INET, ...)
    assert conv.capabilities["fd_paths"] is False


def test_fd_table_rules():
    t = FdTables()
    t.apply(1, "openat", 'AT_FDCWD, "/dev/nvidiactl", O_RDWR|O_CLOEXEC', 3, None)
    t.apply(1, "openat", 'AT_FDCWD, "/usr/lib/x86_64-linux-gnu/libcud"..., O_RDONLY', 4, None)
    t.apply(1, "openat", 'AT_FDCWD, "data", O_RDONLY|O_DIRECTORY', 5, None)
    t.apply(1, "socketpair", "AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0, [6, 7]", 0, None)
    t.apply(1, "accept4", "9, NULL, NULL, SOCK_CLOEXEC", 10, None)          # listener unknown
    t.apply(1, "epoll_create1", "EPOLL_CLOEXEC", 11, None)
    t.apply(1, "open", '"/tmp/x", O_WRONLY|O_CREAT, 0644', -1, None)         # failed: nothing
    assert t.lookup(1, 3) == ("nvidiactl", "/dev/nvidiactl")
    assert t.lookup(1, 4) == ("file", "/usr/lib/x86_64-linux-gnu/libcud...")
    assert t.lookup(1, 5) == ("dir", "data")
    assert t.lookup(1, 6) == t.lookup(1, 7) == ("unix", "UNIX-STREAM:[log#1]")
    assert t.lookup(1, 10) == ("socket", "socket:[?]")
    assert t.lookup(1, 11) == ("epoll", "anon_inode:[eventpoll]")
    t.fork(1, 2, shared=False)
    t.apply(2, "close", "3", 0, None)
    assert t.lookup(2, 3) is None and t.lookup(1, 3) is not None        # copies, not shared
    t.fork(1, 3, shared=True)                                           # CLONE_FILES
    t.apply(3, "dup3", "11, 3, 0", 3, None)                             # dup3 onto an open fd
    assert t.lookup(1, 3) == ("epoll", "anon_inode:[eventpoll]")
    t.apply(1, "fcntl", "4, F_SETFD, FD_CLOEXEC", 0, None)
    t.apply(1, "close_range", "20, ~0U, 0", 0, None)
    t.exec(1)                             # drops close-on-exec fds: 4, 6, 7, 10, 11
    assert [fd for fd in range(12) if t.lookup(1, fd)] == [3, 5]
    t.apply(1, "dup2", "99, 5", 5, None)  # a copy of an fd not seen opened
    assert t.lookup(1, 5) is None
    assert poll_fds("poll", "[{fd=5, events=POLLIN}, {fd=-1, events=0}]") == (5, -1)
    assert poll_fds("pselect6", "8, [3 7], [], NULL, NULL, NULL") == (3, 7)


def test_fd_calls_per_architecture():
    """aarch64 has only the generic calls; x86_64 adds its legacy ones; unknown: both."""
    generic = fd_calls("aarch64")
    assert {"openat", "pipe2", "dup3", "eventfd2", "epoll_create1", "socket"} <= generic
    assert not {"open", "creat", "pipe", "dup2", "eventfd", "epoll_create"} & generic
    assert generic <= set(AARCH64.values()) and generic < fd_calls("x86_64") == FD_CALLS
    assert fd_calls(None) == FD_CALLS


@pytest.mark.parametrize("decorated", [False, True])
def test_a_decorated_log_uses_the_kernels_names(decorated):
    """With -y the decoration is the truth: tables stop at the first decorated fd."""
    fd = "3</dev/nvidia0<char 195:0>>" if decorated else "3"
    conv, evs = convert_lines([
        '10 1.0 openat(AT_FDCWD, "/dev/nvidiactl", O_RDWR) = 3 <0.1>',
        f"10 1.1 ioctl({fd}, _IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2a, 0x20), 0x7f) = 0 <0.1>"])
    [io] = [e for e in evs if isinstance(e, ev.IoctlCall)]
    assert io.fd_kind == ("nvidia" if decorated else "nvidiactl")
    assert io.request_name == "RM_CONTROL"
    assert conv.capabilities["fd_paths"] is decorated
