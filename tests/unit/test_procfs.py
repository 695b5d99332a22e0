"""procfs readers against tests/data/procfs (real files captured by capture.py + odd cases)."""
import json
import os

import pytest

from tracer.linux import processes, procfs
from tracer.linux.procfs_fds import (SocketEntry, _parse_inet, classify_fd_target, parse_fdinfo,
                               socket_table)

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "procfs")
with open(os.path.join(DATA, "manifest.json")) as _f:
    M = json.load(_f)
PID, ODD, ZOMBIE = M["pid"], M["odd"], M["zombie"]


def test_stat_of_odd_comm_and_zombie():
    st = procfs.read_stat(ODD, root=DATA)
    assert st.comm == "a) b\n(c" and st.ppid == PID and st.state == "S"
    z = procfs.read_stat(ZOMBIE, root=DATA)
    assert (z.state, z.exit_code, z.ppid) == ("Z", 9, PID)  # killed by SIGKILL
    live = procfs.read_stat(PID, root=DATA)
    assert live.num_threads == 8 and live.exit_code == 0


def test_parse_stat_edge_cases():
    assert procfs.parse_stat(b"garbage") is None
    assert procfs.parse_stat(b"12 (x) R 1") is None  # truncated
    st = procfs.parse_stat(b"7 (a) b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 99"
                           + b" 0" * 29 + b" 256\n")  # field 52 = 256
    assert (st.comm, st.state, st.utime, st.stime, st.starttime) == ("a) b) c", "R", 3, 4, 99)
    assert st.exit_code == 256


def test_cmdline_keeps_empty_args():
    argv = procfs.read_cmdline(ODD, root=DATA)
    assert argv[-3:] == ["", "x y", ""] and argv[1] == "-c"
    assert procfs.parse_cmdline(b"sglang::scheduler_TP1\0\0\0\0\0\0") == ["sglang::scheduler_TP1"]
    assert procfs.parse_cmdline(b"") == []
    assert procfs.read_cmdline(ZOMBIE, root=DATA) == []


def test_process_info():
    info = procfs.read_process_info(PID, root=DATA)
    assert info.threads[M["tids"]["locked"]] == "locked" and len(info.threads) == 8
    assert info.environ_rank == "RANK=3 LOCAL_RANK=1"
    assert info.exit_code is None and info.state == "S"
    assert M["btime"] < info.start_time < M["btime"] + 86400
    assert info.listening == sorted([f"tcp 127.0.0.1:{M['tcp_port']}",
                                     f"udp 127.0.0.1:{M['udp_port']}",
                                     f"unix {M['unix_path']}"])
    z = procfs.read_process_info(ZOMBIE, root=DATA)
    assert (z.state, z.exit_code, z.fds, z.cmdline) == ("Z", 9, [], [])


def test_fds_kinds_modes_and_sockets():
    fds = {f.fd: f for f in procfs.read_fds(PID, root=DATA)}
    assert (fds[3].kind, fds[3].mode) == ("pipe", "r") and (fds[4].kind, fds[4].mode) == ("pipe", "w")
    assert fds[3].inode == fds[4].inode  # both ends of one pipe
    assert fds[7].kind == "tcp" and fds[7].target == f"TCP:[127.0.0.1:{M['tcp_port']}]"
    assert fds[8].kind == "unix" and fds[8].target.endswith(f",{M['unix_path']}]")
    assert fds[9].kind == "udp"
    assert any(f.kind == "epoll" for f in fds.values())
    assert fds[0].kind in ("null", "pipe", "file")


def test_h200_fds_without_fdinfo():
    fds = {f.fd: f for f in procfs.read_fds(2312, root=DATA)}
    assert [fds[n].kind for n in (0, 1, 10, 11, 16, 30, 31, 32)] == [
        "null", "file", "nvidia-uvm", "nvidia", "eventfd", "nvidiactl", "epoll", "file"]
    assert fds[15].kind == "socket" and fds[15].inode == 7961  # no socket table captured
    assert fds[0].mode == "" and fds[0].pos is None


