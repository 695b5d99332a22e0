"""A FUSE filesystem in pure Python on /dev/fuse, for tests of storage waits (issue 42 item 3).

Contract:
- ``serve(mode, mountpoint)`` (run as ``python fusefs.py MODE MOUNTPOINT``) opens /dev/fuse,
  mounts it with mount(2) through ctypes ("fd=N,rootmode=40000,user_id=0,group_id=0") and
  answers INIT, LOOKUP, GETATTR, OPEN, FLUSH, RELEASE, GETXATTR (ENODATA), ENOSYS to the rest,
  for one regular file, ``data`` (64 MiB, inode 2). What READ gets (``mode``): "hang" never an
  answer (reads ahead in the background, FUSE_ASYNC_READ: the reader waits on the page in state
  D); "slow" one of at most 4 KiB every ``SLOW_INTERVAL`` s (direct I/O: one READ a read());
  "stuck": nothing at all is answered once the file is open (a stat of it hangs too, as on a
  dead server). It prints "READY" once mounted and unmounts on SIGTERM.
- ``FuseTree(mode, reader)`` is the tree tests attach to: a launcher whose two children are the
  daemon and a reader (``READER``: read() in a loop; ``MMAP_READER``: maps the file and touches
  its pages); on exit it detaches the mount (umount2 MNT_DETACH) and kills them, whatever
  happened; ``mounted(mountpoint)`` says whether /proc/self/mountinfo still lists it.
Root only (mount(2)); the kernel must have FUSE (/dev/fuse).
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator, List, Optional

SLOW_INTERVAL = 0.1
FILE_SIZE = 64 << 20
FILE_INO = 2
FILE_NAME = b"data"
MNT_DETACH = 2
MS_NOSUID, MS_NODEV = 2, 4

# opcodes (include/uapi/linux/fuse.h)
LOOKUP, FORGET, GETATTR, OPEN, READ, RELEASE = 1, 2, 3, 14, 15, 18
GETXATTR, FLUSH, INIT = 22, 25, 26
INTERRUPT, BATCH_FORGET, DESTROY = 36, 42, 38
NO_REPLY = frozenset({FORGET, BATCH_FORGET})
# INIT flag: reads ahead in the background, so a reader waits on the page's lock (state D,
# folio_wait_bit_common) rather than in the request's interruptible wait (state S)
FUSE_ASYNC_READ = 1
FOPEN_DIRECT_IO = 1

IN_HEADER = struct.Struct("<IIQQIIIHH")       # len opcode unique nodeid uid gid pid extlen pad
OUT_HEADER = struct.Struct("<IiQ")            # len error unique
ATTR = struct.Struct("<QQQQQQIIIIIIIIII")      # fuse_attr: 88 bytes
READ_IN = struct.Struct("<QQIIQII")            # fh offset size read_flags lock_owner flags pad


def _attr(ino: int) -> bytes:
    if ino == 1:
        mode, size, nlink = 0o40755, 0, 2
    else:
        mode, size, nlink = 0o100444, FILE_SIZE, 1
    now = int(time.time())
    return ATTR.pack(ino, size, (size + 511) // 512, now, now, now, 0, 0, 0, mode, nlink, 0, 0,
                     0, 4096, 0)


def _entry(ino: int, valid: int) -> bytes:
    return struct.pack("<QQQQII", ino, 0, valid, valid, 0, 0) + _attr(ino)


def _init_out(major: int, minor: int, max_readahead: int) -> bytes:
    # major minor max_readahead flags max_background congestion max_write time_gran max_pages
    # map_alignment flags2 max_stack_depth unused[6]
    return struct.pack("<IIIIHHIIHHII24x", 7, min(minor, 31), max_readahead, FUSE_ASYNC_READ,
                       16, 12, 1 << 17, 1, 32, 0, 0, 0)


class FuseServer:
    """The daemon's protocol loop (module doc)."""

    def __init__(self, fd: int, mode: str) -> None:
        self.fd, self.mode = fd, mode
        self.last_read = 0.0
        self.opened = False
        self.valid = 0 if mode == "stuck" else 3600     # seconds the kernel may cache attributes

    def reply(self, unique: int, body: bytes = b"", error: int = 0) -> None:
        try:
            os.write(self.fd, OUT_HEADER.pack(OUT_HEADER.size + len(body), -error, unique) + body)
        except OSError as e:          # the request was interrupted (ENOENT) or the mount is gone
            if e.errno not in (errno.ENOENT, errno.ENODEV):
                raise

    def handle(self, req: bytes) -> None:
        _, op, unique, nodeid = IN_HEADER.unpack_from(req)[:4]
        arg = req[IN_HEADER.size:]
        if op in NO_REPLY or op == INTERRUPT or (self.mode == "stuck" and self.opened):
            return
        self.opened = self.opened or op == OPEN
        if op == INIT:
            major, minor, readahead = struct.unpack_from("<III", arg)
            self.reply(unique, _init_out(major, minor, readahead))
        elif op == LOOKUP:
            name = arg.split(b"\0", 1)[0]
            if nodeid == 1 and name == FILE_NAME:
                self.reply(unique, _entry(FILE_INO, self.valid))
            else:
                self.reply(unique, error=errno.ENOENT)
        elif op == GETATTR:
            self.reply(unique, struct.pack("<QII", self.valid, 0, 0) + _attr(nodeid))
        elif op == OPEN:      # slow: direct I/O, so that each read() is one READ
            self.reply(unique, struct.pack("<QII", 1, FOPEN_DIRECT_IO if self.mode == "slow"
                                           else 0, 0))
        elif op in (FLUSH, RELEASE):
            self.reply(unique)
        elif op == GETXATTR:
            self.reply(unique, error=errno.ENODATA)
        elif op == READ:
            self.read(unique, arg)
        else:
            self.reply(unique, error=errno.ENOSYS)

    def read(self, unique: int, arg: bytes) -> None:
        if self.mode == "hang":
            return                                  # owed for ever
        _, offset, size = READ_IN.unpack_from(arg)[:3]
        wait = self.last_read + SLOW_INTERVAL - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self.last_read = time.monotonic()
        self.reply(unique, bytes(max(0, min(size, 4096, FILE_SIZE - offset))))

    def loop(self) -> None:
        while True:
            try:
                req = os.read(self.fd, (1 << 17) + 4096)
            except OSError as e:
                if e.errno == errno.EINTR:
                    continue
                if e.errno == errno.ENODEV:        # unmounted
                    return
                raise
            self.handle(req)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def mount_fuse(mountpoint: str) -> int:
    """Open /dev/fuse and mount it on ``mountpoint``; the connection's fd."""
    fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    opts = f"fd={fd},rootmode=40000,user_id=0,group_id=0".encode()
    if _libc().mount(b"hangtrace-fusefs", mountpoint.encode(), b"fuse", MS_NOSUID | MS_NODEV,
                     opts) != 0:
        err = ctypes.get_errno()
        os.close(fd)
        raise OSError(err, f"mount fuse on {mountpoint}: {os.strerror(err)}")
    return fd


