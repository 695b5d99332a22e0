"""Per-thread and per-process statistics: what the accumulator keeps and the rules read.

Contract: plain data. ``ThreadStats`` and ``ProcessStats`` are filled by accumulate.Accumulator
in time order (memory bounded by threads, fds and distinct call names); ``Recording`` is what
``Accumulator.finish`` hands to the rules: the window, the stats, and what the input lacked.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ... import events as ev
from .traffic import FdTraffic


_NO_RETURN = frozenset({"exit", "exit_group", "execve", "execveat", "rt_sigreturn",
                        "restart_syscall"})     # calls that end without a result of their own



# An empty Counter, made without Counter.__init__ (which only calls update(): 0.66 us against
# 0.1 us) and without a Python frame (a partial). A fork storm's 40,000 threads make half a
# million of them.
new_counter: Callable[[], Counter] = partial(Counter.__new__, Counter)


# slots: 67 fields filled into an instance dict that grows as it goes made one ThreadStats
# 2.6 us (1/10 of a 20,000-process analysis); 1.2 us in slots, with new_counter's partial.
@dataclass(slots=True)
class ThreadStats:
    pid: int
    tid: int
    comm: str = ""
    first_ts: Optional[float] = None
    last_ts: Optional[float] = None
    syscalls: Counter = field(default_factory=new_counter)      # name -> completed calls
    failures: Counter = field(default_factory=new_counter)      # (name, errno) -> failed calls
    syscall_time: float = 0.0                               # seconds inside syscalls
    durations_known: bool = True
    # Output: writes to files, pipes and ttys as they come; socket traffic per fd, judged at
    # finish() (a keep-alive is not output); the totals below are set by finish().
    plain_bytes: int = 0
    plain_writes: int = 0
    plain_targets: Counter = field(default_factory=new_counter)  # target text -> bytes
    plain_first_ts: Optional[float] = None
    plain_last_ts: Optional[float] = None
    ncalls: int = 0                                          # completed calls, in order
    tail_name: str = ""                     # the run of one call (name and result) that the
    tail_ret: Optional[int] = None          # completed calls end in, and its length
    tail_run: int = 0
    tail_since: float = 0.0                 # the start of the run's first call
    calls_at_output: int = 0                                 # ncalls at its last plain output
    output_stale: bool = False                               # finish(): output long ago only
    output_at: int = 0                      # finish(): ncalls at its last output, socket too
    stopped_by: Optional[str] = None        # strace saw it stopped (SIGSTOP...), no SIGCONT since
    # its last fault (SIGSEGV...: signal, si_code, rt_sigreturn calls before it): still in its
    # handler while it has made no rt_sigreturn since (log_owners.py)
    fault: Optional[Tuple[str, str, int]] = None
    stopped_calls: int = 0                  # ncalls when it stopped (a later call: it ran again)
    sockets: Dict[int, FdTraffic] = field(default_factory=dict)  # fd -> its traffic
    closed_sockets: List[FdTraffic] = field(default_factory=list)  # lifetimes that ended
    connection_at: int = 0                  # ncalls at its last connection accepted or made
    connection_ts: Optional[float] = None   # ... and when
    connects: int = 0                                        # connections made (ret 0/EINPROGRESS)
    connect_targets: Counter = field(default_factory=new_counter)
    null_writes: int = 0                                     # to /dev/null: not output
    written_bytes: int = 0                                   # every byte written or sent
    output_bytes: int = 0                                    # finish(): plain + socket output
    output_writes: int = 0
    output_targets: Counter = field(default_factory=new_counter)
    last_output_ts: Optional[float] = None
    keepalives: List[FdTraffic] = field(default_factory=list)  # finish(): heartbeat fds
    unjudged_writes: int = 0                                # small writes to unknown fds
    eventfd_writes: int = 0
    wakeup_writes: int = 0                                  # small writes to internal fds
    input_bytes: int = 0                                    # reads from sockets/pipes/files
    input_at: Optional[int] = 0             # ncalls at its last input read (None: the place is
    input_ts: Optional[float] = None        # unknown, kernel counts), and when
    accepts: int = 0
    file_reads: int = 0
    futex_waits: int = 0
    futex_waits_timeout: int = 0
    futex_timeouts: int = 0                                 # ETIMEDOUT results
    futex_wakes: int = 0
    polls: int = 0
    poll_timeouts: int = 0                                  # returned 0 / ETIMEDOUT
    poll_infinite: int = 0
    poll_timeout_values: Counter = field(default_factory=new_counter)  # seconds -> calls
    poll_fd_kinds: Counter = field(default_factory=new_counter)
    sleeps: int = 0
    yields: int = 0
    ioctls: Counter = field(default_factory=new_counter)        # (fd_kind, request, name) -> n
    ongoing: Optional[ev.Syscall] = None                    # still blocked in it at the end
    last_call: Optional[ev.Syscall] = None
    # its last futex wait without timeout that a signal interrupted (ERESTARTSYS, EINTR)
    interrupted: Optional[ev.Syscall] = None
    # its last wait without a time limit that a signal cut (ERESTART*, EINTR) and that it
    # entered again after the handler: how many times in a row, the calls made by then, and
    # the most calls between two cuts (the handler's work). calls.CallFeed._note_restart
    restarted: Optional[ev.Syscall] = None
    restarts: int = 0
    calls_at_restart: int = 0
    restart_gap: int = 0
    exited_at: Optional[float] = None
    started_at: Optional[float] = None                      # born during the recording
    # /proc samples
    samples: int = 0
    first_sample: Optional[ev.ThreadSample] = None
    last_sample: Optional[ev.ThreadSample] = None
    states: Counter = field(default_factory=new_counter)
    cpu: Optional[ev.ThreadCpu] = None                      # kernel-measured CPU (eBPF)
    sample_calls: Counter = field(default_factory=new_counter)  # /proc syscall text (no sp/pc)

    @property
    def total_syscalls(self) -> int:
        return sum(self.syscalls.values())

    @property
    def is_main(self) -> bool:
        return self.pid == self.tid

    @property
    def never_returned(self) -> Optional[ev.Syscall]:
        """Its last call, when that call never returned (no result: the thread was killed or
        the process ended inside it, as strace's "= ?" or an unfinished call at a kill)."""
        c = self.last_call
        if c is None or c.ret is not None or c.err is not None or c.name in _NO_RETURN:
            return None
        return c


@dataclass
class TcpTrack:
    """What the kernel's counters of one TCP socket showed (events.SocketCounters): the first
    and last reading, and in how many readings data had been sent since the one before."""
    fd: int
    target: str
    first: ev.SocketCounters
    last: ev.SocketCounters
    send_readings: int = 0

    def delta(self, name: str) -> int:
        a, b = getattr(self.first, name), getattr(self.last, name)
        return max(0, b - a) if a is not None and b is not None else 0


@dataclass(slots=True)
class ProcessStats:
    pid: int
    info: Optional[ev.ProcessInfo] = None
    first_info: Optional[ev.ProcessInfo] = None
    exited: Optional[ev.ProcessExit] = None
    exit_order: int = 0                 # 1 for the first process seen exit, 2 for the next ...
    exec_seen: bool = False
    first_io: Optional[ev.ProcessIO] = None
    last_io: Optional[ev.ProcessIO] = None
    signals: Counter = field(default_factory=new_counter)
    tcp: Dict[int, TcpTrack] = field(default_factory=dict)     # fd -> kernel TCP counters
    served: Counter = field(default_factory=new_counter)   # port -> connections taken (sock_diag)
    log_lines: Dict[int, Any] = field(default_factory=dict)   # fd -> LogLines (probes/log_lines)
    memory: Dict[str, Any] = field(default_factory=dict)      # phase -> MemoryProgress
    stack_samples: Dict[int, Any] = field(default_factory=dict)  # tid -> StackSamples
    driver_calls: Dict[int, Any] = field(default_factory=dict)   # tid -> CudaDriverCalls


# errnos that are an event loop's normal answers, not a call that failed
NOT_FAILURES = frozenset({"EAGAIN", "EWOULDBLOCK", "ETIMEDOUT", "EINTR", "EINPROGRESS",
                          "ERESTARTSYS", "ERESTARTNOHAND", "ERESTART_RESTARTBLOCK",
                          "ERESTARTNOINTR", "ECHILD", "ENOTTY", "ENOSYS"})
MAX_FAILURE_KINDS = 32


def count_poll(t: ThreadStats, e: ev.PollCall) -> None:
    """A poll/epoll/select call of ``t``: its timeout, whether it timed out, its fds' kinds."""
    t.polls += 1
    if e.timeout is None:
        t.poll_infinite += 1
    else:
        t.poll_timeout_values[round(e.timeout, 3)] += 1
    if e.timed_out or e.err == "ETIMEDOUT":
        t.poll_timeouts += 1
    for k in e.fd_kinds:
        t.poll_fd_kinds[k] += 1


def count_failure(t: ThreadStats, name: str, err: str) -> None:
    """One more failed call ``name`` of ``t`` with ``err``, unless the errno is an event loop's
    normal answer (``NOT_FAILURES``); at most ``MAX_FAILURE_KINDS`` kinds a thread."""
    if err not in NOT_FAILURES and (len(t.failures) < MAX_FAILURE_KINDS
                                    or (name, err) in t.failures):
        t.failures[(name, err)] += 1


@dataclass
class Recording:
    """What the rules see: the window, per-thread and per-process stats, and what was missing."""
    start: float
    end: float
    threads: Dict[Tuple[int, int], ThreadStats]
    processes: Dict[int, ProcessStats]
    backends: List[str]
    capabilities: Dict[str, bool]
    lost: int = 0
    lost_reasons: List[str] = field(default_factory=list)
    truncated: bool = False
    futex_wakers: Dict[int, Tuple[int, int]] = field(default_factory=dict)  # addr -> (pid, tid)
    # file locks the log showed taken and not released: file -> (pid, tid) (imports: no /proc)
    lock_holders: Dict[str, Tuple[int, int]] = field(default_factory=dict)
    roots: List[int] = field(default_factory=list)
    # What backends could not observe, by (pid, tid, what): analysis/threads/observed.py reads it.
    observe_errors: Dict[tuple, ev.ObserveError] = field(default_factory=dict)
    # NVML's readings per GPU (accumulate/gpu.py), set by the pipeline before the thread rules
    gpus: Dict[int, Any] = field(default_factory=dict)
    # a log without times: (seconds, clock) its program's own clock readings span
    program_clock: Optional[Tuple[float, str]] = None
    # threads by pid, built at the first threads_of (again when threads were added since)
    _by_pid: Optional[Tuple[int, Dict[int, List[ThreadStats]]]] = field(
        default=None, repr=False, compare=False)
    _syscalls: Optional[bool] = field(default=None, repr=False, compare=False)

    @property
    def window(self) -> float:
        return max(self.end - self.start, 1e-9)

    def threads_of(self, pid: int) -> List[ThreadStats]:
        """The threads of ``pid`` by tid (an index: a job has thousands of threads)."""
        if self._by_pid is None or self._by_pid[0] != len(self.threads):
            index: Dict[int, List[ThreadStats]] = {}
            for (p, _), t in self.threads.items():
                index.setdefault(p, []).append(t)
            for ts in index.values():
                ts.sort(key=lambda t: t.tid)
            self._by_pid = (len(self.threads), index)
        return list(self._by_pid[1].get(pid, ()))

    @property
    def has_syscalls(self) -> bool:
        """(asked per thread by the rules and the report: worked out once, at the first ask)"""
        if self._syscalls is None:
            self._syscalls = syscall_backends(self.backends)
        return self._syscalls

    @property
    def has_samples(self) -> bool:
        return "proc" in self.backends


def syscall_backends(backends: Sequence[str]) -> bool:
    """Whether a recording made with ``backends`` saw system calls (strace, an strace log,
    eBPF), not only /proc samples."""
    return any(b.startswith("strace") or b == "ebpf" for b in backends)


@lru_cache(maxsize=4096)        # a blocked thread shows the same line in every sample
def strip_sp_pc(text: str) -> str:
    """/proc/.../syscall ends with the stack and instruction pointers, which change; drop them."""
    parts = text.split()
    if len(parts) >= 9:
        return " ".join(parts[:7])
    return text
