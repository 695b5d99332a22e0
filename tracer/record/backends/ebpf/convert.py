"""Turn the eBPF program's records (ebpf_layout.HtEvent and in-flight thread state) into the
same events/__init__.py objects the strace backend emits.

Contract:
- ``Clock`` maps the kernel's bpf_ktime_get_ns (CLOCK_MONOTONIC) to epoch seconds from one
  paired reading taken at attach.
- ``FdCache`` resolves (pid, fd) to (kind, target) from /proc and lists the fds registered
  with an epoll fd (its docstring says when it re-reads).
- ``Converter.syscall(...)`` builds the syscall events from a call's number, raw arguments,
  decoded value and result; ``ret=None`` makes an ongoing call. Pure apart from the /proc fd
  reads. Never any buffer content: sizes come from return values.
"""
from __future__ import annotations

import errno
import time
from typing import Collection, Dict, List, Optional, Sequence, Tuple

from .... import events as ev
from ....linux.procfs_fds import read_fds, read_text
from ....linux.blocking import FD_CALLS
from ....linux.futex import decode_op
from . import layout as L

# Kernel-internal codes a traced exit can show when a signal interrupted the call.
_ERRNO_EXTRA = {512: "ERESTARTSYS", 513: "ERESTARTNOINTR", 514: "ERESTARTNOHAND",
                515: "ENOIOCTLCMD", 516: "ERESTART_RESTARTBLOCK"}


def errno_name(code: int) -> str:
    return errno.errorcode.get(code) or _ERRNO_EXTRA.get(code) or f"E{code}"


def _s32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


class Clock:
    """Kernel monotonic ns -> epoch seconds (one paired reading; NTP slews are ignored)."""

    def __init__(self) -> None:
        m0 = time.monotonic_ns()
        self.epoch0 = time.time()
        m1 = time.monotonic_ns()
        self.mono0 = (m0 + m1) // 2

    def epoch(self, mono_ns: int) -> float:
        return self.epoch0 + (mono_ns - self.mono0) / 1e9

    def now_ns(self) -> int:
        return time.monotonic_ns()


class FdCache:
    """(pid, fd) -> (kind, target), from /proc (procfs_fds.read_fds), once per process table read,
    re-reading a process's table on a miss (at most every 50 ms); ``epoll_kinds`` lists the fds
    registered with an epoll fd (fdinfo "tfd:" lines). A table read while the process lives is
    kept once it is gone (its zombie's table is empty): it is read again when the kernel tells
    of an fd's first use (HT_EV_FD: ``first_use``, then ``read_pending``)."""

    REFRESH_S = 0.05

    def __init__(self, root: str = "/proc") -> None:
        self.root = root
        self._tables: Dict[int, Dict[int, ev.FdInfo]] = {}
        self._read_at: Dict[int, float] = {}
        self._epoll: Dict[Tuple[int, int], Tuple[str, ...]] = {}
        self._pending: Dict[int, float] = {}      # pid -> an fd's latest first use (first_use)

    def forget(self, pid: int) -> None:
        """After exec (CLOEXEC fds closed) or exit."""
        self._tables.pop(pid, None)
        self._read_at.pop(pid, None)
        for key in [k for k in self._epoll if k[0] == pid]:
            del self._epoll[key]

    def _refresh(self, pid: int) -> Dict[int, ev.FdInfo]:
        now = time.monotonic()
        table = self._tables.get(pid)
        if table is not None and now - self._read_at.get(pid, 0.0) < self.REFRESH_S:
            return table
        fresh = {f.fd: f for f in read_fds(pid, self.root)}
        if fresh or table is None:
            table = fresh
        self._tables[pid] = table
        self._read_at[pid] = now
        return table

    def known(self, pid: int, fds: List[ev.FdInfo]) -> None:
        """``pid``'s whole table, known not to change any more (a process that has not run
        since it was read: record/stillness.py): never read again."""
        self._tables[pid] = {f.fd: f for f in fds}
        self._read_at[pid] = float("inf")

    def read_since(self, pid: int, mono_s: float) -> bool:
        """Whether ``pid``'s table was read at or after ``mono_s`` (time.monotonic seconds)."""
        return self._read_at.get(pid, -1.0) >= mono_s

    def first_use(self, pid: int, mono_s: float) -> None:
        """The kernel saw ``pid`` read or write an fd first at ``mono_s`` (CLOCK_MONOTONIC, as
        time.monotonic): its table is to be read again unless it was since (``read_pending``)."""
        if not self.read_since(pid, mono_s):
            self._pending[pid] = max(mono_s, self._pending.get(pid, 0.0))

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def read_pending(self, gone: Collection[int], final: bool = False) -> None:
        """Read the table of each process told of by ``first_use`` while it lives (one that
        exits before the next periodic read keeps its fds named); at most every ``REFRESH_S``
        per process unless ``final``; nothing for those in ``gone``."""
        for pid, at in list(self._pending.items()):
            if pid in gone or self.read_since(pid, at):
                del self._pending[pid]
            elif final or time.monotonic() - self._read_at.get(pid, -1e9) >= self.REFRESH_S:
                del self._pending[pid]
                self.refresh(pid, 0.0)

    def refresh(self, pid: int, max_age: float) -> None:
        """Re-read ``pid``'s table when the copy is older than ``max_age`` seconds (a gone
        process keeps its last table)."""
        if time.monotonic() - self._read_at.get(pid, 0.0) >= max_age:
            self._read_at.pop(pid, None)
            self._refresh(pid)

    def get(self, pid: int, fd: int) -> Optional[ev.FdInfo]:
        if fd < 0:
            return None
        table = self._tables.get(pid)
        info = table.get(fd) if table is not None else None
        if info is None:
            info = self._refresh(pid).get(fd)
        return info

    def epoll_kinds(self, pid: int, epfd: int) -> Tuple[str, ...]:
        """Kinds of the fds registered with ``epfd`` (fdinfo "tfd: N ..." lines), cached."""
        key = (pid, epfd)
        if key not in self._epoll:
            text = read_text(f"{self.root}/{pid}/fdinfo/{epfd}") or ""
            kinds: List[str] = []
            for line in text.splitlines():
                if line.startswith("tfd:"):
                    try:
                        info = self.get(pid, int(line.split()[1]))
                    except (IndexError, ValueError):
                        continue
                    if info is not None and info.kind and info.kind not in kinds:
                        kinds.append(info.kind)
            self._epoll[key] = tuple(kinds)
        return self._epoll[key]


