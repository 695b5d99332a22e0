"""Storage and device waits (issue 42 items 3, 4; issue 44 item 5): the pure parts.

- linux/mounts.py: mountinfo and fdinfo parsing, FUSE connection numbers, file-system kinds,
  with lines read on this machine (kernel 6.18) and the kernel documentation's example;
- record/probes/storage_waits.blocked_fd_call: /proc/TID/syscall lines of real threads;
- the rule (waitgraph/fd_waits.storage): a thread blocked in a read of a file on a FUSE mount
  waits for the mount's daemon; on NFS or sysfs it is blocked (owed from outside), never idle;
  the daemon idle in read(/dev/fuse) while a request is owed is where the chain ends;
- strace's arguments when the tree serves a FUSE mount, and the D-state note.
"""
from __future__ import annotations

import pytest

from tracer import events as ev
from tracer.events.stacks import KernelStack
from tracer.linux.fdtarget import fd_kind
from tracer.linux.mounts import (Mount, fs_kind, fuse_connection, fuse_servers, fuse_users,
                                 mapped_files, mount_of_fd, mount_of_path, on_mounts,
                                 parse_fdinfo, parse_mountinfo)
from tracer.record.backends.strace_backend import STRACE_ARGS, strace_args
from tracer.record.probes.storage_waits import blocked_fd_call

from test_rules import T0, end_minus, fd, info, run

# --------------------------------------------------------------------------- mountinfo
MOUNTINFO = [
    # this machine
    ("22 27 0:21 / /proc rw,relatime - proc proc rw",
     Mount(22, "0:21", "/", "/proc", "proc", "proc"), "device"),
    ("23 27 0:22 / /sys rw,relatime - sysfs sysfs rw",
     Mount(23, "0:22", "/", "/sys", "sysfs", "sysfs"), "device"),
    ("24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw,size=12334792k,nr_inodes=3083698,"
     "mode=755", Mount(24, "0:6", "/", "/dev", "devtmpfs", "devtmpfs"), "device"),
    ("25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24683784k",
     Mount(25, "0:23", "/", "/dev/shm", "tmpfs", "tmpfs"), "local"),
    # tests/fusefs.py's mount, as this kernel lists it
    ("46 27 0:40 / /tmp/hangtrace-fuse-1wmy419d rw,nosuid,nodev,relatime - fuse "
     "hangtrace-fusefs rw,user_id=0,group_id=0",
     Mount(46, "0:40", "/", "/tmp/hangtrace-fuse-1wmy419d", "fuse", "hangtrace-fusefs"),
     "fuse"),
    # Documentation/filesystems/proc.rst's example: optional fields before the separator
    ("36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
     Mount(36, "98:0", "/mnt1", "/mnt/parent", "ext3", "/dev/root"), "local"),
    # an NFS mount and an sshfs mount, with a space in the mount point (octal escape)
    ("612 27 0:58 / /mnt/model\\040weights rw,relatime shared:301 - nfs4 192.0.2.10:/export "
     "rw,vers=4.2,rsize=1048576,hard,proto=tcp,addr=192.0.2.10",
     Mount(612, "0:58", "/", "/mnt/model weights", "nfs4", "192.0.2.10:/export"), "network"),
    ("88 27 0:49 / /mnt/s rw,nosuid,nodev - fuse.sshfs user@192.0.2.7:/data rw,user_id=0",
     Mount(88, "0:49", "/", "/mnt/s", "fuse.sshfs", "user@192.0.2.7:/data"), "fuse"),
]


@pytest.mark.parametrize("line,want,kind", MOUNTINFO)
def test_mountinfo_lines(line, want, kind):
    assert parse_mountinfo(line) == [want]
    assert want.kind == kind


def test_mountinfo_skips_malformed_lines():
    text = "\n".join(["", "garbage", "22 27 0:21 / /proc rw - proc",   # no source
                      "x 27 0:21 / /proc rw - proc proc rw", MOUNTINFO[0][0]])
    assert parse_mountinfo(text) == [MOUNTINFO[0][1]]


