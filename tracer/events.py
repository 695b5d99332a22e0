"""The typed event model shared by every backend, the trace file and the analyzer.

Contract:
- Backends (strace, proc, later ebpf) and importers produce only these classes; the analyzer
  consumes only these classes. Nothing here classifies: an event states what happened.
- Times are seconds since the epoch (float, CLOCK_REALTIME as strace -ttt prints it); durations
  are seconds. ``None`` means "not known" (a log without -T has no durations), never zero.
- No buffer contents: a write is a byte count, ``args`` is argument text with string and
  buffer literals removed (see ``scrub_args``).
- Each class has a short ``TAG`` used in the trace file; field order is given by the dataclass
  and written into the trace header, so a reader maps fields by name (trace.py).

fd kinds (``fd_kind``): file, dir, pipe, fifo, tcp, udp, unix, netlink, socket, eventfd, epoll,
timerfd, signalfd, pidfd, inotify, anon, tty, nvidia, nvidia-uvm, nvidiactl, dev, null, None.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Dict, List, Optional, Tuple, Type

__all__ = [
    "Event", "Syscall", "FutexCall", "PollCall", "IoctlCall", "WriteCall", "ReadCall",
    "WaitChild", "ThreadSample", "ThreadCpu", "ProcessIO", "ProcessInfo", "FdInfo", "ThreadStart",
    "ProcessExec", "ThreadExit", "ProcessExit", "SignalDelivered", "Lost", "RecordingEnd",
    "EVENT_CLASSES", "scrub_args", "OUTPUT_FD_KINDS",
]

# Kinds of fd whose writes count as "doing something for the outside world".
OUTPUT_FD_KINDS = frozenset({"file", "pipe", "fifo", "tcp", "udp", "unix", "socket", "tty", "null"})


@dataclass(slots=True)
class Event:
    TAG: ClassVar[str] = "?"
    ts: float


# --------------------------------------------------------------------------- syscalls
@dataclass(slots=True)
class Syscall(Event):
    """One system call of one thread.

    ``ret`` is None when the call had not returned when the recording ended (the thread is still
    blocked in it: ``ongoing`` is True and ``dur`` is the time it had been blocked so far).
    ``err`` is the errno name (EAGAIN, ETIMEDOUT, ...) or None on success.
    ``fd``/``fd_kind``/``fd_target`` describe the first fd argument where there is one.
    """
    TAG: ClassVar[str] = "sc"
    pid: int
    tid: int
    name: str
    args: str = ""
    ret: Optional[int] = None
    err: Optional[str] = None
    dur: Optional[float] = None
    fd: Optional[int] = None
    fd_kind: Optional[str] = None
    fd_target: Optional[str] = None
    ongoing: bool = False


@dataclass(slots=True)
class FutexCall(Syscall):
    """futex(2): ``op`` without the PRIVATE/CLOCK flags (WAIT, WAKE, WAIT_BITSET, LOCK_PI, ...).

    ``timeout`` is seconds for a relative timeout, -1.0 for an absolute one, None for none.
    """
    TAG: ClassVar[str] = "fx"
    op: str = ""
    addr: int = 0
    val: Optional[int] = None
    timeout: Optional[float] = None
    private: bool = False


@dataclass(slots=True)
class PollCall(Syscall):
    """poll/ppoll/select/pselect6/epoll_wait/epoll_pwait(2): ``timeout`` seconds, None = infinite.

    ``fd_kinds`` are the kinds of the fds watched (for poll/select) or registered (epoll, when
    known). ``timed_out`` is True when it returned 0.
    """
    TAG: ClassVar[str] = "pl"
    timeout: Optional[float] = None
    nfds: Optional[int] = None
    fd_kinds: Tuple[str, ...] = ()
    timed_out: bool = False


@dataclass(slots=True)
class IoctlCall(Syscall):
    """ioctl(2) with its request number; ``request_name`` is a decoded name when one is known."""
    TAG: ClassVar[str] = "io"
    request: int = 0
    request_name: Optional[str] = None


@dataclass(slots=True)
class WriteCall(Syscall):
    """write/writev/pwrite*/send*/sendmsg/sendmmsg/sendfile: bytes only, never contents."""
    TAG: ClassVar[str] = "wr"
    nbytes: int = 0


@dataclass(slots=True)
class ReadCall(Syscall):
    """read/readv/pread*/recv*/recvmsg/recvfrom/accept*: bytes (or new fd) only."""
    TAG: ClassVar[str] = "rd"
    nbytes: int = 0


@dataclass(slots=True)
class WaitChild(Syscall):
    """wait4/waitid/waitpid: ``child`` is the pid waited for (-1 any child)."""
    TAG: ClassVar[str] = "wt"
    child: int = -1


# --------------------------------------------------------------------------- /proc samples
@dataclass(slots=True)
class ThreadSample(Event):
    """One look at /proc/PID/task/TID: state letter, CPU ticks, wchan, the current syscall.

    ``syscall`` is /proc/.../syscall as read: "running", "-1 ..." (blocked, not in a syscall) or
    "NR arg0 ... arg5 sp pc". ``ticks_hz`` converts utime/stime to seconds. ``run_count`` is the
    number of times the thread ran (schedstat field 3) when known.
    """
    TAG: ClassVar[str] = "ts"
    pid: int
    tid: int
    comm: str
    state: str
    utime: int
    stime: int
    wchan: str = ""
    syscall: str = ""
    run_ns: Optional[int] = None
    wait_ns: Optional[int] = None
    run_count: Optional[int] = None
    ticks_hz: int = 100


@dataclass(slots=True)
class ThreadCpu(Event):
    """On-CPU time of one thread measured in the kernel (sched_switch) between ``since`` and
    ``ts``: the eBPF backend's CPU accounting, finer than /proc ticks."""
    TAG: ClassVar[str] = "cpu"
    pid: int
    tid: int
    since: float
    on_cpu_ns: int
    switches: int = 0


