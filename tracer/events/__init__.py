"""The typed event model shared by every backend, the trace file and the analyzer.

Contract:
- Backends (strace, proc, later ebpf) and importers produce only these classes; the analyzer
  consumes only these classes. Nothing here classifies: an event states what happened.
- Times are seconds since the epoch (float, CLOCK_REALTIME as strace -ttt prints it); durations
  are seconds. ``None`` means "not known" (a log without -T has no durations), never zero.
- No buffer contents: a write is a byte count, ``args`` is argument text with string and
  buffer literals removed (see ``scrub_args``).
- Each class is a msgspec Struct, array-like and tagged with its short ``TAG``; its trace row
  is ``[TAG, field, ...]`` in field order, its field types bounded (shapes.py) and checked by
  the reader, never at construction (``register``). fd kinds: ``FdInfo``.
"""
from __future__ import annotations

import re
from typing import Any, ClassVar, Dict, List, Optional, Tuple, Type

from msgspec import Struct, field, to_builtins

from .shapes import Int, Time

# the event classes join as they are registered (``register``, at the end)
__all__ = ["Event", "FdInfo", "EVENT_CLASSES", "register", "scrub_args", "STRING_LITERAL",
           "event_to_row", "schema", "field_names"]


class Event(Struct, array_like=True, gc=False, forbid_unknown_fields=True):
    """What every event is: ``ts`` and the fields of its class. ``gc=False``: an event holds
    only scalars and lists or dicts of them (never another object that could point back), so
    it is in no reference cycle and the cyclic collector need not visit millions of them.
    ``forbid_unknown_fields``: a row longer than its class is no row of it."""
    TAG: ClassVar[str] = "?"
    ts: Time


# --------------------------------------------------------------------------- syscalls
class Syscall(Event, tag="sc"):
    """One system call of one thread.

    ``ret`` is None when the call had not returned when the recording ended (the thread is still
    blocked in it: ``ongoing`` is True and ``dur`` is the time it had been blocked so far).
    ``err`` is the errno name (EAGAIN, ETIMEDOUT, ...) or None on success.
    ``fd``/``fd_kind``/``fd_target`` describe the first fd argument where there is one.
    """
    pid: Int
    tid: Int
    name: str
    args: str = ""
    ret: Optional[Int] = None
    err: Optional[str] = None
    dur: Optional[float] = None
    fd: Optional[Int] = None
    fd_kind: Optional[str] = None
    fd_target: Optional[str] = None
    ongoing: bool = False


class FutexCall(Syscall, tag="fx"):
    """futex(2): ``op`` without the PRIVATE/CLOCK flags (WAIT, WAKE, WAIT_BITSET, LOCK_PI, ...).

    ``timeout`` is seconds for a relative timeout, -1.0 for an absolute one, None for none.
    """
    op: str = ""
    addr: Int = 0
    val: Optional[Int] = None
    timeout: Optional[float] = None
    private: bool = False


class PollCall(Syscall, tag="pl"):
    """poll/ppoll/select/pselect6/epoll_wait/epoll_pwait(2): ``timeout`` seconds, None = infinite.

    ``fd_kinds`` are the kinds of the fds watched (for poll/select) or registered (epoll, when
    known). ``timed_out`` is True when it returned 0.
    """
    timeout: Optional[float] = None
    nfds: Optional[Int] = None
    fd_kinds: Tuple[str, ...] = ()
    timed_out: bool = False


class IoctlCall(Syscall, tag="io"):
    """ioctl(2) with its request number; ``request_name`` is a decoded name when one is known."""
    request: Int = 0
    request_name: Optional[str] = None


class WriteCall(Syscall, tag="wr"):
    """write/writev/pwrite*/send*/sendmsg/sendmmsg/sendfile: bytes only, never contents."""
    nbytes: Int = 0


class ReadCall(Syscall, tag="rd"):
    """read/readv/pread*/recv*/recvmsg/recvfrom/accept*: bytes (or new fd) only."""
    nbytes: Int = 0