@pytest.mark.parametrize("fstype,kind", [
    ("fuse", "fuse"), ("fuse.sshfs", "fuse"), ("fuseblk", "fuse"), ("nfs", "network"),
    ("nfs4", "network"), ("cifs", "network"), ("lustre", "network"), ("ceph", "network"),
    ("9p", "network"), ("virtiofs", "network"), ("sysfs", "device"), ("debugfs", "device"),
    ("proc", "device"), ("devtmpfs", "device"), ("ext4", "local"), ("xfs", "local"),
    ("tmpfs", "local"), ("overlay", "local")])
def test_fs_kinds(fstype, kind):
    assert fs_kind(fstype) == kind


# --------------------------------------------------------------------------- fdinfo, FUSE
FUSE_FDINFO = "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t89\nfuse_connection:\t40\n"
FILE_FDINFO = "pos:\t0\nflags:\t0100000\nmnt_id:\t24\nino:\t3\n"


def test_fdinfo_of_dev_fuse_names_its_connection():
    got = parse_fdinfo(FUSE_FDINFO)
    assert got["fuse_connection"] == "40" and got["mnt_id"] == "24"
    assert "fuse_connection" not in parse_fdinfo(FILE_FDINFO)


def test_fdinfo_keeps_the_first_of_a_repeated_key():
    # an epoll fd's fdinfo repeats "tfd:" lines; the file's own fields come first
    text = "pos:\t0\nflags:\t02\nmnt_id:\t15\nino:\t1057\ntfd:        5 events:       19 data:  5\n"
    assert parse_fdinfo(text)["mnt_id"] == "15"


@pytest.mark.parametrize("dev,conn", [("0:40", 40), ("0:6", 6), ("8:1", (8 << 20) | 1),
                                      ("", None), ("0-40", None), ("a:b", None)])
def test_fuse_connection_is_the_kernel_dev_t(dev, conn):
    assert fuse_connection(dev) == conn


@pytest.mark.parametrize("path,on", [("/mnt/w", True), ("/mnt/w/data", True),
                                     ("/mnt/wx/data", False), ("/mnt", False),
                                     ("/tmp/hangtrace-fuse-1wmy419d/data", True)])
def test_a_path_on_a_fuse_mount(path, on):
    assert on_mounts(path, ["/mnt/w", "/tmp/hangtrace-fuse-1wmy419d"]) == on


def test_dev_fuse_is_its_own_fd_kind():
    assert fd_kind("/dev/fuse") == "fuse"
    assert fd_kind("/dev/fuse<char 10:229>") == "fuse"
    assert fd_kind("/dev/sda") == "dev" and fd_kind("/tmp/x") == "file"


def _fake_proc(root, pid, fds, mountinfo=""):
    """A /proc/PID with fd links (fd -> target) and fdinfo texts, and a mountinfo."""
    (root / str(pid) / "fd").mkdir(parents=True)
    (root / str(pid) / "fdinfo").mkdir()
    for n, (target, info_text) in fds.items():
        (root / str(pid) / "fd" / str(n)).symlink_to(target)
        (root / str(pid) / "fdinfo" / str(n)).write_text(info_text)
    (root / str(pid) / "mountinfo").write_text(mountinfo)


def test_the_daemon_of_a_connection_is_found_by_its_fdinfo(tmp_path):
    _fake_proc(tmp_path, 100, {3: ("/dev/fuse", FUSE_FDINFO)})                    # conn 40
    _fake_proc(tmp_path, 101, {4: ("/dev/fuse", FUSE_FDINFO.replace("40", "41"))})
    _fake_proc(tmp_path, 102, {3: ("/tmp/x", FILE_FDINFO)})
    assert fuse_servers(40, root=str(tmp_path)) == {100: [3]}
    assert fuse_servers(41, [100, 101, 102], root=str(tmp_path)) == {101: [4]}
    assert fuse_servers(42, root=str(tmp_path)) == {}
    # a kernel whose fdinfo has no fuse_connection: every holder, its fds marked -1
    _fake_proc(tmp_path, 103, {5: ("/dev/fuse", FILE_FDINFO)})
    assert fuse_servers(42, root=str(tmp_path)) == {103: [-1]}


