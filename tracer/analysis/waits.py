"""What a thread is blocked in at the end of the recording, and how much it was on CPU.

Contract: pure functions over one ``ThreadStats`` (plus its process's fd table), giving
- ``blocking_wait``: the call the thread sits in at the end (from an strace call still unfinished,
  or from /proc samples that show the same call throughout without the thread running), with
  its timeout, fd, futex address or child pid;
- ``cpu_use``: the fraction of the window the thread was on CPU, measured from /proc ticks when
  sampled, otherwise inferred from strace timing (time outside syscalls), else unknown.

Kernel facts: /proc/PID/task/TID/syscall is "NR a0 a1 a2 a3 a4 a5 sp pc" while the thread is in a
syscall, "running" on CPU, and "-1 sp pc" when blocked outside one. schedstat's third field counts
the times the thread was scheduled in: unchanged between two samples means it never woke.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from .. import events as ev
from ..linux.syscall_table import parse_proc_syscall as decode_proc_syscall
from .accumulate import Recording, ThreadStats

# The calls a hung thread sits in; numbers are decoded by tracer/linux/syscall_table.py.
BLOCKING_CALLS = frozenset({
    "read", "poll", "pread64", "readv", "select", "nanosleep", "accept", "recvfrom", "recvmsg",
    "wait4", "futex", "clock_nanosleep", "epoll_wait", "waitid", "pselect6", "ppoll",
    "epoll_pwait", "accept4", "recvmmsg", "epoll_pwait2", "sched_yield", "ioctl", "pause",
    "rt_sigsuspend", "rt_sigtimedwait", "write", "sendto", "sendmsg", "writev", "connect",
})
_FD_FIRST = {"read", "pread64", "readv", "accept", "accept4", "recvfrom", "recvmsg", "recvmmsg",
             "ioctl", "write", "writev", "sendto", "sendmsg", "connect", "epoll_wait",
             "epoll_pwait", "epoll_pwait2"}
_FUTEX_WAIT_OPS = {0: "WAIT", 9: "WAIT_BITSET", 6: "LOCK_PI", 11: "WAIT_REQUEUE_PI", 13: "LOCK_PI2"}
_NO_TIMEOUT_MS = {0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF, -1}


@dataclass
class Wait:
    """A call a thread is blocked in. ``timeout`` None means it waits without a time limit."""
    call: str
    timeout: Optional[float] = None
    fd: Optional[int] = None
    fd_kind: Optional[str] = None
    fd_target: Optional[str] = None
    futex_addr: Optional[int] = None
    futex_op: str = ""
    child: Optional[int] = None
    since: Optional[float] = None
    whole_window: bool = True
    source: str = "traced call"

    def describe(self) -> str:
        if self.call == "futex":
            what = f"futex {self.futex_op or 'WAIT'} on 0x{self.futex_addr or 0:x}"
        elif self.call in ("wait4", "waitid"):
            what = f"{self.call} for " + ("any child" if self.child in (None, -1, 0)
                                           else f"pid {self.child}")
        elif self.fd is not None:
            tgt = f"<{self.fd_target}>" if self.fd_target else ""
            what = f"{self.call}({self.fd}{tgt})"
        else:
            what = self.call
        limit = "no timeout" if self.timeout is None else f"timeout {_secs(self.timeout)}"
        if self.call in ("read", "recvfrom", "recvmsg", "accept", "accept4", "wait4", "waitid",
                         "pause", "readv", "pread64", "write", "writev", "sendto", "sendmsg"):
            limit = "no timeout"
        return f"{what}, {limit}"


def _secs(s: float) -> str:
    if s < 0:
        return "absolute"
    return f"{s * 1000:.0f} ms" if s < 10 else f"{s:.0f} s"


def _fd_lookup(fds: List[ev.FdInfo], fd: int) -> Tuple[Optional[str], Optional[str]]:
    for f in fds:
        if f.fd == fd:
            return f.kind, f.target
    return None, None


def eventfd_object(fds: List[ev.FdInfo], w: Wait) -> Optional[str]:
    """The eventfd a wait is on, as read_fds names it ("eventfd:[ID]"), or None.

    The fd number (strace/ebpf call, /proc syscall args) goes through the process's fd table:
    strace -yy decorates every eventfd alike ("anon_inode:[eventfd]"). A wait on another fd
    kind (an epoll fd, poll without a known fd) gives None.
    """
    if w.fd is not None:
        for f in fds:
            if f.fd == w.fd:
                return f.target if f.target.startswith("eventfd:[") else None
    target = w.fd_target or ""
    return target if target.startswith("eventfd:[") else None


def parse_proc_syscall(text: str) -> Optional[Tuple[str, List[int]]]:
    """(name, args) of a /proc .../syscall line for a blocking call, or None. The trailing
    sp/pc may be missing (ThreadStats.sample_calls keeps lines without them)."""
    parts = text.split()
    if len(parts) == 7:
        parts += ["0", "0"]
    cs = decode_proc_syscall(" ".join(parts))
    if cs is None or cs.kind != "syscall" or cs.name not in BLOCKING_CALLS:
        return None
    return cs.name, list(cs.args)


def wait_from_proc(text: str, fds: List[ev.FdInfo]) -> Optional[Wait]:
    """Interpret a /proc syscall line as a Wait (timeouts from the arguments)."""
    parsed = parse_proc_syscall(text)
    if parsed is None:
        return None
    name, a = parsed
    w = Wait(call=name, source="proc")
    if name == "futex":
        op = a[1] & 0x7F
        w.futex_op = _FUTEX_WAIT_OPS.get(op, "")
        if not w.futex_op:
            return None
        w.futex_addr = a[0]
        w.timeout = None if a[3] == 0 else -1.0   # a pointer: the value is in the target's memory
    elif name in ("poll", "ppoll"):
        if name == "poll":
            w.timeout = None if a[2] in _NO_TIMEOUT_MS or a[2] >= 0x80000000 else a[2] / 1000
        else:
            w.timeout = None if a[2] == 0 else -1.0
    elif name in ("epoll_wait", "epoll_pwait"):
        w.timeout = None if a[3] in _NO_TIMEOUT_MS or a[3] >= 0x80000000 else a[3] / 1000
    elif name in ("select", "pselect6"):
        w.timeout = None if a[4] == 0 else -1.0
    elif name in ("nanosleep", "clock_nanosleep"):
        w.timeout = -1.0
    elif name in ("wait4", "waitid"):
        child = a[0] if name == "wait4" else a[1]
        child &= 0xFFFFFFFF   # pid_t is 32 bits wide
        w.child = child - (1 << 32) if child >= 1 << 31 else child
        if name == "waitid" and a[0] == 0:   # P_ALL
            w.child = -1
    elif name == "sched_yield":
        return None
    if name in _FD_FIRST:
        w.fd = a[0] if a[0] < 1 << 31 else None
        if w.fd is not None:
            w.fd_kind, w.fd_target = _fd_lookup(fds, w.fd)
    return w


def wait_from_call(call: ev.Syscall) -> Wait:
    w = Wait(call=call.name, fd=call.fd, fd_kind=call.fd_kind, fd_target=call.fd_target,
             since=call.ts, source="traced call")
    if isinstance(call, ev.FutexCall):
        w.futex_addr, w.futex_op, w.timeout = call.addr, call.op, call.timeout
    elif isinstance(call, ev.PollCall):
        w.timeout = call.timeout
    elif isinstance(call, ev.WaitChild):
        w.child = call.child
    elif call.name in ("nanosleep", "clock_nanosleep"):
        w.timeout = -1.0
    return w


def blocking_wait(t: ThreadStats, rec: Recording, fds: List[ev.FdInfo]) -> Optional[Wait]:
    """The call ``t`` is blocked in at the end of the recording, if any (module doc)."""
    if t.exited_at is not None:
        return None
    if t.ongoing is not None:
        w = wait_from_call(t.ongoing)
        # Blocked "throughout" when the call began near the start of what we saw of it.
        w.whole_window = (t.ongoing.ts - rec.start) <= 0.25 * rec.window \
            and t.total_syscalls <= 2
        return w
    s = t.last_sample
    if s is None or s.state not in ("S", "D", "I"):
        return None
    w = wait_from_proc(s.syscall, fds)
    if w is None:
        return None
    first = t.first_sample
    same_call = len(t.sample_calls) == 1
    never_ran = (first is not None and first.run_count is not None and s.run_count is not None
                 and s.run_count == first.run_count)
    w.whole_window = same_call and (never_ran or first.run_count is None)
    if rec.has_syscalls and t.total_syscalls > 0 and not w.whole_window:
        # strace saw the thread complete calls: a single sample is no proof of a long block.
        return None
    return w


@dataclass
class CpuUse:
    fraction: float
    seconds: float
    source: str   # "samples" (measured) or "strace" (time outside syscalls, inferred)

    def describe(self, window: float) -> str:
        if self.source == "samples":
            return f"on CPU {self.fraction:.0%} of {window:.1f} s (+{self.seconds:.2f} s CPU)"
        return (f"outside syscalls {self.fraction:.0%} of {window:.1f} s "
                "(on CPU or runnable, from strace timing)")


def cpu_use(t: ThreadStats, rec: Recording) -> Optional[CpuUse]:
    if t.cpu is not None and t.cpu.ts > t.cpu.since:
        secs = t.cpu.on_cpu_ns / 1e9
        return CpuUse(min(1.0, secs / (t.cpu.ts - t.cpu.since)), secs, "samples")
    a, b = t.first_sample, t.last_sample
    if a is not None and b is not None and b.ts > a.ts:
        secs = ((b.utime + b.stime) - (a.utime + a.stime)) / float(b.ticks_hz or 100)
        span = b.ts - a.ts
        return CpuUse(min(1.0, max(0.0, secs / span)), secs, "samples")
    if not rec.has_syscalls or not rec.capabilities.get("durations", True) \
            or not rec.capabilities.get("timestamps", True) or not t.durations_known:
        return None
    begin = max(rec.start, t.started_at or rec.start)
    end = t.exited_at if t.exited_at is not None else rec.end
    span = end - begin
    if span <= 0.5:
        return None
    blocked = 0.0
    if t.ongoing is not None:
        blocked = max(0.0, end - max(t.ongoing.ts, begin))
    outside = span - min(span, t.syscall_time + blocked)
    return CpuUse(max(0.0, outside / span), outside, "strace")
