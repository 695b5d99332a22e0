"""The typed event model shared by every backend, the trace file and the analyzer.

Contract:
- Backends (strace, proc, later ebpf) and importers produce only these classes; the analyzer
  consumes only these classes. Nothing here classifies: an event states what happened.
- Times are seconds since the epoch (float, CLOCK_REALTIME as strace -ttt prints it); durations
  are seconds. ``None`` means "not known" (a log without -T has no durations), never zero.
- No buffer contents: a write is a byte count, ``args`` is argument text with string and
  buffer literals removed (see ``scrub_args``).
- Each class is a msgspec Struct with a short ``TAG`` (its ``tag``) used in the trace file;
  field order is given by the class and written into the trace header, so a reader maps
  fields by name (tracefile/codec.py). Field types say what a field may hold (fields.py):
  msgspec checks them when a trace row is decoded, not when an event is made here.

fd kinds (``fd_kind``): fields.FdKind (file, dir, pipe, fifo, tcp, udp, unix, netlink, socket,
eventfd, epoll, timerfd, signalfd, pidfd, inotify, anon, tty, nvidia, nvidia-uvm, nvidiactl,
dev, null), or None.
"""
from __future__ import annotations

import re
from typing import Any, ClassVar, Dict, List, Optional, Tuple, Type

from msgspec import Struct, field


# the event classes join as they are registered (``register``, at the end)
__all__ = ["Event", "FdInfo", "EVENT_CLASSES", "register", "scrub_args", "event_to_row",
           "schema", "field_names"]


class Event(Struct, array_like=True, gc=False, forbid_unknown_fields=True):
    """What every event is: a typed record (a msgspec Struct) whose trace row is
    ``[TAG, field, ...]`` (array-like, tagged by its class's ``tag``, which ``register`` also
    makes its ``TAG``). ``gc=False``: events hold only scalars and lists or dicts of them, so
    they can be in no reference cycle and the cyclic collector need not visit them."""
    TAG: ClassVar[str] = "?"
    ts: float


# --------------------------------------------------------------------------- syscalls
class Syscall(Event, tag="sc"):
    """One system call of one thread.

    ``ret`` is None when the call had not returned when the recording ended (the thread is still
    blocked in it: ``ongoing`` is True and ``dur`` is the time it had been blocked so far).
    ``err`` is the errno name (EAGAIN, ETIMEDOUT, ...) or None on success.
    ``fd``/``fd_kind``/``fd_target`` describe the first fd argument where there is one.
    """
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


class FutexCall(Syscall, tag="fx"):
    """futex(2): ``op`` without the PRIVATE/CLOCK flags (WAIT, WAKE, WAIT_BITSET, LOCK_PI, ...).

    ``timeout`` is seconds for a relative timeout, -1.0 for an absolute one, None for none.
    """
    op: str = ""
    addr: int = 0
    val: Optional[int] = None
    timeout: Optional[float] = None
    private: bool = False


class PollCall(Syscall, tag="pl"):
    """poll/ppoll/select/pselect6/epoll_wait/epoll_pwait(2): ``timeout`` seconds, None = infinite.

    ``fd_kinds`` are the kinds of the fds watched (for poll/select) or registered (epoll, when
    known). ``timed_out`` is True when it returned 0.
    """
    timeout: Optional[float] = None
    nfds: Optional[int] = None
    fd_kinds: Tuple[str, ...] = ()
    timed_out: bool = False


class IoctlCall(Syscall, tag="io"):
    """ioctl(2) with its request number; ``request_name`` is a decoded name when one is known."""
    request: int = 0
    request_name: Optional[str] = None


class WriteCall(Syscall, tag="wr"):
    """write/writev/pwrite*/send*/sendmsg/sendmmsg/sendfile: bytes only, never contents."""
    nbytes: int = 0


class ReadCall(Syscall, tag="rd"):
    """read/readv/pread*/recv*/recvmsg/recvfrom/accept*: bytes (or new fd) only."""
    nbytes: int = 0


class WaitChild(Syscall, tag="wt"):
    """wait4/waitid/waitpid: ``child`` is the pid waited for (-1 any child)."""
    child: int = -1


# --------------------------------------------------------------------------- /proc samples
class ThreadSample(Event, tag="ts"):
    """One look at /proc/PID/task/TID: state letter, CPU ticks, wchan, the current syscall.

    ``syscall`` is /proc/.../syscall as read: "running", "-1 ..." (blocked, not in a syscall) or
    "NR arg0 ... arg5 sp pc". ``ticks_hz`` converts utime/stime to seconds. ``run_count`` is the
    number of times the thread ran (schedstat field 3) when known.
    """
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