def test_the_mount_of_an_fd_and_the_users_of_fuse(tmp_path):
    mi = "\n".join(line for line, _, _ in MOUNTINFO)
    _fake_proc(tmp_path, 200, {3: ("/tmp/hangtrace-fuse-1wmy419d/data",
                                   FILE_FDINFO.replace("mnt_id:\t24", "mnt_id:\t46"))}, mi)
    _fake_proc(tmp_path, 201, {3: ("/sys/class/x", FILE_FDINFO.replace("24", "23"))}, mi)
    m = mount_of_fd(200, 3, root=str(tmp_path))
    assert (m.fstype, m.source, m.dev) == ("fuse", "hangtrace-fusefs", "0:40")
    assert mount_of_fd(201, 3, root=str(tmp_path)).fstype == "sysfs"
    assert mount_of_fd(201, 9, root=str(tmp_path)) is None
    _fake_proc(tmp_path, 202, {3: ("/dev/fuse", FUSE_FDINFO)}, mi)
    assert fuse_users([200, 201, 202, 999], root=str(tmp_path)) == [200, 202]


def test_the_file_a_page_fault_waits_on_is_the_mapped_file_of_its_mount():
    # /proc/PID/maps of the mmap reader (tests/fusefs.py), shortened
    maps = "\n".join([
        "55d0c4a00000-55d0c4a01000 r--p 00000000 fe:01 1311 /usr/bin/python3.11",
        "7f5e30000000-7f5e34000000 r--s 00000000 00:28 2 /tmp/hangtrace-fuse-1wmy419d/data",
        "7f5e34000000-7f5e34021000 rw-p 00000000 00:00 0 ",
        "7f5e35000000-7f5e35001000 r--p 00000000 fe:01 1311 /usr/bin/python3.11",
        "7ffc1955f000-7ffc19580000 rw-p 00000000 00:00 0                          [stack]"])
    assert mapped_files(maps) == ["/usr/bin/python3.11", "/tmp/hangtrace-fuse-1wmy419d/data"]
    mounts = parse_mountinfo("\n".join(line for line, _, _ in MOUNTINFO) +
                             "\n1 0 254:1 / / rw - ext4 /dev/vda1 rw")
    assert mount_of_path("/tmp/hangtrace-fuse-1wmy419d/data", mounts).fstype == "fuse"
    assert mount_of_path("/usr/bin/python3.11", mounts).fstype == "ext4"
    assert mount_of_path("/dev/shm/x", mounts).mountpoint == "/dev/shm"


# --------------------------------------------------------------------------- /proc syscall
@pytest.mark.parametrize("line,want", [
    # the reader stuck in tests/fusefs.py's hang mount: read(3, buf, 4096)
    ("0 0x3 0x14d7be40 0x1000 0x0 0x0 0x0 0x7ffc19552f48 0x7f746143c2ad", ("read", 3)),
    # the daemon waiting for its next request: read(3</dev/fuse>, buf, 135168)
    ("0 0x3 0x2b73e920 0x21000 0x7f5715091708 0x0 0x0 0x7ffd24fe08e8 0x7f57152a12ad",
     ("read", 3)),
    # fsync(7)
    ("74 0x7 0x0 0x0 0x0 0x0 0x0 0x7ffd2a4c0c18 0x7f3e1a2f1b2d", ("fsync", 7)),
    # a futex wait has no fd; ppoll (271 here: bash's wait) neither
    ("202 0x7f1c2e5fe9d0 0x189 0x0 0x0 0x0 0xffffffff 0x7f1c2e5fe8f0 0x7f1c2f6a3f16", None),
    ("270 0xfb 0x7fffb8ce5200 0x0 0x0 0x7fffb8ce5110 0x7fffb8ce5120 0x7fffb8ce50e0 "
     "0x7fdf9471eaec", None),
    ("running", None), ("-1 0x7ffd24fe08e8 0x7f57152a12ad", None), ("", None),
])
def test_blocked_fd_call(line, want):
    assert blocked_fd_call(line) == want


# --------------------------------------------------------------------------- the rule
DATA = "/mnt/w/data"


def _read(pid, path=DATA, n=3, kind="file"):
    return ev.ReadCall(ts=T0 + 0.01, pid=pid, tid=pid, name="read", fd=n, fd_kind=kind,
                       fd_target=path, ongoing=True, dur=end_minus(T0 + 0.01))