class WaitChild(Syscall, tag="wt"):
    """wait4/waitid/waitpid: ``child`` is the pid waited for (-1 any child)."""
    child: Int = -1


# --------------------------------------------------------------------------- /proc samples
class ThreadSample(Event, tag="ts"):
    """One look at /proc/PID/task/TID: state letter, CPU ticks, wchan, the current syscall.

    ``syscall`` is /proc/.../syscall as read: "running", "-1 ..." (blocked, not in a syscall) or
    "NR arg0 ... arg5 sp pc". ``ticks_hz`` converts utime/stime to seconds. ``run_count`` is the
    number of times the thread ran (schedstat field 3) when known.
    """
    pid: Int
    tid: Int
    comm: str
    state: str
    utime: Int
    stime: Int
    wchan: str = ""
    syscall: str = ""
    run_ns: Optional[Int] = None
    wait_ns: Optional[Int] = None
    run_count: Optional[Int] = None
    ticks_hz: Int = 100


class ThreadCpu(Event, tag="cpu"):
    """On-CPU time of one thread measured in the kernel (sched_switch) between ``since`` and
    ``ts``: the eBPF backend's CPU accounting, finer than /proc ticks."""
    pid: Int
    tid: Int
    since: Time
    on_cpu_ns: Int
    switches: Int = 0


class ProcessIO(Event, tag="pio"):
    """/proc/PID/io counters (cumulative) at one instant; from the proc backend, the process's
    own: without the counters of the children it reaped (linux/reaped_io.py)."""
    pid: Int
    rchar: Int
    wchar: Int
    syscr: Int
    syscw: Int
    read_bytes: Int = 0
    write_bytes: Int = 0


