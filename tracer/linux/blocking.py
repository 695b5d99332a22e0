"""What a thread blocked in a system call waits for: the one decoder of a call's raw arguments.

Contract (pure, reads nothing):
- ``decode_blocking(cs, fds)`` turns a decoded /proc/PID/task/TID/syscall line
  (``syscall_table.CurrentSyscall``: the six raw registers) into a ``BlockedCall``: the call
  rendered like strace, what it waits on, whether it has a time limit, and the typed parts the
  analysis needs (the fd, the futex address and op, the child waited for). Snapshots print it;
  the analyzer builds its waits from it.
- ``fds`` is the process's fd table (a list of FdInfo or a dict fd -> FdInfo) so that fd
  arguments read like strace -y output; calls not known here render as name(a0, a1, a2).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Tuple, Union

from ..events import FdInfo
from .futex import FutexOp, decode_op
from .syscall_table import CurrentSyscall

__all__ = ["BlockedCall", "decode_blocking", "FD_CALLS", "s32", "NEVER_BLOCK", "QUERY_IOCTLS",
           "cannot_block"]

FdTable = Union[Mapping[int, FdInfo], Iterable[FdInfo], None]


@dataclass(frozen=True)
class BlockedCall:
    """One call a thread sits in (module doc).

    ``has_timeout`` is False for a wait without time limit, True for a bounded one and None when
    the call cannot tell (a socket read may carry SO_RCVTIMEO); ``timeout`` is seconds when the
    value is in a register. ``child`` is wait4/waitid's target: a pid, -1 for any child.
    """
    name: str
    call: str
    waits_on: str
    has_timeout: Optional[bool] = None
    timeout: Optional[float] = None
    fd: Optional[int] = None
    fd_info: Optional[FdInfo] = None
    futex_addr: Optional[int] = None
    futex_op: Optional[FutexOp] = None
    child: Optional[int] = None

    @property
    def limit(self) -> Optional[float]:
        """The analysis's convention: None = no time limit (or none the call shows), -1.0 = a
        limit of unknown length, else seconds."""
        if self.has_timeout is not True:
            return None
        return self.timeout if self.timeout is not None else -1.0

    def timeout_text(self) -> str:
        if self.has_timeout is False:
            return "no timeout"
        if self.timeout is not None:
            return f"timeout {self.timeout * 1000:g} ms"
        return "with timeout" if self.has_timeout else ""

    def __str__(self) -> str:
        t = self.timeout_text()
        return f"{self.call} {t}" if t else self.call


def s32(v: int) -> int:
    """An ``int`` argument as the kernel sees it: the low 32 bits, signed (0xffffffff = -1)."""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def _ms_timeout(ms: int) -> Tuple[Optional[bool], Optional[float]]:
    """poll/epoll_wait style int timeout in ms: negative = infinite."""
    return (False, None) if ms < 0 else (True, ms / 1000.0)


def _ptr_timeout(ptr: int) -> Tuple[Optional[bool], Optional[float]]:
    """A struct timespec/timeval pointer: NULL = infinite; otherwise the value is out of reach."""
    return (False, None) if ptr == 0 else (True, None)


def _lookup_fd(fds: FdTable, fd: int) -> Optional[FdInfo]:
    if fds is None:
        return None
    if isinstance(fds, Mapping):
        return fds.get(fd)
    for f in fds:
        if f.fd == fd:
            return f
    return None


def _fd_text(fd: int, info: Optional[FdInfo]) -> str:
    """strace -y style: 3<pipe:[123]>, or just 3 when the fd table is unknown."""
    return f"{fd}<{info.target}>" if info is not None else str(fd)


# Calls whose first argument is the fd the thread waits on (reads, writes to a full pipe or
# socket, accepts, connects, locks, device ioctls).
FD_CALLS = frozenset({
    "read", "readv", "pread64", "preadv", "preadv2", "recvfrom", "recvmsg", "recvmmsg",
    "accept", "accept4", "write", "writev", "pwrite64", "pwritev", "pwritev2", "sendto",
    "sendmsg", "sendmmsg", "connect", "flock", "fcntl", "ioctl", "fsync", "fdatasync",
    "splice", "tee", "sendfile",
})
# Calls that return at once whatever their arguments: the clock, ids, the CPU given up for a
# moment, the process's own tables. A thread that a log's end leaves inside one was running,
# not waiting (issue 44 item 2).
NEVER_BLOCK = frozenset({
    "sched_yield", "getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid",
    "getpgrp", "getpgid", "getsid", "clock_gettime", "clock_getres", "gettimeofday", "time",
    "getrusage", "times", "getcpu", "sched_getaffinity", "sched_getparam",
    "sched_getscheduler", "getpriority", "uname", "sysinfo", "umask", "rt_sigprocmask",
    "rt_sigaction", "sigaltstack", "getitimer", "timerfd_gettime", "timerfd_settime",
    "epoll_ctl", "getsockname", "getpeername", "getsockopt", "setsockopt", "lseek", "dup",
    "dup2", "dup3", "set_robust_list", "set_tid_address", "arch_prctl", "prctl",
})
# ioctl requests that only read or set a flag of the fd: never a wait (a device's own requests
# may block: VT_WAITACTIVE, the GPU driver's).
QUERY_IOCTLS = frozenset({"FIONREAD", "TIOCINQ", "TIOCOUTQ", "SIOCINQ", "SIOCOUTQ", "TCGETS",
                          "TIOCGWINSZ", "TIOCGPGRP", "FIONBIO", "FIOCLEX", "FIONCLEX",
                          "FIOASYNC", "SIOCGSTAMP"})


def cannot_block(name: str, args: str = "", timeout: Optional[float] = None,
                 request_name: Optional[str] = None) -> bool:
    """Whether a call, seen from its name and the arguments it was entered with, returns at
    once: ``NEVER_BLOCK``, a query ioctl, a poll with a zero timeout, a receive with
    MSG_DONTWAIT. A call this cannot tell (a read on an fd that may be non-blocking) can block."""
    if name in NEVER_BLOCK:
        return True
    if name == "ioctl":
        return (request_name or "") in QUERY_IOCTLS
    if timeout == 0 and name in ("poll", "ppoll", "select", "pselect6", "epoll_wait",
                                 "epoll_pwait", "epoll_pwait2"):
        return True
    return name.startswith("recv") and "MSG_DONTWAIT" in args


_WAITID_TYPES = {0: "any child", 1: "child {}", 2: "process group {}", 3: "pidfd {}"}


def _futex(name: str, a: Tuple[int, ...]) -> BlockedCall:
    if name == "futex_wait":       # futex_wait(uaddr, val, mask, flags, timeout, clockid)
        return BlockedCall(name, f"futex_wait({a[0]:#x})", f"futex {a[0]:#x}",
                           *_ptr_timeout(a[4]), futex_addr=a[0], futex_op=FutexOp("WAIT"))
    op = decode_op(a[1])
    flags = op.name + ("|PRIVATE" if op.private else "")
    limit = _ptr_timeout(a[3]) if op.is_wait else (None, None)
    return BlockedCall(name, f"futex({a[0]:#x}, {flags})", f"futex {a[0]:#x}", *limit,
                       futex_addr=a[0], futex_op=op)


def _fd_call(name: str, a: Tuple[int, ...], fds: FdTable) -> BlockedCall:
    fd = s32(a[0])
    info = _lookup_fd(fds, fd)
    extra = f", {a[1]:#x}" if name == "ioctl" else ""
    what = f"fd {fd} {info.target}" if info else f"fd {fd}"
    # accept/connect/read on a socket may carry SO_RCVTIMEO; it is not visible here.
    return BlockedCall(name, f"{name}({_fd_text(fd, info)}{extra})", what, fd=fd, fd_info=info)


def _epoll(name: str, a: Tuple[int, ...], fds: FdTable) -> BlockedCall:
    fd = s32(a[0])
    info = _lookup_fd(fds, fd)
    limit = _ptr_timeout(a[3]) if name == "epoll_pwait2" else _ms_timeout(s32(a[3]))
    return BlockedCall(name, f"{name}({_fd_text(fd, info)})", "epoll", *limit, fd=fd,
                       fd_info=info)


def _wait_child(name: str, a: Tuple[int, ...]) -> BlockedCall:
    if name == "wait4":
        pid = s32(a[0])
        what = "any child" if pid == -1 else (f"child {pid}" if pid > 0 else "child in group")
        return BlockedCall(name, f"wait4({pid})", what, bool(a[2] & 1), None,
                           child=pid if pid > 0 else -1)
    idtype, ident = s32(a[0]), s32(a[1])
    what = _WAITID_TYPES.get(idtype, "child").format(ident)
    return BlockedCall(name, f"waitid({what})", what, bool(a[3] & 1), None,
                       child=ident if idtype == 1 else -1)


def decode_blocking(cs: Optional[CurrentSyscall], fds: FdTable = None) -> Optional[BlockedCall]:
    """What ``cs`` waits on; None when the thread is not in a system call. The call reads like
    strace ("futex(0x7f19275f7060, WAIT_BITSET|PRIVATE)", "read(3<pipe:[123]>)"), what it waits on
    like "futex 0x7f..", "fd 3 pipe:[123]", "child 1234", "any child", "timer". Kernel facts: a
    timeout passed by pointer (struct timespec/timeval) lives in the target's memory, so only "some
    time limit" is known, and a NULL pointer means none; int timeouts (poll, epoll_wait) are
    milliseconds, negative = none; wait4's pid is a pid_t (32 bits: 0xffffffff is -1, any child)
    and WNOHANG (1) makes it return at once; waitid's idtype is P_ALL 0, P_PID 1, P_PGID 2, P_PIDFD
    3."""
    if cs is None or cs.kind != "syscall" or cs.name is None:
        return None
    name, a = cs.name, tuple(cs.args) + (0,) * (6 - len(cs.args))
    if name in ("futex", "futex_wait"):
        return _futex(name, a)
    if name == "futex_waitv":      # futex_waitv(waiters, nr_futexes, flags, timeout, clockid)
        return BlockedCall(name, f"futex_waitv({s32(a[1])} futexes)", "futexes",
                           *_ptr_timeout(a[3]))
    if name == "poll":
        return BlockedCall(name, f"poll({s32(a[1])} fds)", "fds", *_ms_timeout(s32(a[2])))
    if name == "ppoll":
        return BlockedCall(name, f"ppoll({s32(a[1])} fds)", "fds", *_ptr_timeout(a[2]))
    if name in ("epoll_wait", "epoll_pwait", "epoll_pwait2"):
        return _epoll(name, a, fds)
    if name in ("select", "pselect6"):
        return BlockedCall(name, f"{name}(nfds={s32(a[0])})", "fds", *_ptr_timeout(a[4]))
    if name in FD_CALLS:
        return _fd_call(name, a, fds)
    if name in ("wait4", "waitid"):
        return _wait_child(name, a)
    if name == "nanosleep":
        return BlockedCall(name, "nanosleep()", "timer", True, None)
    if name == "clock_nanosleep":  # (clockid, flags, request, remain); flags 1 = TIMER_ABSTIME
        return BlockedCall(name, "clock_nanosleep(abs)" if a[1] & 1 else "clock_nanosleep()",
                           "timer", True, None)
    if name == "sched_yield":
        return BlockedCall(name, "sched_yield()", "CPU (yielding in a loop)", True, 0.0)
    if name in ("pause", "rt_sigsuspend"):
        return BlockedCall(name, f"{name}()", "signal", False, None)
    if name == "rt_sigtimedwait":
        return BlockedCall(name, "rt_sigtimedwait()", "signal", *_ptr_timeout(a[2]))
    if name == "io_uring_enter":
        return BlockedCall(name, f"io_uring_enter({s32(a[0])})", "io_uring completions")
    args = ", ".join(f"{v:#x}" for v in a[:3])
    return BlockedCall(name, f"{name}({args})", name)