def _mount(pid, path=DATA, fstype="fuse", source="myfs", conn=40, servers=(), state="D",
           mountpoint="/mnt/w", n=3):
    return ev.FileMount(ts=T0 + 5.0, pid=pid, tid=pid, fd=n, path=path, state=state,
                        call="read", mount_id=46, dev="0:40", mountpoint=mountpoint,
                        fstype=fstype, source=source, fuse_conn=conn, servers=list(servers),
                        server_states=["S in read(/dev/fuse)"] * len(servers))


def _fuse_tree(reader_facts=True):
    launcher = info(10, comm="launcher")
    daemon = info(11, ppid=10, comm="myfs", fds=[fd(3, "fuse", "/dev/fuse")])
    reader = info(12, ppid=10, comm="loader", fds=[fd(3, "file", DATA, "r")])
    evs = [ev.WaitChild(ts=T0 + 0.01, pid=10, tid=10, name="wait4", child=12, ongoing=True,
                        dur=end_minus(T0 + 0.01)),
           _read(11, "/dev/fuse", kind="fuse"), _read(12)]
    if reader_facts:
        evs += [_mount(12, servers=[11]),
                _mount(11, "/dev/fuse", "devtmpfs", "devtmpfs", 40, state="S",
                       mountpoint="/dev")]
    return evs, [launcher, daemon, reader]


def test_a_read_stuck_on_a_fuse_mount_waits_for_its_daemon():
    evs, infos = _fuse_tree()
    r = run(evs, infos)
    assert r.verdict == "blocked"
    w = r.process(12).waits_on
    assert [(x["kind"], x["pids"]) for x in w] == [("storage", [11])]
    assert "on the fuse mount /mnt/w (myfs)" in w[0]["what"]
    edges = [e for e in r.wait_graph["edges"] if e["src"] == "T12"]
    assert [(e["dst"], e["kind"]) for e in edges] == [("P11", "storage")]
    assert "its FUSE daemon myfs (pid 11) owes the reply" in edges[0]["text"]
    # the chain ends at the daemon, idle in read(/dev/fuse) while the READ is owed
    assert r.root_cause["pid"] == 11
    assert "waits in read(/dev/fuse) for its next request of FUSE connection 40" in \
        r.root_cause["summary"]
    assert "its FUSE daemon myfs (pid 11) owes the reply" in r.root_cause["summary"]


def test_without_the_probe_facts_the_same_waits_are_as_before():
    # imported logs and old traces carry no FileMount: a read of a file resolves outside
    evs, infos = _fuse_tree(reader_facts=False)
    r = run(evs, infos)
    assert r.verdict == "idle"
    assert {x["kind"] for x in r.process(12).waits_on} == {"outside"}


def test_a_fuse_daemon_waiting_for_requests_with_none_owed_is_idle():
    daemon = info(11, comm="myfs", fds=[fd(3, "fuse", "/dev/fuse")])
    evs = [_read(11, "/dev/fuse", kind="fuse"),
           _mount(11, "/dev/fuse", "devtmpfs", "devtmpfs", 40, state="S", mountpoint="/dev")]
    r = run(evs, [daemon])
    assert r.verdict == "idle"


@pytest.mark.parametrize("fstype,source,path,owner", [
    ("nfs4", "192.0.2.10:/export", "/mnt/w/data", "the server 192.0.2.10:/export"),
    ("sysfs", "sysfs", "/sys/class/drm/card0/device/gpu_busy_percent", "the driver behind it"),
    ("devtmpfs", "devtmpfs", "/dev/accel0", "the driver behind it"),
    ("fuse", "myfs", "/mnt/w/data", "its FUSE daemon (not found on this host)"),
])
def test_a_file_or_device_read_that_blocks_is_owed_never_idle(fstype, source, path, owner):
    kind = "dev" if path.startswith("/dev/") else "file"
    p = info(20, fds=[fd(3, kind, path, "r")])
    r = run([_read(20, path, kind=kind), _mount(20, path, fstype, source, state="S")], [p])
    assert r.verdict == "blocked" and r.exit_code != 0
    w = r.process(20).waits_on[0]
    assert w["kind"] == "outside" and owner + " has not answered" in w["what"]
    assert ("device wait" in w["what"]) == (fstype in ("sysfs", "devtmpfs"))
    assert owner + " has not answered" in r.root_cause["summary"]
    assert "waits for input" not in r.root_cause["summary"]