def _timeout(flags: int, aux: int) -> Optional[float]:
    """events/__init__.py convention: seconds when relative and known, -1.0 absolute/unknown, None none."""
    if flags & L.HT_F_NO_TIMEOUT:
        return None
    if flags & L.HT_F_TIMEOUT_ABS or (flags & L.HT_F_TIMEOUT and flags & L.HT_F_UNREADABLE):
        return -1.0
    if flags & L.HT_F_TIMEOUT:
        return aux / 1e9
    return None


def rm_name(request: int, flags: int, aux: int) -> Optional[str]:
    """"RM_CONTROL cmd=0x20800403" / "RM_ALLOC hClass=0xc86f" for NVIDIA escapes."""
    if not flags & L.HT_F_AUX or (request >> 8) & 0xFF != L.HT_NV_IOC_TYPE:
        return None
    nr = request & 0xFF
    if nr == L.HT_NV_RM_CONTROL:
        return f"RM_CONTROL cmd={aux:#010x}"
    if nr == L.HT_NV_RM_ALLOC:
        return f"RM_ALLOC hClass={aux:#x}"
    return None


_FCNTL_LOCKS = {5: "F_GETLK", 6: "F_SETLK", 7: "F_SETLKW", 36: "F_OFD_GETLK", 37: "F_OFD_SETLK",
                38: "F_OFD_SETLKW"}
_FLOCK_OPS = {1: "LOCK_SH", 2: "LOCK_EX", 8: "LOCK_UN"}


def _fd_args(name: str, fd: int, a: Sequence[int]) -> str:
    """strace's text of the arguments that matter for a call on an fd: flock's operation,
    fcntl's lock command (the wait-for rules read F_SETLKW in it)."""
    if name == "flock":
        op = _FLOCK_OPS.get(a[1] & ~4, f"{a[1] & ~4:#x}")
        return f"{fd}, {op}{'|LOCK_NB' if a[1] & 4 else ''}"
    if name in ("fcntl", "fcntl64"):
        return f"{fd}, {_FCNTL_LOCKS.get(a[1], str(a[1]))}"
    return str(fd)