@dataclass(slots=True)
class ProcessIO(Event):
    """/proc/PID/io counters (cumulative) at one instant."""
    TAG: ClassVar[str] = "pio"
    pid: int
    rchar: int
    wchar: int
    syscr: int
    syscw: int
    read_bytes: int = 0
    write_bytes: int = 0


# --------------------------------------------------------------------------- process table
@dataclass(slots=True)
class FdInfo:
    """One open fd: kind (see module doc), target text, access mode ("r", "w", "rw"), position."""
    fd: int
    kind: Optional[str]
    target: str
    mode: str = ""
    pos: Optional[int] = None
    inode: Optional[int] = None

    def to_list(self) -> list:
        return [self.fd, self.kind, self.target, self.mode, self.pos, self.inode]

    @classmethod
    def from_list(cls, v: list) -> "FdInfo":
        return cls(*v)


@dataclass(slots=True)
class ProcessInfo(Event):
    """What is known of a process: emitted at start for every target and when a new one appears.

    ``threads`` maps tid -> comm. ``fds`` is the fd table where it could be read. ``listening``
    lists "tcp 0.0.0.0:8000" / "unix /path" style strings for its listening sockets.
    ``state`` and ``exit_code`` come from /proc/PID/stat (a zombie still has its exit code).
    """
    TAG: ClassVar[str] = "pi"
    pid: int
    ppid: int
    comm: str = ""
    cmdline: List[str] = field(default_factory=list)
    threads: Dict[int, str] = field(default_factory=dict)
    fds: List[FdInfo] = field(default_factory=list)
    listening: List[str] = field(default_factory=list)
    state: str = ""
    exit_code: Optional[int] = None
    start_time: Optional[float] = None
    environ_rank: Optional[str] = None


@dataclass(slots=True)
class ThreadStart(Event):
    """A new thread (clone with CLONE_THREAD) or a new process (fork/clone) seen by a backend."""
    TAG: ClassVar[str] = "tst"
    pid: int
    tid: int
    parent_tid: Optional[int] = None
    new_process: bool = False


@dataclass(slots=True)
class ProcessExec(Event):
    TAG: ClassVar[str] = "ex"
    pid: int
    tid: int
    filename: str = ""
    argv: List[str] = field(default_factory=list)


@dataclass(slots=True)
class ThreadExit(Event):
    TAG: ClassVar[str] = "tx"
    pid: int
    tid: int


@dataclass(slots=True)
class ProcessExit(Event):
    """A process ended: ``status`` is the exit status, or None when ``signal`` killed it."""
    TAG: ClassVar[str] = "px"
    pid: int
    status: Optional[int] = None
    signal: Optional[str] = None
    core_dumped: bool = False


@dataclass(slots=True)
class SignalDelivered(Event):
    TAG: ClassVar[str] = "sig"
    pid: int
    tid: int
    signal: str = ""
    sender: Optional[int] = None