@pytest.mark.parametrize("target,kind", [
    ("/dev/null", "null"), ("/dev/nvidia0", "nvidia"), ("/dev/nvidia12", "nvidia"),
    ("/dev/nvidiactl", "nvidiactl"), ("/dev/nvidia-uvm", "nvidia-uvm"),
    ("/dev/nvidia-uvm-tools", "nvidia-uvm"), ("/dev/pts/3", "tty"), ("/dev/tty", "tty"),
    ("/dev/shm/x", "file"), ("/dev/sda", "dev"), ("/var/log/x.log", "file"), ("/tmp/x (deleted)", "file"),
    ("pipe:[5]", "pipe"), ("socket:[5]", "socket"), ("anon_inode:[eventfd]", "eventfd"),
    ("anon_inode:[eventpoll]", "epoll"), ("anon_inode:[timerfd]", "timerfd"),
    ("anon_inode:[signalfd]", "signalfd"), ("anon_inode:[pidfd]", "pidfd"),
    ("pidfd:[1234]", "pidfd"), ("anon_inode:inotify", "inotify"),
    ("anon_inode:[io_uring]", "anon"), ("net:[4026531840]", "anon"), ("", None),
])
def test_classify_fd_target(target, kind):
    assert classify_fd_target(target) == kind


def test_fdinfo_modes():
    assert parse_fdinfo("pos:\t12\nflags:\t0100002\nmnt_id:\t24\nino:\t3\n") == {
        "pos": 12, "flags": 0o100002, "ino": 3}


def test_tcp6_and_established_lines():
    # real /proc/net/tcp6 lines of this VM: a [::1] listener and a connection to it
    text = (
        "  sl  local_address                         remote_address                        st\n"
        "   0: 00000000000000000000000001000000:B729 00000000000000000000000000000000:0000 0A "
        "00000000:00000001 00:00000000 00000000     0        0 10181 2 00000000963e32ee\n"
        "   1: 00000000000000000000000001000000:CDA6 00000000000000000000000001000000:B729 01 "
        "00000000:00000000 00:00000000 00000000     0        0 10182 2 000000004310d50c\n"
        "   2: 00000000000000000000000001000000:B729 00000000000000000000000001000000:CDA6 01 "
        "00000000:00000000 00:00000000 00000000     0        0 0 1 00000000b1fad2f6\n")
    table = {}
    _parse_inet(text, "tcp6", table)
    assert table[10181] == SocketEntry("tcp6", "[::1]:46889", "", "LISTEN", True)
    assert table[10182].remote == "[::1]:46889" and table[10182].state == "ESTABLISHED"
    assert table[10182].fd_target(10182) == "TCPv6:[[::1]:52646->[::1]:46889]"
    assert 0 not in table  # inode 0: not owned by any fd


def test_socket_table_is_per_process_namespace():
    table = socket_table(DATA, PID)
    assert table and all(isinstance(e, SocketEntry) for e in table.values())
    assert socket_table(DATA, ZOMBIE) == {}


def test_vanished_process_and_thread():
    assert procfs.read_stat(99001, root=DATA) is None
    assert procfs.read_process_info(99001, root=DATA) is None
    assert procfs.read_fds(99001, root=DATA) == [] and procfs.read_io(99001, root=DATA) is None
    assert procfs.read_threads(99002, root=DATA) == {99002: "half gone"}
    assert procfs.read_thread_sample(99002, 99003, root=DATA) is None
    assert procfs.read_process_info(424242, root=DATA) is None


def test_thread_sample_and_io():
    s = procfs.read_thread_sample(PID, M["tids"]["locked"], root=DATA)
    assert (s.comm, s.state, s.wchan) == ("locked", "S", "futex_do_wait")
    assert s.syscall.startswith("202 ") and s.run_count is not None and s.run_ns > 0
    io = procfs.read_io(PID, root=DATA)
    assert io.rchar > 0 and io.syscr > 0