@pytest.mark.parametrize("path,kind,device", [
    ("/sys/class/drm/card0/device/gpu_busy_percent", "file", True),
    ("/sys/kernel/debug/dri/0/amdgpu_fence_info", "file", True),
    ("/dev/nvidia0", "nvidia", True), ("/dev/accel/accel0", "dev", True),
    ("/proc/driver/nvidia/gpus/0000:01:00.0/information", "file", True),
    ("/dev/input/event3", "dev", False), ("/dev/net/tun", "dev", False),
    ("/dev/pts/3", "tty", False), ("/dev/shm/ring", "file", False),
    ("/var/run/fifo", "file", False)])
def test_without_facts_a_blocking_read_of_a_device_path_is_a_device_wait(path, kind, device):
    # an imported strace log: no probe facts, the path alone says it is a driver's file
    p = info(23, fds=[fd(3, kind, path, "r")])
    r = run([_read(23, path, kind=kind)], [p])
    what = " ".join(w["what"] for w in r.process(23).waits_on)
    assert (r.verdict, what.startswith("device wait: blocked in read(3<" + path)) == \
        (("blocked", True) if device else ("idle", False))


def test_a_local_file_in_s_state_is_not_a_storage_wait():
    # a FIFO on ext4 shows as a path: only D state makes a local file a storage wait
    p = info(21, fds=[fd(3, "file", "/var/run/fifo", "r")])
    r = run([_read(21, "/var/run/fifo"), _mount(21, "/var/run/fifo", "ext4", "/dev/sda1",
                                               state="S", mountpoint="/")], [p])
    assert r.verdict == "idle"
    r2 = run([_read(21, "/var/run/fifo"), _mount(21, "/var/run/fifo", "ext4", "/dev/sda1",
                                                state="D", mountpoint="/")], [p])
    assert r2.verdict == "blocked"
    assert "the disk or its driver has not answered" in r2.process(21).waits_on[0]["what"]


def test_file_reads_that_return_data_are_progress():
    p = info(22, fds=[fd(3, "file", DATA, "r")])
    evs = [ev.ReadCall(ts=T0 + 0.1 * i, pid=22, tid=22, name="read", fd=3, fd_kind="file",
                       fd_target=DATA, ret=4096, dur=0.09) for i in range(1, 48)]
    r = run(evs, [p])
    assert r.verdict == "progressing"
    assert r.process(22).rule.endswith("reads-files")


# a page fault on a file mapped from a hung NFS mount, as this kernel's stack shows one
FAULT_STACK = ["folio_wait_bit_common+0x167/0x370", "filemap_fault+0x5e1/0xa60",
               "__do_fault+0x33/0x170", "do_fault+0x1b0/0x520", "__handle_mm_fault+0x6d2/0xc40",
               "handle_mm_fault+0x113/0x320", "do_user_addr_fault+0x1d4/0x6c0",
               "exc_page_fault+0x7c/0x1a0", "asm_exc_page_fault+0x26/0x30"]


def test_a_thread_in_d_state_all_window_without_an_fd_is_owed_never_idle():
    # proc samples: state D outside a syscall ("-1 sp pc"), never ran; its kernel stack faults
    samples = [ev.ThreadSample(ts=T0 + 0.5 * i, pid=30, tid=30, comm="loader", state="D",
                               utime=5, stime=1, wchan="folio_wait_bit_common",
                               syscall="-1 0x7ffc19552f48 0x7f746143c2ad", run_ns=1000,
                               wait_ns=10, run_count=7) for i in range(1, 10)]
    k = KernelStack(ts=T0 + 5.0, pid=30, tid=30, state="D", reason="D state", frames=FAULT_STACK)
    r = run(samples + [k], [info(30, comm="loader", state="D")], backends=("proc",))
    assert r.verdict == "blocked", r.root_cause
    what = r.process(30).waits_on[0]["what"]
    assert "in uninterruptible sleep (D) in a page fault on a mapped file" in what
    assert "storage or device wait" in what


# --------------------------------------------------------------------------- strace
def test_strace_uses_y_not_yy_when_the_tree_serves_fuse():
    assert strace_args([]) == STRACE_ARGS and "-yy" in STRACE_ARGS
    got = strace_args([11])
    assert "-yy" not in got and "-y" in got and len(got) == len(STRACE_ARGS)
