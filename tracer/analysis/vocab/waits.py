"""What a blocked thread waits in, as a typed ``Wait`` (its time limit, fd and typed fd target,
futex address and op, or child pid) decoded from an strace or eBPF call (``wait_from_call``) or a
/proc syscall line (``wait_from_proc``, through linux/blocking.py, the decoder snapshots use), and
how much a thread was on CPU (``CpuUse``). Which call a thread sits in at the end, and its CPU use,
are read from its statistics in threads/state.py. Timeouts follow events/__init__.py: None = no
time limit, -1.0 = a limit of unknown length, else seconds.

Kernel facts: /proc/PID/task/TID/syscall is "NR a0 a1 a2 a3 a4 a5 sp pc" while the thread is in a
syscall, "running" on CPU, and "-1 sp pc" when blocked outside one.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import List, Optional

from ... import events as ev
from ...gpu.nvidia import describe_ioctl
from ...linux.blocking import decode_blocking
from ...linux.fdtarget import FdTarget
from ...linux.syscall_table import parse_proc_syscall
from ...linux.restart import TIMED_RESTARTS, resumed_call
from .nodes import real_id

# The calls a hung thread sits in (others seen in a sample are passing through).
BLOCKING_CALLS = frozenset({
    "read", "poll", "pread64", "readv", "select", "nanosleep", "accept", "recvfrom", "recvmsg",
    "wait4", "futex", "clock_nanosleep", "epoll_wait", "waitid", "pselect6", "ppoll",
    "epoll_pwait", "accept4", "recvmmsg", "epoll_pwait2", "ioctl", "pause",
    "rt_sigsuspend", "rt_sigtimedwait", "write", "sendto", "sendmsg", "writev", "connect",
    "flock", "fcntl",
})
LOCK_CALLS = frozenset({"flock", "fcntl"})   # a file lock: flock(), fcntl(F_SETLKW, F_OFD_SETLKW)
# Calls that end only when their fd has data or room: a read of a socket, a write to a full pipe.
_NO_LIMIT_CALLS = frozenset({"read", "recvfrom", "recvmsg", "accept", "accept4", "wait4",
                             "waitid", "pause", "readv", "pread64", "write", "writev", "sendto",
                             "sendmsg", "flock", "fcntl"})
_F_SETLKW = (7, 14, 38)         # F_SETLKW, F_SETLKW64 (32-bit), F_OFD_SETLKW: the waiting locks


@dataclass
class Wait:
    """A call a thread is blocked in. ``timeout`` None means it waits without a time limit."""
    call: str
    timeout: Optional[float] = None
    fd: Optional[int] = None
    target: FdTarget = FdTarget("", None)
    futex_addr: Optional[int] = None
    futex_op: str = ""
    child: Optional[int] = None
    since: Optional[float] = None
    whole_window: bool = True
    source: str = "traced call"
    request: str = ""            # an ioctl's request, decoded ("RM_CONTROL", "VT_WAITACTIVE")
    gpu_ioctl: str = ""          # an NVIDIA driver ioctl, by fd kind or request number
    resumed: bool = False        # seen as restart_syscall: ``call`` is the call it resumes
    futex_val: Optional[int] = None  # the value a futex wait expects (2: a contended lock)
    awaits_reply: bool = False   # a read of the fd the thread's last call sent a request on
    interrupted: int = 0         # times a signal cut it and the thread entered it again

    @property
    def waits_for_a_lock(self) -> bool:
        """A wait that only the holder of a lock ends: a file lock, a PI futex, or a plain
        FUTEX_WAIT on 2, how glibc's low-level locks (pthread mutexes) wait when contended."""
        return self.call in LOCK_CALLS or (self.call == "futex" and (
            self.futex_op.startswith("LOCK_PI") or (self.futex_op == "WAIT"
                                                    and self.futex_val == 2)))

    @property
    def fd_kind(self) -> Optional[str]:
        return self.target.kind

    @property
    def fd_target(self) -> str:
        return self.target.text

    def describe(self) -> str:
        if self.call == "futex":
            what = f"futex {self.futex_op or 'WAIT'} on 0x{self.futex_addr or 0:x}"
        elif self.call in ("wait4", "waitid"):
            what = f"{self.call} for " + ("any child" if self.child in (None, -1, 0)
                                           else f"pid {real_id(self.child)}")
        elif self.fd is not None:
            tgt = f"<{self.target.text}>" if self.target.text else ""
            req = f", {self.request}" if self.request else ""
            what = f"{self.call}({self.fd}{tgt}{req})"
        else:
            what = self.call
        if self.resumed:
            what += " (restart_syscall: resumed after the attach interrupted it)"
            if self.timeout is not None and self.timeout < 0:
                return f"{what}, with a time limit"
        limit = "no timeout" if self.timeout is None or self.call in _NO_LIMIT_CALLS \
            else f"timeout {_secs(self.timeout)}"
        if self.interrupted:
            limit += f" (a signal cut it {self.interrupted} times; entered again each time)"
        return f"{what}, {limit}"


def _secs(s: float) -> str:
    if s < 0:
        return "absolute"
    return f"{s * 1000:.0f} ms" if s < 10 else f"{s:.0f} s"


def _fd_target(fds: List[ev.FdInfo], fd: Optional[int]) -> FdTarget:
    for f in fds:
        if f.fd == fd:
            t = FdTarget.parse(f.target)
            # The table's kind is the refined one (tcp/unix from the socket tables).
            return t if t.kind == f.kind or f.kind is None else FdTarget(
                t.text, f.kind, t.inode or f.inode, t.local, t.remote, t.peer_inode, t.path,
                t.eventfd_id)
    return FdTarget("", None)