# --------------------------------------------------------------------------- process table
class FdInfo(Struct, array_like=True, gc=False, forbid_unknown_fields=True):
    """One open fd: kind, target text, access mode ("r", "w", "rw"), position. The fd kinds
    (``fd_kind``): file, dir, pipe, fifo, tcp, udp, unix, netlink, socket, eventfd, epoll, timerfd,
    signalfd, pidfd, inotify, anon, tty, nvidia, nvidia-uvm, nvidiactl, fuse, dev, null, kernfs
    (a /proc or /sys file: the kernel's settings, never output), None."""
    fd: Int
    kind: Optional[str]
    target: str
    mode: str = ""
    pos: Optional[Int] = None
    inode: Optional[Int] = None

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
    ``threads_partial``: only some of its threads were traced (``strace -p TID`` without -f:
    "Process TID attached", one thread of a process that may have more): a wait for another
    thread of it may be ended by one the recording does not show.
    ``ns_pids``: its pids in the pid namespaces below the one ``pid`` is numbered in (a
    container's, seen from the host), outermost first: /proc/PID/status NSpid less its first
    number (linux/pidns.py); [] when it lives in that namespace.
    """
    pid: Int
    ppid: Int
    comm: str = ""
    cmdline: List[str] = field(default_factory=list)
    threads: Dict[Int, str] = field(default_factory=dict)
    fds: List[FdInfo] = field(default_factory=list)
    listening: List[str] = field(default_factory=list)
    state: str = ""
    exit_code: Optional[Int] = None
    start_time: Optional[Time] = None
    environ_rank: Optional[str] = None
    pid_unknown: bool = False
    threads_partial: bool = False
    ns_pids: List[Int] = field(default_factory=list)


class ThreadStart(Event, tag="tst"):
    """A new thread (clone with CLONE_THREAD) or a new process (fork/clone) seen by a backend."""
    pid: Int
    tid: Int
    parent_tid: Optional[Int] = None
    new_process: bool = False


class ProcessExec(Event, tag="ex"):
    pid: Int
    tid: Int
    filename: str = ""
    argv: List[str] = field(default_factory=list)


class ThreadExit(Event, tag="tx"):
    pid: Int
    tid: Int


class ProcessExit(Event, tag="px"):
    """A process ended: ``status`` is the exit status, or None when ``signal`` killed it."""
    pid: Int
    status: Optional[Int] = None
    signal: Optional[str] = None
    core_dumped: bool = False


class SignalDelivered(Event, tag="sig"):
    """A signal delivered to a thread; ``code`` is its si_code as strace prints it
    (``SEGV_MAPERR``, ``SI_USER``...: a code of the kernel's own, ``is_fault``, is a fault the
    thread's own instruction raised), "" where unknown."""
    pid: Int
    tid: Int
    signal: str = ""
    sender: Optional[Int] = None
    code: str = ""

    @property
    def is_fault(self) -> bool:
        """SIGSEGV, SIGBUS, SIGILL or SIGFPE raised by the thread's own instruction (its si_code
        is the fault's: SEGV_*, BUS_*, ILL_*, FPE_*), not sent by kill/tgkill."""
        return self.code[:4] in ("SEGV", "BUS_", "ILL_", "FPE_")


class Lost(Event, tag="lost"):
    """Events a backend could not record (overflow, unparsable lines): count and why."""
    count: Int
    reason: str = ""
    sample: str = ""


class RecordingEnd(Event, tag="end"):
    """Last record of a complete trace; a trace without it was cut short (truncated). ``ts``:
    when the trace was closed (after the end probes); ``window_end``: when the recording
    window closed, at its deadline (the header's start plus the seconds asked) or earlier when
    it ended early, before the backends' stop and the end probes (None in traces from before it
    was written, and from importers: then ``ts``). ``closed_at()`` is the window's end an analysis uses: what
    the end probes did after it is no observation of the targets over time."""
    reason: str = ""
    duration: float = 0.0
    events: Int = 0
    window_end: Optional[Time] = None

    def closed_at(self) -> float:
        """The recording window's end: ``window_end``, else (older traces) ``ts``."""
        return self.window_end if self.window_end is not None else self.ts


# --------------------------------------------------------------------------- GPU (NVML)
class GpuSample(Event, tag="gpu"):
    """One look at one GPU through NVML (tracer/gpu/nvml.py): utilization over the driver's last
    sample period (percent of time a kernel ran), memory in bytes, and the pids of the compute
    processes that hold a context on it. ``util_pct`` is None where NVML could not say.
    ``power_mw`` (board power draw), ``sm_clock_mhz``, ``power_limit_mw`` (the enforced limit)
    and ``sm_active_pct`` (GPM's SM activity since the previous sample, Hopper and newer: the
    share of SMs busy, which a spinning one-thread kernel keeps near 1%) are None in traces
    made before they were recorded, or where NVML does not report them. ``pid_mem``: the GPU
    memory each compute process uses (bytes; empty where NVML hides it, as in containers)."""
    gpu: Int
    uuid: str = ""
    util_pct: Optional[Int] = None
    mem_used: Optional[Int] = None
    mem_total: Optional[Int] = None
    pids: List[Int] = field(default_factory=list)
    power_mw: Optional[Int] = None
    sm_clock_mhz: Optional[Int] = None
    power_limit_mw: Optional[Int] = None
    sm_active_pct: Optional[float] = None
    pid_mem: Dict[Int, Int] = field(default_factory=dict)




# --------------------------------------------------------------------------- Python stacks
class PyStack(Event, tag="pys"):
    """One thread's Python stack as ``py-spy dump`` saw it at the end of a recording
    (tracer/record/pystacks.py). ``frames`` are "func (file:line)", innermost first; ``tid`` is the
    OS thread id (py-spy's ``os_thread_id``). A stack that could not be taken has ``tid`` 0,
    no frames and ``error`` saying why (py-spy not installed, permission denied, ...).
    ``files`` are the frames' source paths as the target sees them (empty in older traces)."""
    pid: Int
    tid: Int
    thread_name: str = ""
    frames: List[str] = field(default_factory=list)
    active: Optional[bool] = None
    owns_gil: Optional[bool] = None
    error: str = ""
    files: List[str] = field(default_factory=list)




# --------------------------------------------------------------------------- what was not seen
class ObserveError(Event, tag="oerr"):
    """Something a backend could not observe, saved so that ``analyze`` of the trace knows what
    the live report knew (tracer/analysis/threads/observed.py). ``source``: the backend; ``what``:
    "attach" (thread ``tid`` of ``pid``, or the whole process when ``tid`` is None), "syscall",
    "io", "fd", "stat" (those /proc files of ``pid``), "excluded" (never traced: hangtrace's
    own ancestor), "reused" (never traced: another process took ``pid`` after discovery),
    "backend" (its own trouble; no pid); ``denied``: a permission refusal
    (EPERM, EACCES), not a target that was gone; ``why``: one line."""
    source: str
    what: str
    why: str = ""
    pid: Optional[Int] = None
    tid: Optional[Int] = None
    denied: bool = False


# --------------------------------------------------------------------------- the registry
from .probes import (FileLock, FileMount, FutexOwner, NcclRasStatus, ServedConnections,  # noqa: E402
                     SocketCounters, SocketPeers)

EVENT_CLASSES: Dict[str, Type[Event]] = {}
_FIELDS: Dict[Type[Event], List[str]] = {}


def field_names(cls: Type[Any]) -> List[str]:
    """The fields of an event class (or FdInfo), in row order."""
    return list(cls.__struct_fields__)


def register(*classes: Type[Event]) -> None:
    """Make event classes known to the trace format (their TAG and field names). ``register`` sets
    ``TAG`` from the class's ``tag``; a row is ``[TAG, field, ...]`` in field order, and the order
    is written into the trace header, so a reader maps fields by name (tracefile/codec.py). The
    field types are what the reader checks a row against (in C, by msgspec), never at construction:
    making an event here costs what a slots dataclass costs. They are bounded there (shapes.py):
    every int 64 bits, every time a date, every nested value of its shape."""
    for cls in classes:
        cls.TAG = cls.__struct_config__.tag
        EVENT_CLASSES[cls.TAG] = cls
        _FIELDS[cls] = field_names(cls)
        if cls.__name__ not in __all__:
            __all__.append(cls.__name__)


register(Syscall, FutexCall, PollCall, IoctlCall, WriteCall, ReadCall, WaitChild, ThreadSample,
         ThreadCpu, ProcessIO, ProcessInfo, ThreadStart, ProcessExec, ThreadExit, ProcessExit,
         SignalDelivered, Lost, RecordingEnd, GpuSample, PyStack, FutexOwner, SocketPeers,
         NcclRasStatus, SocketCounters, ObserveError, FileLock, ServedConnections, FileMount)


# strace prints buffers as "..." literals with C escapes (... after one cut by -s: group 2); we
# keep the call's shape, never the bytes. One never closed runs to the end (buffer contents
# too). The lookahead makes the body possessive (3.11's *+ is buggy): one pass, as lines.c.
STRING_LITERAL = re.compile(r'"(?=((?:[^"\\]+|\\.)*))\1(?:"(\.\.\.)?|\\?\Z)', re.S)


def scrub_args(args: str) -> str:
    """Replace every string literal in strace argument text by ``"..."`` (paths too: callers that
    need one keep it in ``fd_target``)."""
    return STRING_LITERAL.sub('"..."', args) if '"' in args else args


def event_to_row(ev: Event) -> List[Any]:
    """Compact row [TAG, field values...] in field order (the header holds the names), as
    plain JSON values: what the trace line holds (tuples as lists, int keys as strings)."""
    return [list(v) if type(v) is tuple else v for v in to_builtins(ev, str_keys=True)]


def schema() -> Dict[str, List[str]]:
    return {tag: _FIELDS[cls] for tag, cls in EVENT_CLASSES.items()}