def test_tree_and_find():
    assert procfs.descendants([PID], root=DATA) == sorted([ODD, ZOMBIE])
    assert procfs.children_map(DATA)[PID] == sorted([ODD, ZOMBIE]) or \
        sorted(procfs.children_map(DATA)[PID]) == sorted([ODD, ZOMBIE])
    assert processes.find_by_name("a) b", root=DATA) == [ODD]
    assert processes.find_by_name("*scenario.py*", root=DATA) == [PID]
    assert processes.find_by_name("tp_scenarios", root=DATA) == [2312]  # cmdline only
    assert processes.find_by_name("no-such-thing", root=DATA) == []
    assert procfs.tgid_of(M["tids"]["locked"], root=DATA) is None  # /proc/TID not captured
    assert procfs.pid_exists(PID, root=DATA) and not procfs.pid_exists(99001, root=DATA)


def test_live_self():
    me = os.getpid()
    info = procfs.read_process_info(me)
    assert info.pid == me and me in info.threads and info.cmdline
    assert procfs.tgid_of(me) == me and procfs.pid_exists(me)
    assert me in procfs.descendants([os.getppid()])


# fdinfo of two eventfds and of a pipe, as Linux 6.18 prints them (count in hex, id decimal)
_EFD_FDINFO = {
    3: "pos:\t0\nflags:\t02000002\nmnt_id:\t17\nino:\t1044\n"
       "eventfd-count:               1a\neventfd-id: 1\neventfd-semaphore: 0\n",
    4: "pos:\t0\nflags:\t02\nmnt_id:\t17\nino:\t1044\n"
       "eventfd-count:                0\neventfd-id: 12\neventfd-semaphore: 1\n",
    5: "pos:\t0\nflags:\t02000002\nmnt_id:\t17\nino:\t1044\n",   # a kernel without eventfd-id
    6: "pos:\t0\nflags:\t01\nmnt_id:\t15\nino:\t146979\n",
}
_EFD_LINKS = {3: "anon_inode:[eventfd]", 4: "anon_inode:[eventfd]", 5: "anon_inode:[eventfd]",
              6: "pipe:[146979]"}


def test_eventfd_fdinfo_fields():
    assert parse_fdinfo(_EFD_FDINFO[3]) == {"pos": 0, "flags": 0o2000002, "ino": 1044,
                                            "eventfd-count": 26, "eventfd-id": 1}


@pytest.mark.parametrize("n,kind,target,mode,inode", [
    (3, "eventfd", "eventfd:[1]", "rw", 1044),
    (4, "eventfd", "eventfd:[12]", "rw", 1044),
    (5, "eventfd", "anon_inode:[eventfd]", "rw", 1044),
    (6, "pipe", "pipe:[146979]", "w", 146979),
])
def test_read_fds_names_eventfds_by_id(tmp_path, n, kind, target, mode, inode):
    (tmp_path / "77" / "fd").mkdir(parents=True)
    (tmp_path / "77" / "fdinfo").mkdir()
    for k, link in _EFD_LINKS.items():
        os.symlink(link, tmp_path / "77" / "fd" / str(k))
        (tmp_path / "77" / "fdinfo" / str(k)).write_text(_EFD_FDINFO[k])
    fds = {f.fd: f for f in procfs.read_fds(77, root=str(tmp_path))}
    f = fds[n]
    assert (f.kind, f.target, f.mode, f.inode) == (kind, target, mode, inode)
    assert classify_fd_target(f.target) == kind


def test_read_fds_eventfd_ids_of_a_live_process():
    a, b = os.eventfd(0), os.eventfd(0)
    try:
        with open(f"/proc/self/fdinfo/{a}") as f:
            if "eventfd-id:" not in f.read():
                pytest.skip("this kernel's eventfd fdinfo has no eventfd-id line")
        fds = {f.fd: f for f in procfs.read_fds(os.getpid())}
        ta, tb = fds[a].target, fds[b].target
        assert ta.startswith("eventfd:[") and tb.startswith("eventfd:[") and ta != tb
        dup = os.dup(a)
        try:
            assert {f.fd: f for f in procfs.read_fds(os.getpid())}[dup].target == ta
        finally:
            os.close(dup)
    finally:
        os.close(a)
        os.close(b)