class Converter:
    """Builds events/__init__.py syscall objects (module doc)."""

    def __init__(self, fds: FdCache) -> None:
        self.fds = fds

    def syscall(self, *, ts: float, pid: int, tid: int, name: str, kind: int,
                args: Sequence[int], ret: Optional[int], dur: Optional[float], flags: int = 0,
                aux: int = 0, pfds: Sequence[int] = ()) -> ev.Syscall:
        """FutexCall/PollCall/WriteCall/ReadCall/IoctlCall/WaitChild/Syscall from a call's number,
        raw arguments, kind-specific decoded value (``aux``/``flags``) and result. ``ret=None``
        makes an ongoing call (writes and reads only ever come as ongoing calls: the kernel counts
        them per fd)."""
        ongoing = ret is None
        err: Optional[str] = None
        if ret is not None and -4096 < ret < 0:
            err, ret = errno_name(-ret), -1
        a = list(args) + [0] * (6 - len(args))
        if kind == L.HT_K_FUTEX:
            op = decode_op(a[1])
            timeout = _timeout(flags, aux) if op.is_wait else None
            return ev.FutexCall(ts, pid, tid, name, f"{a[0]:#x}, {op.name}, {_s32(a[2])}", ret,
                                err, dur, None, None, None, ongoing, op.name, a[0], _s32(a[2]),
                                timeout, op.private)
        fd = _s32(a[0])
        if kind in (L.HT_K_POLL, L.HT_K_PPOLL, L.HT_K_SELECT, L.HT_K_PSELECT):
            kinds: List[str] = []
            if flags & L.HT_F_PFDS:
                for pfd in pfds:
                    info = self.fds.get(pid, pfd) if pfd >= 0 else None
                    if info is not None and info.kind and info.kind not in kinds:
                        kinds.append(info.kind)
            nfds = int(a[1]) if kind in (L.HT_K_POLL, L.HT_K_PPOLL) else _s32(a[0])
            return ev.PollCall(ts, pid, tid, name, f"nfds={nfds}", ret, err, dur, None, None,
                               None, ongoing, _timeout(flags, aux), nfds, tuple(kinds), ret == 0)
        info = self.fds.get(pid, fd) if kind not in (L.HT_K_WAIT, L.HT_K_YIELD,
                                                      L.HT_K_NANOSLEEP,
                                                      L.HT_K_CLOCK_NANOSLEEP) else None
        fkind, target = (info.kind, info.target) if info is not None else (None, None)
        if kind in (L.HT_K_EPOLL, L.HT_K_EPOLL2):
            return ev.PollCall(ts, pid, tid, name, f"{fd}, {_s32(a[2])}", ret, err, dur, fd,
                               fkind, target, ongoing, _timeout(flags, aux), _s32(a[2]),
                               self.fds.epoll_kinds(pid, fd), ret == 0)
        if kind == L.HT_K_WRITE:
            n = ret if ret is not None and ret > 0 else 0
            return ev.WriteCall(ts, pid, tid, name, f"{fd}, {a[2]}", ret, err, dur, fd, fkind,
                                target, ongoing, n)
        if kind in (L.HT_K_READ, L.HT_K_ACCEPT):
            n = ret if kind == L.HT_K_READ and ret is not None and ret > 0 else 0
            return ev.ReadCall(ts, pid, tid, name, f"{fd}, {a[2]}", ret, err, dur, fd, fkind,
                               target, ongoing, n)
        if kind == L.HT_K_IOCTL:
            req = a[1] & 0xFFFFFFFF
            return ev.IoctlCall(ts, pid, tid, name, f"{fd}, {req:#x}", ret, err, dur, fd, fkind,
                                target, ongoing, req, rm_name(req, flags, aux))
        if kind == L.HT_K_WAIT:
            if name == "waitid":
                child = _s32(a[1]) if a[0] == 1 else -1        # P_PID, else any/group/pidfd
            else:
                child = _s32(a[0])
            return ev.WaitChild(ts, pid, tid, name, f"{child}", ret, err, dur, None, None, None,
                                ongoing, child)
        text = ""
        if kind in (L.HT_K_NANOSLEEP, L.HT_K_CLOCK_NANOSLEEP):
            t = _timeout(flags, aux)
            text = "" if t is None else ("abs" if t < 0 else f"{t:g} s")
        elif name in FD_CALLS:          # flock, fcntl, fsync...: the fd they wait on
            return ev.Syscall(ts, pid, tid, name, _fd_args(name, fd, a), ret, err, dur, fd,
                              fkind, target, ongoing)
        return ev.Syscall(ts, pid, tid, name, text, ret, err, dur, None, None, None, ongoing)