@dataclass(slots=True)
class Lost(Event):
    """Events a backend could not record (overflow, unparsable lines): count and why."""
    TAG: ClassVar[str] = "lost"
    count: int
    reason: str = ""
    sample: str = ""


@dataclass(slots=True)
class RecordingEnd(Event):
    """Last record of a complete trace; a trace without it was cut short (truncated)."""
    TAG: ClassVar[str] = "end"
    reason: str = ""
    duration: float = 0.0
    events: int = 0


EVENT_CLASSES: Dict[str, Type[Event]] = {
    c.TAG: c for c in (Syscall, FutexCall, PollCall, IoctlCall, WriteCall, ReadCall, WaitChild,
                       ThreadSample, ThreadCpu, ProcessIO, ProcessInfo, ThreadStart, ProcessExec, ThreadExit,
                       ProcessExit, SignalDelivered, Lost, RecordingEnd)
}


def field_names(cls: Type[Event]) -> List[str]:
    return [f.name for f in fields(cls)]


# strace prints buffers as "..." literals (optionally followed by ...), and struct contents of
# read buffers as well; we keep the shape of the call but never the bytes.
_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"(?:\.\.\.)?')


def scrub_args(args: str) -> str:
    """Replace every string literal in strace argument text by ``"..."``.

    Path arguments are strings too; they are kept by callers that need them in ``fd_target``.
    """
    if '"' not in args:
        return args
    return _STRING_RE.sub('"..."', args)


def event_to_row(ev: Event) -> List[Any]:
    """Compact row [TAG, field values...] in dataclass field order (the header holds the names)."""
    row: List[Any] = [ev.TAG]
    for name in _FIELDS[type(ev)]:
        v = getattr(ev, name)
        if name == "fds":
            v = [f.to_list() for f in v]
        elif name == "threads":
            v = {str(k): c for k, c in v.items()}
        elif isinstance(v, tuple):
            v = list(v)
        row.append(v)
    return row


_FIELDS: Dict[Type[Event], List[str]] = {c: field_names(c) for c in EVENT_CLASSES.values()}


def schema() -> Dict[str, List[str]]:
    return {tag: _FIELDS[cls] for tag, cls in EVENT_CLASSES.items()}


# --------------------------------------------------------------------------- GPU (NVML)
@dataclass(slots=True)
class GpuSample(Event):
    """One look at one GPU through NVML (tracer/gpu/nvml.py): utilization over the driver's last
    sample period (percent of time a kernel ran), memory in bytes, and the pids of the compute
    processes that hold a context on it. ``util_pct`` is None where NVML could not say."""
    TAG: ClassVar[str] = "gpu"
    gpu: int
    uuid: str = ""
    util_pct: Optional[int] = None
    mem_used: Optional[int] = None
    mem_total: Optional[int] = None
    pids: List[int] = field(default_factory=list)


EVENT_CLASSES[GpuSample.TAG] = GpuSample
_FIELDS[GpuSample] = field_names(GpuSample)
__all__.append("GpuSample")


# --------------------------------------------------------------------------- Python stacks
@dataclass(slots=True)
class PyStack(Event):
    """One thread's Python stack as ``py-spy dump`` saw it at the end of a recording
    (tracer/record/pystacks.py). ``frames`` are "func (file:line)", innermost first; ``tid`` is the
    OS thread id (py-spy's ``os_thread_id``). A stack that could not be taken has ``tid`` 0,
    no frames and ``error`` saying why (py-spy not installed, permission denied, ...)."""
    TAG: ClassVar[str] = "pys"
    pid: int
    tid: int
    thread_name: str = ""
    frames: List[str] = field(default_factory=list)
    active: Optional[bool] = None
    owns_gil: Optional[bool] = None
    error: str = ""


EVENT_CLASSES[PyStack.TAG] = PyStack
_FIELDS[PyStack] = field_names(PyStack)
__all__.append("PyStack")