# --------------------------------------------------------------------------- --name (psutil)
def test_name_matching_rule():
    m = processes.name_matches
    assert m("scheduler", "python", ["sglang::scheduler_TP1"])          # title only in argv
    assert m("sglang::sched*", "python", ["sglang::scheduler_TP1"])     # a glob
    assert m("python3", "py", ["/usr/bin/python3", "x.py"])             # argv[0]'s base name
    assert not m("sched*", "python", ["sglang::scheduler_TP1"])         # a glob is whole
    assert m("kworker", "kworker/0:1", [])                              # comm alone
    assert not m("nothing", "bash", ["bash"])


def test_name_selection_leaves_out_init_kernel_threads_and_my_ancestors():
    found, left_out = processes.select_by_name("*")
    assert 1 not in found and os.getpid() not in found and os.getppid() not in found
    assert any(w.startswith("pid 1 (init") for w in left_out)
    assert any("kernel thread" in w for w in left_out)
    assert any(w.startswith("hangtrace's own ancestor") and str(os.getppid()) in w
               for w in left_out)
    assert all(not procfs.read_stat(p) or not procfs.read_stat(p).flags & 0x00200000
               for p in found)
    forced, _ = processes.select_by_name("*", force=True)
    assert 1 in forced and os.getppid() not in forced


def test_name_selection_of_a_process_and_the_error_words():
    import subprocess
    import psutil
    p = subprocess.Popen(["sleep", "31.4159"])
    try:
        assert processes.select_by_name("sleep 31.4159") == ([p.pid], [])
    finally:
        p.kill()
        p.wait()
    assert processes.access_of(psutil.NoSuchProcess(p.pid)) == procfs.GONE
    assert processes.access_of(psutil.ZombieProcess(p.pid)) == procfs.GONE
    assert processes.access_of(psutil.AccessDenied(p.pid)) == procfs.DENIED
    assert processes.access_of(OSError()) == procfs.UNREADABLE


def test_pid_access_words():
    assert processes.pid_access(os.getpid()) is None
    pid = 4_000_000
    while os.path.exists(f"/proc/{pid}"):
        pid -= 1
    assert processes.pid_access(pid) == procfs.GONE
    assert processes.pid_access(0) == procfs.GONE and processes.pid_access(-3) == procfs.GONE


def test_read_io_by_position_and_by_name_agree(tmp_path):
    """The kernel's io layout is read by position (the proc backend's every sample); another
    layout (a kernel without the storage counters, fields in another order) by name."""
    real = DATA + f"/{PID}/io"
    want = procfs.read_io(PID, root=DATA, ts=1.0)
    text = open(real).read()
    assert text.split()[0] == "rchar:" and want.rchar > 0
    odd = tmp_path / "7"
    odd.mkdir()
    lines = text.splitlines()
    (odd / "io").write_text("\n".join([lines[1], lines[0]] + lines[2:]) + "\n")
    assert procfs.read_io(7, root=str(tmp_path), ts=1.0) == want.__class__(
        1.0, 7, want.rchar, want.wchar, want.syscr, want.syscw, want.read_bytes,
        want.write_bytes)
    (odd / "io").write_text("rchar: 5\nwchar: 6\nsyscr: 7\nsyscw: 8\n")
    assert procfs.read_io(7, root=str(tmp_path), ts=1.0).wchar == 6
    (odd / "io").write_text("rchar: 5\nwchar: x\nsyscr: 7\nsyscw: 8\nread_bytes: 0\n"
                            "write_bytes: 0\n")
    assert procfs.read_io(7, root=str(tmp_path), ts=1.0) is None