class ThreadCpu(Event, tag="cpu"):
    """On-CPU time of one thread measured in the kernel (sched_switch) between ``since`` and
    ``ts``: the eBPF backend's CPU accounting, finer than /proc ticks."""
    pid: int
    tid: int
    since: float
    on_cpu_ns: int
    switches: int = 0


class ProcessIO(Event, tag="pio"):
    """/proc/PID/io counters (cumulative) at one instant."""
    pid: int
    rchar: int
    wchar: int
    syscr: int
    syscw: int
    read_bytes: int = 0
    write_bytes: int = 0


# --------------------------------------------------------------------------- process table
class FdInfo(Struct, array_like=True, gc=False, forbid_unknown_fields=True):
    """One open fd: kind (see module doc), target text, access mode ("r", "w", "rw"), position."""
    fd: int
    kind: Optional[str]
    target: str
    mode: str = ""
    pos: Optional[int] = None
    inode: Optional[int] = None

    def to_list(self) -> list:
        return [self.fd, self.kind, self.target, self.mode, self.pos, self.inode]

    from_list = classmethod(lambda cls, v: cls(*v))     # the inverse of to_list


class ProcessInfo(Event, tag="pi"):
    """What is known of a process: emitted at start for every target and when a new one appears.
    ``threads``: tid -> comm. ``fds``: the fd table where it could be read. ``listening``: "tcp
    0.0.0.0:8000" / "unix /path" strings. ``state``, ``exit_code``: /proc/PID/stat (a zombie
    keeps its exit code). ``pid_unknown``: the recording does not show which process this
    entry's one thread belongs to (an strace log of ``-p A -p B`` has no fork records): ``pid``
    is that thread's tid, kept apart from every other process rather than folded in by a guess.
    """
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
    pid_unknown: bool = False


class ThreadStart(Event, tag="tst"):
    """A new thread (clone with CLONE_THREAD) or a new process (fork/clone) seen by a backend."""
    pid: int
    tid: int
    parent_tid: Optional[int] = None
    new_process: bool = False


class ProcessExec(Event, tag="ex"):
    pid: int
    tid: int
    filename: str = ""
    argv: List[str] = field(default_factory=list)


class ThreadExit(Event, tag="tx"):
    pid: int
    tid: int


class ProcessExit(Event, tag="px"):
    """A process ended: ``status`` is the exit status, or None when ``signal`` killed it."""
    pid: int
    status: Optional[int] = None
    signal: Optional[str] = None
    core_dumped: bool = False


class SignalDelivered(Event, tag="sig"):
    pid: int
    tid: int
    signal: str = ""
    sender: Optional[int] = None


class Lost(Event, tag="lost"):
    """Events a backend could not record (overflow, unparsable lines): count and why."""
    count: int
    reason: str = ""
    sample: str = ""


class RecordingEnd(Event, tag="end"):
    """Last record of a complete trace; a trace without it was cut short (truncated)."""
    reason: str = ""
    duration: float = 0.0
    events: int = 0


# --------------------------------------------------------------------------- GPU (NVML)
class GpuSample(Event, tag="gpu"):
    """One look at one GPU through NVML (tracer/gpu/nvml.py): utilization over the driver's last
    sample period (percent of time a kernel ran), memory in bytes, and the pids of the compute
    processes that hold a context on it. ``util_pct`` is None where NVML could not say.
    ``power_mw`` (board power draw) and ``sm_clock_mhz`` are None in traces made before they
    were recorded, or where NVML does not report them."""
    gpu: int
    uuid: str = ""
    util_pct: Optional[int] = None
    mem_used: Optional[int] = None
    mem_total: Optional[int] = None
    pids: List[int] = field(default_factory=list)
    power_mw: Optional[int] = None
    sm_clock_mhz: Optional[int] = None




# --------------------------------------------------------------------------- Python stacks
class PyStack(Event, tag="pys"):
    """One thread's Python stack as ``py-spy dump`` saw it at the end of a recording
    (tracer/record/pystacks.py). ``frames`` are "func (file:line)", innermost first; ``tid`` is the
    OS thread id (py-spy's ``os_thread_id``). A stack that could not be taken has ``tid`` 0,
    no frames and ``error`` saying why (py-spy not installed, permission denied, ...).
    ``files`` are the frames' source paths as the target sees them (empty in older traces)."""
    pid: int
    tid: int
    thread_name: str = ""
    frames: List[str] = field(default_factory=list)
    active: Optional[bool] = None
    owns_gil: Optional[bool] = None
    error: str = ""
    files: List[str] = field(default_factory=list)




# --------------------------------------------------------------------------- end-of-recording probes
class FutexOwner(Event, tag="fxo"):
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
    pid: int
    addr: int
    word: Optional[int] = None
    owner_tid: Optional[int] = None
    kind: str = "unknown"
    owner_pid: Optional[int] = None
    shared: bool = False
    waiters: List[int] = field(default_factory=list)
    why: str = ""