# --------------------------------------------------------------------------- end-of-recording probes
@dataclass(slots=True)
class FutexOwner(Event):
    """Who holds the futex a thread of ``pid`` waits on, read from the target's memory at the end
    of the recording (tracer/record/probes/futex_owner.py).

    ``word`` is the 32-bit futex word at ``addr`` (None when the memory could not be read);
    ``owner_tid`` the thread that holds it where that can be known, else None. ``kind`` says how
    the word was read: "mutex" (a glibc pthread mutex: owner from its ``__owner`` field),
    "pi-mutex" (owner tid in the word itself), "join" (pthread_join: the word is the tid of the
    thread being joined, which holds it until it exits), "unknown" (a semaphore, condition or
    other futex: no owner is recorded). ``owner_pid`` is the process of ``owner_tid`` at the
    time of the probe, None when that thread no longer exists. ``shared`` is a futex without
    FUTEX_PRIVATE_FLAG (possibly in memory shared between processes). ``waiters`` are the tids
    of ``pid`` seen waiting on it.
    """
    TAG: ClassVar[str] = "fxo"
    pid: int
    addr: int
    word: Optional[int] = None
    owner_tid: Optional[int] = None
    kind: str = "unknown"
    owner_pid: Optional[int] = None
    shared: bool = False
    waiters: List[int] = field(default_factory=list)
    why: str = ""


@dataclass(slots=True)
class SocketPeers(Event):
    """The socket at the other end of each connected unix socket of ``pid`` (sock_diag).

    ``peers`` maps an inode of one of its sockets to the peer socket's inode (JSON turns the keys
    into strings: readers convert them back with int). ``outside`` maps a peer inode that no
    traced process holds to the pids (outside the tree) that hold it; a peer inode in neither
    belongs to a socket whose last holder closed it or exited."""
    TAG: ClassVar[str] = "skp"
    pid: int
    peers: Dict[int, int] = field(default_factory=dict)
    outside: Dict[int, List[int]] = field(default_factory=dict)


for _cls in (FutexOwner, SocketPeers):
    EVENT_CLASSES[_cls.TAG] = _cls
    _FIELDS[_cls] = field_names(_cls)
    __all__.append(_cls.__name__)


# --------------------------------------------------------------------------- kernel counts
@dataclass(slots=True)
class ThreadCounts(Event):
    """What the kernel counted for one thread (eBPF backend), cumulative from ``since`` (the
    attach) to ``ts``: emitted about once a second while recording and once at the end, for
    threads that exited during the window too. A later one replaces an earlier one.

    Calls are counted in the kernel; some are also emitted one by one as syscall events
    (``streamed``), the rest only here. So that a reader adds both without double counting:
    - ``calls``: every completed call, by name (the truth); ``streamed``: of those, the ones
      that were also emitted as events. ``blocked_s``: seconds the calls NOT streamed spent
      asleep (a call that never left the CPU adds nothing).
    - ``per_fd``: writes/sends and reads/recvs per fd, none of which is streamed; one dict per fd
      (see ``FD_KEYS``): ``fd``, ``kind``/``target`` (events.FdInfo's, resolved from /proc
      when the counts were read; None/"" when the fd was already closed), ``writes`` (calls
      that returned >= 0), ``wbytes``, ``wmin``/``wmax`` (sizes), ``wsmall``/``wsbytes``
      (writes of at most 8 bytes: wake-up sized, and their bytes), ``reads`` (calls that
      returned data), ``rbytes``, ``first``/``last`` (epoch seconds of the first and last of
      them, at most one scheduler tick early).
    - ``futex`` (keys: waits, waits_timeout, timeouts, wakes), ``polls`` (keys: calls,
      timeouts, infinite), ``ioctls`` (dicts: fd, kind, target, request, calls) and
      ``accepts``: the calls of those kinds that were NOT streamed (the streamed ones carry
      their own details).
    """
    TAG: ClassVar[str] = "cnt"
    pid: int
    tid: int
    since: float
    calls: Dict[str, int] = field(default_factory=dict)
    streamed: Dict[str, int] = field(default_factory=dict)
    blocked_s: float = 0.0
    per_fd: List[Dict[str, Any]] = field(default_factory=list)
    futex: Dict[str, int] = field(default_factory=dict)
    polls: Dict[str, int] = field(default_factory=dict)
    ioctls: List[Dict[str, Any]] = field(default_factory=list)
    accepts: int = 0


FD_KEYS = ("fd", "kind", "target", "writes", "wbytes", "wmin", "wmax", "wsmall", "wsbytes",
           "reads", "rbytes", "first", "last")
EVENT_CLASSES[ThreadCounts.TAG] = ThreadCounts
_FIELDS[ThreadCounts] = field_names(ThreadCounts)
__all__ += ["ThreadCounts", "FD_KEYS"]