def umount(mountpoint: str) -> None:
    """Detach the mount (MNT_DETACH: also while a reader is stuck in it); quiet if not mounted."""
    _libc().umount2(mountpoint.encode(), MNT_DETACH)


def mounted(mountpoint: str) -> bool:
    """/proc/self/mountinfo lists ``mountpoint`` (field 5)."""
    want = os.path.realpath(mountpoint)
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        parts = line.split()
        if len(parts) > 4 and parts[4] == want:
            return True
    return False


def serve(mode: str, mountpoint: str) -> None:
    fd = mount_fuse(mountpoint)
    server = FuseServer(fd, mode)
    signal.signal(signal.SIGTERM, lambda *_: (umount(mountpoint), os._exit(0)))
    # INIT comes from the kernel at once; answer it before saying READY
    server.handle(os.read(fd, (1 << 17) + 4096))
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    server.loop()


# The reader: reads the file 4 KiB at a time until the end, then again; prints READING once
# the file is open (its first read is the one a hang mount never answers).
READER = r'''
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
print("READING", flush=True)
while True:
    while os.read(fd, 4096):
        pass
    os.lseek(fd, 0, 0)
'''

# The other reader: maps the file and touches a byte per page (a loader of mmap'd weights); a
# hang mount leaves it in D state inside a page fault, outside any system call.
MMAP_READER = r'''
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
print("READING", flush=True)
while True:
    for off in range(0, len(m), 4096):
        m[off]
'''