class SocketPeers(Event, tag="skp"):
    """The socket at the other end of each connected unix socket of ``pid`` (sock_diag).

    ``peers`` maps an inode of one of its sockets to the peer socket's inode (JSON turns the keys
    into strings: readers convert them back with int). ``outside`` maps a peer inode that no
    traced process holds to the pids (outside the tree) that hold it; a peer inode in neither
    belongs to a socket whose last holder closed it or exited."""
    pid: int
    peers: Dict[int, int] = field(default_factory=dict)
    outside: Dict[int, List[int]] = field(default_factory=dict)


class NcclRasStatus(Event, tag="ras"):
    """What NCCL's RAS service answered to ``VERBOSE STATUS`` at the end of a recording
    (record/probes/nccl_ras.py): the raw answer in ``fmt`` ("json" or "text"), parsed by
    analysis/job/nccl_ras.py. ``pid`` listens on ``host:port``; ``error`` says why there is no
    answer (refused, timed out)."""
    pid: int
    host: str = ""
    port: int = 0
    fmt: str = "json"
    text: str = ""
    error: str = ""


class SocketCounters(Event, tag="skc"):
    """The kernel's own counters of one TCP socket of ``pid`` (inet_diag's tcp_info, read by the
    proc backend: linux/tcpdiag.py): bytes and data segments sent and received since the socket
    was created, whatever call moved them. None where the kernel does not keep the counter."""
    pid: int
    fd: int
    target: str = ""
    bytes_sent: Optional[int] = None
    bytes_received: Optional[int] = None
    segs_out: Optional[int] = None
    segs_in: Optional[int] = None



# --------------------------------------------------------------------------- what was not seen
class ObserveError(Event, tag="oerr"):
    """Something a backend could not observe, saved so that ``analyze`` of the trace knows what
    the live report knew (tracer/analysis/rules/observed.py). ``source``: the backend; ``what``:
    "attach" (thread ``tid`` of ``pid``, or the whole process when ``tid`` is None), "syscall",
    "io", "fd", "stat" (those /proc files of ``pid``), "excluded" (never traced: hangtrace's
    own ancestor), "backend" (its own trouble; no pid); ``denied``: a permission refusal
    (EPERM, EACCES), not a target that was gone; ``why``: one line."""
    source: str
    what: str
    why: str = ""
    pid: Optional[int] = None
    tid: Optional[int] = None
    denied: bool = False


# --------------------------------------------------------------------------- the registry
EVENT_CLASSES: Dict[str, Type[Event]] = {}
_FIELDS: Dict[Type[Event], List[str]] = {}


def field_names(cls: Type[Event]) -> List[str]:
    return list(cls.__struct_fields__)


def register(*classes: Type[Event]) -> None:
    """Make event classes known to the trace format (their TAG and field names)."""
    for cls in classes:
        cls.TAG = cls.__struct_config__.tag
        EVENT_CLASSES[cls.TAG] = cls
        _FIELDS[cls] = field_names(cls)
        if cls.__name__ not in __all__:
            __all__.append(cls.__name__)


register(Syscall, FutexCall, PollCall, IoctlCall, WriteCall, ReadCall, WaitChild, ThreadSample,
         ThreadCpu, ProcessIO, ProcessInfo, ThreadStart, ProcessExec, ThreadExit, ProcessExit,
         SignalDelivered, Lost, RecordingEnd, GpuSample, PyStack, FutexOwner, SocketPeers,
         NcclRasStatus, SocketCounters, ObserveError)


# strace prints buffers as "..." literals (optionally followed by ...), and struct contents of
# read buffers as well; we keep the shape of the call but never the bytes.
_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"(?:\.\.\.)?')


def scrub_args(args: str) -> str:
    """Replace every string literal in strace argument text by ``"..."`` (paths too: callers that
    need one keep it in ``fd_target``)."""
    return _STRING_RE.sub('"..."', args) if '"' in args else args


def event_to_row(ev: Event) -> List[Any]:
    """Compact row [TAG, field values...] in field order (the header holds the names), as plain
    JSON values: what codec.encode_row writes, for writers that cannot use msgspec."""
    row: List[Any] = [ev.TAG]
    for name in _FIELDS[type(ev)]:
        v = getattr(ev, name)
        if name == "fds":
            v = [f.to_list() for f in v]
        elif name == "threads":
            v = {str(k): c for k, c in v.items()}
        row.append(list(v) if isinstance(v, tuple) else v)
    return row


def schema() -> Dict[str, List[str]]:
    return {tag: _FIELDS[cls] for tag, cls in EVENT_CLASSES.items()}