def eventfd_id_target(fds: List[ev.FdInfo], w: Wait) -> Optional[str]:
    """The eventfd a wait is on, as read_fds names it ("eventfd:[ID]"), or None.

    The fd number goes through the process's fd table: strace -yy decorates every eventfd alike
    ("anon_inode:[eventfd]"). A wait on another fd kind (an epoll fd) gives None.
    """
    if w.fd is not None:
        t = _fd_target(fds, w.fd)
        return t.text if t.eventfd_id is not None else None
    return w.target.text if w.target.eventfd_id is not None else None


def wait_from_proc(text: str, fds: List[ev.FdInfo], wchan: str = "") -> Optional[Wait]:
    """Interpret a /proc syscall line (sp/pc may be missing) as a Wait, or None when it is not
    a blocking call (linux/blocking.py decodes it). A thread in restart_syscall is in the call
    its wait channel names (linux/restart.py), with that call's arguments still in its
    registers."""
    parts = text.split()
    if len(parts) == 7:
        parts += ["0", "0"]
    cs = parse_proc_syscall(" ".join(parts))
    resumed = ""
    if cs is not None and cs.name == "restart_syscall":
        resumed = resumed_call("", wchan)
        if resumed:
            cs = replace(cs, name=resumed)
    b = decode_blocking(cs, fds)
    if b is None or b.name not in BLOCKING_CALLS:
        return None
    if b.name == "futex" and (b.futex_op is None or not b.futex_op.is_wait):
        return None
    if b.name == "fcntl" and (cs is None or len(cs.args) < 2 or cs.args[1] not in _F_SETLKW):
        return None
    w = Wait(call=b.name, timeout=b.limit, fd=b.fd,
             target=_fd_target(fds, b.fd) if b.fd is not None else FdTarget("", None),
             futex_addr=b.futex_addr, futex_op=b.futex_op.name if b.futex_op else "",
             child=b.child, source="proc", resumed=bool(resumed))
    if resumed in TIMED_RESTARTS and w.timeout is None:
        w.timeout = -1.0               # restarted this way only with a time limit
    return w


def ioctl_request_text(call: ev.IoctlCall) -> str:
    """An ioctl's request in words: NVIDIA's decoded from its number (gpu/nvidia.py), else the
    name strace printed, else the number."""
    d = describe_ioctl(call.fd_kind or "", call.request, call.request_name or None)
    if d is not None:
        return str(d)
    return call.request_name or (f"{call.request:#x}" if call.request else "")


def waits_for_lock(call: ev.Syscall) -> bool:
    """A call still in progress that waits for a file lock (flock; fcntl with F_SETLKW or
    F_OFD_SETLKW, as strace prints the command)."""
    return call.name == "flock" or (call.name == "fcntl" and "SETLKW" in (call.args or ""))


def wait_from_call(call: ev.Syscall, fds: List[ev.FdInfo]) -> Wait:
    target = FdTarget.parse(call.fd_target) if call.fd_target else _fd_target(fds, call.fd)
    if call.fd_kind and target.kind != call.fd_kind:
        target = FdTarget(target.text, call.fd_kind, target.inode, target.local, target.remote,
                          target.peer_inode, target.path, target.eventfd_id)
    w = Wait(call=call.name, fd=call.fd, target=target, since=call.ts, source="traced call")
    if isinstance(call, ev.FutexCall):
        w.futex_addr, w.futex_op, w.timeout = call.addr, call.op, call.timeout
        w.futex_val = call.val
    elif isinstance(call, ev.PollCall):
        w.timeout = call.timeout
    elif isinstance(call, ev.WaitChild):
        w.child = call.child
    elif isinstance(call, ev.IoctlCall):
        w.request = ioctl_request_text(call)
        nv = describe_ioctl(call.fd_kind or "", call.request, call.request_name or None)
        w.gpu_ioctl = str(nv) if nv is not None else ""
    elif call.name in ("nanosleep", "clock_nanosleep"):
        w.timeout = -1.0
    return w


@dataclass
class CpuUse:
    fraction: float
    seconds: float
    # "samples" (measured) or "strace" (time outside syscalls, inferred; with ``runnable`` set,
    # ``fraction`` is the ticks /proc counted between the window's ends and ``runnable`` the
    # inference: state.cpu_use)
    source: str
    # On CPU or waiting for one (schedstat's run + run-queue wait): a spinning thread wants the
    # CPU all the time even when other work on a busy machine keeps it off it.
    runnable: Optional[float] = None

    @property
    def demand(self) -> float:
        """The fraction of the window the thread wanted the CPU (on it or runnable)."""
        return max(self.fraction, self.runnable or 0.0)

    def describe(self, window: float) -> str:
        if self.source == "samples":
            text = f"on CPU {self.fraction:.0%} of {window:.1f} s (+{self.seconds:.2f} s CPU)"
            if self.runnable is not None and self.runnable >= self.fraction + 0.2:
                text += (f", runnable {self.runnable:.0%} (the rest it waited for a CPU the "
                         "machine gave to others)")
            return text
        if self.runnable is None:
            return (f"outside syscalls {self.fraction:.0%} of {window:.1f} s "
                    "(on CPU or runnable, from strace timing)")
        return (f"outside syscalls {self.runnable:.0%} of {window:.1f} s (on CPU or runnable, "
                f"from strace timing), on CPU {self.fraction:.0%} (/proc at the window's ends)")