# The launcher: starts the daemon, waits for READY, starts the reader, reports both pids, waits.
LAUNCHER = r'''
import os, subprocess, sys
here, mode, mnt = sys.argv[1:4]
d = subprocess.Popen([sys.executable, os.path.join(here, "fusefs.py"), mode, mnt],
                     stdout=subprocess.PIPE, text=True)
assert d.stdout.readline().strip() == "READY"
r = subprocess.Popen([sys.executable, "-c", sys.argv[4], os.path.join(mnt, "data")],
                     stdout=subprocess.PIPE, text=True)
assert r.stdout.readline().strip() == "READING"
print(d.pid, r.pid, flush=True)
r.wait()
d.wait()
'''


def thread_state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


class FuseTree:
    """launcher -> (daemon, reader) over a fresh mount (module doc). Attributes once entered:
    ``launcher``, ``daemon``, ``reader`` (pids) and ``mountpoint``."""

    def __init__(self, mode: str, reader: str = READER) -> None:
        self.mode, self.reader_code = mode, reader
        self.mountpoint = ""
        self.launcher = self.daemon = self.reader = 0
        self._proc: Optional[subprocess.Popen] = None

    def __enter__(self) -> "FuseTree":
        self.mountpoint = tempfile.mkdtemp(prefix="hangtrace-fuse-")
        here = str(Path(__file__).resolve().parent)
        self._proc = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, here, self.mode, self.mountpoint, self.reader_code],
            stdout=subprocess.PIPE, text=True)
        try:
            line = _readline(self._proc, 30.0)
            self.daemon, self.reader = (int(x) for x in line.split())
            self.launcher = self._proc.pid
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def wait_state(self, state: str, timeout: float = 30.0) -> None:
        """Wait until the reader is in ``state`` ("D": stuck in the hang mount's READ)."""
        deadline = time.monotonic() + timeout
        while thread_state(self.reader) != state:
            if time.monotonic() > deadline:
                raise AssertionError(f"reader {self.reader} in state "
                                     f"{thread_state(self.reader)}, not {state}")
            time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        pids: List[int] = [p for p in (self.reader, self.daemon) if p]
        if self.mountpoint:
            umount(self.mountpoint)            # a stuck READ fails (ENOTCONN) once detached...
        for pid in pids:                        # ...and the reader dies of SIGKILL in any case
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(10)
            if self._proc.stdout:
                self._proc.stdout.close()
        if self.mountpoint:
            umount(self.mountpoint)
            with contextlib.suppress(OSError):
                os.rmdir(self.mountpoint)


def _readline(p: subprocess.Popen, timeout: float) -> str:
    got: List[str] = []
    t = threading.Thread(target=lambda: got.append(p.stdout.readline() if p.stdout else ""),
                         daemon=True)
    t.start()
    t.join(timeout)
    if not got or not got[0].strip():
        raise RuntimeError(f"the FUSE tree did not start (launcher exit {p.poll()})")
    return got[0].strip()


@contextlib.contextmanager
def fuse_tree(mode: str) -> Iterator[FuseTree]:
    with FuseTree(mode) as t:
        yield t


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
