"""Streaming accumulation of events into per-thread and per-process statistics.

Contract: ``Accumulator.feed(event)`` takes events in time order, one at a time, from a trace
being read or from a live queue (the same code path for both); memory is bounded by the number of
threads, fds and distinct syscall names, never by the number of events. ``finish(end_ts)`` closes
the recording window and returns a ``Recording``: everything the rules need, nothing classified.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .. import events as ev
from .kernel_counts import KernelCounts

# Writes of at most this many bytes to an eventfd, a self-pipe or a socketpair are wake-ups:
# libzmq/libuv write 8 bytes to an eventfd, asyncio and signal wakeup fds write 1 byte.
WAKEUP_MAX_BYTES = 8
MAX_FUTEX_ADDRS = 4096


@dataclass
class ThreadStats:
    pid: int
    tid: int
    comm: str = ""
    first_ts: Optional[float] = None
    last_ts: Optional[float] = None
    syscalls: Counter = field(default_factory=Counter)      # name -> completed calls
    syscall_time: float = 0.0                               # seconds inside syscalls
    durations_known: bool = True
    output_bytes: int = 0                                   # to files, pipes, sockets, ttys
    output_writes: int = 0
    output_targets: Counter = field(default_factory=Counter)  # target text -> bytes
    last_output_ts: Optional[float] = None                  # time of the last output write
    unjudged_writes: int = 0                                # small writes to unknown fds
    eventfd_writes: int = 0
    wakeup_writes: int = 0                                  # small writes to internal fds
    input_bytes: int = 0                                    # reads from sockets/pipes/files
    accepts: int = 0
    file_reads: int = 0
    futex_waits: int = 0
    futex_waits_timeout: int = 0
    futex_timeouts: int = 0                                 # ETIMEDOUT results
    futex_wakes: int = 0
    polls: int = 0
    poll_timeouts: int = 0                                  # returned 0 / ETIMEDOUT
    poll_infinite: int = 0
    poll_timeout_values: Counter = field(default_factory=Counter)  # seconds -> calls
    poll_fd_kinds: Counter = field(default_factory=Counter)
    sleeps: int = 0
    yields: int = 0
    ioctls: Counter = field(default_factory=Counter)        # (fd_kind, request, name) -> n
    ongoing: Optional[ev.Syscall] = None                    # still blocked in it at the end
    last_call: Optional[ev.Syscall] = None
    exited_at: Optional[float] = None
    started_at: Optional[float] = None                      # born during the recording
    # /proc samples
    samples: int = 0
    first_sample: Optional[ev.ThreadSample] = None
    last_sample: Optional[ev.ThreadSample] = None
    states: Counter = field(default_factory=Counter)
    cpu: Optional[ev.ThreadCpu] = None                      # kernel-measured CPU (eBPF)
    sample_calls: Counter = field(default_factory=Counter)  # /proc syscall text (no sp/pc)

    @property
    def total_syscalls(self) -> int:
        return sum(self.syscalls.values())

    @property
    def is_main(self) -> bool:
        return self.pid == self.tid


@dataclass
class ProcessStats:
    pid: int
    info: Optional[ev.ProcessInfo] = None
    first_info: Optional[ev.ProcessInfo] = None
    exited: Optional[ev.ProcessExit] = None
    exec_seen: bool = False
    first_io: Optional[ev.ProcessIO] = None
    last_io: Optional[ev.ProcessIO] = None
    signals: Counter = field(default_factory=Counter)


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
    roots: List[int] = field(default_factory=list)

    @property
    def window(self) -> float:
        return max(self.end - self.start, 1e-9)

    def threads_of(self, pid: int) -> List[ThreadStats]:
        return sorted((t for (p, _), t in self.threads.items() if p == pid), key=lambda t: t.tid)

    @property
    def has_syscalls(self) -> bool:
        return any(b.startswith("strace") or b == "ebpf" for b in self.backends)

    @property
    def has_samples(self) -> bool:
        return "proc" in self.backends


def _strip_sp_pc(text: str) -> str:
    """/proc/.../syscall ends with the stack and instruction pointers, which change; drop them."""
    parts = text.split()
    if len(parts) >= 9:
        return " ".join(parts[:7])
    return text


class Accumulator:
    """Feeds events into stats (module doc)."""

    def __init__(self, *, start: Optional[float] = None, backends: Optional[List[str]] = None,
                 capabilities: Optional[Dict[str, bool]] = None,
                 processes: Optional[List[ev.ProcessInfo]] = None,
                 roots: Optional[List[int]] = None) -> None:
        self.start = start
        self.last_ts: Optional[float] = start
        self.backends = list(backends or [])
        self.capabilities = dict(capabilities or {})
        self.threads: Dict[Tuple[int, int], ThreadStats] = {}
        self.processes: Dict[int, ProcessStats] = {}
        self.lost = 0
        self.lost_reasons: List[str] = []
        self.futex_wakers: Dict[int, Tuple[int, int]] = {}
        self.roots = list(roots or [])
        self._internal: Dict[int, set] = {}   # pid -> targets of fds internal to the process
        self._inodes: Dict[int, set] = {}     # pid -> inodes of its fds (cache)
        self.kernel = KernelCounts()          # eBPF ThreadCounts, merged (kernel_counts.py)
        syscall = self._syscall
        self._dispatch = {
            ev.Syscall: syscall, ev.FutexCall: syscall, ev.PollCall: syscall,
            ev.IoctlCall: syscall, ev.WriteCall: syscall, ev.ReadCall: syscall,
            ev.WaitChild: syscall, ev.ThreadSample: self._sample, ev.ProcessIO: self._on_io,
            ev.ProcessInfo: self._on_info, ev.ProcessExit: self._on_exit,
            ev.ThreadExit: self._on_thread_exit, ev.ThreadStart: self._on_thread_start,
            ev.ProcessExec: self._on_exec, ev.SignalDelivered: self._on_signal,
            ev.Lost: self._on_lost, ev.ThreadCpu: self._on_cpu,
            ev.ThreadCounts: lambda e: self.kernel.feed(e, self._thread(e.pid, e.tid),
                                                        self.is_internal),
        }
        for info in processes or []:
            self._process_info(info)

    # ------------------------------------------------------------------ helpers
    def _thread(self, pid: int, tid: int) -> ThreadStats:
        key = (pid, tid)
        t = self.threads.get(key)
        if t is None:
            t = ThreadStats(pid=pid, tid=tid)
            p = self.processes.get(pid)
            if p is not None and p.info is not None:
                t.comm = p.info.threads.get(tid, "")
            self.threads[key] = t
            self._process(pid)
        return t

    def _process(self, pid: int) -> ProcessStats:
        p = self.processes.get(pid)
        if p is None:
            p = self.processes[pid] = ProcessStats(pid=pid)
        return p

    def _process_info(self, info: ev.ProcessInfo) -> None:
        p = self._process(info.pid)
        if p.first_info is None:
            p.first_info = info
        # A later ProcessInfo may come from a process that already exited (no fds): keep the
        # richest table seen so far for pipe/socket resolution.
        if p.info is not None:
            keep = {}
            if not info.fds and p.info.fds:
                keep["fds"] = p.info.fds
            if not info.cmdline and p.info.cmdline:   # a zombie's cmdline reads empty
                keep["cmdline"] = p.info.cmdline
            if not info.threads and p.info.threads:
                keep["threads"] = p.info.threads
            if keep:
                info = ev.ProcessInfo(**{**_as_dict(info), **keep})
        p.info = info
        for tid, comm in info.threads.items():
            t = self._thread(info.pid, tid)
            if comm:
                t.comm = comm
        self._internal[info.pid] = _internal_targets(info.fds)

    def is_internal(self, pid: int, target: Optional[str]) -> bool:
        """True when both ends of the pipe/socketpair behind ``target`` are in process ``pid``."""
        if not target:
            return False
        internal = self._internal.get(pid)
        if internal and target in internal:
            return True
        # strace -yy prints socketpairs as UNIX-STREAM:[a->b]: internal if both inodes are ours.
        if "->" in target and target.startswith("UNIX"):
            inside = target[target.find("[") + 1:target.rfind("]")]
            a, _, b = inside.partition("->")
            inodes = self._inodes.get(pid)
            if inodes is None:
                info = self.processes.get(pid)
                inodes = {f.inode for f in info.info.fds} if info and info.info else set()
                self._inodes[pid] = inodes
            return a.isdigit() and b.isdigit() and int(a) in inodes and int(b) in inodes
        return False

    # ------------------------------------------------------------------ feeding
    def feed(self, e: ev.Event) -> None:
        ts = e.ts
        if ts:
            if self.last_ts is None or ts > self.last_ts:
                self.last_ts = ts
            if self.start is None:
                self.start = ts
        handler = self._dispatch.get(type(e))
        if handler is not None:
            handler(e)

    def _on_io(self, e: ev.ProcessIO) -> None:
        p = self._process(e.pid)
        if p.first_io is None:
            p.first_io = e
        p.last_io = e

    def _on_info(self, e: ev.ProcessInfo) -> None:
        self._inodes.pop(e.pid, None)
        self._process_info(e)

    def _on_exit(self, e: ev.ProcessExit) -> None:
        self._process(e.pid).exited = e
        for t in self.threads_of(e.pid):
            if t.exited_at is None:
                t.exited_at = e.ts

    def _on_thread_exit(self, e: ev.ThreadExit) -> None:
        self._thread(e.pid, e.tid).exited_at = e.ts

    def _on_thread_start(self, e: ev.ThreadStart) -> None:
        self._thread(e.pid, e.tid).started_at = e.ts

    def _on_exec(self, e: ev.ProcessExec) -> None:
        self._process(e.pid).exec_seen = True

    def _on_signal(self, e: ev.SignalDelivered) -> None:
        self._process(e.pid).signals[e.signal] += 1

    def _on_cpu(self, e: ev.ThreadCpu) -> None:
        t = self._thread(e.pid, e.tid)
        if t.cpu is None or e.ts - e.since >= t.cpu.ts - t.cpu.since:
            t.cpu = e

    def _on_lost(self, e: ev.Lost) -> None:
        self.lost += e.count
        if e.reason and e.reason not in self.lost_reasons:
            self.lost_reasons.append(e.reason)

    def threads_of(self, pid: int) -> List[ThreadStats]:
        return [t for (p, _), t in self.threads.items() if p == pid]

    def _syscall(self, e: ev.Syscall) -> None:
        t = self.threads.get((e.pid, e.tid)) or self._thread(e.pid, e.tid)
        if t.first_ts is None:
            t.first_ts = e.ts
        t.last_ts = e.ts
        if e.ongoing:
            t.ongoing = e
            return
        t.last_call = e
        t.syscalls[e.name] += 1
        if e.dur is None:
            t.durations_known = False
        else:
            t.syscall_time += e.dur
        kind = type(e)
        if kind is ev.Syscall:
            if e.name in ("nanosleep", "clock_nanosleep"):
                t.sleeps += 1
            elif e.name == "sched_yield":
                t.yields += 1
        elif kind is ev.WriteCall:
            self._write(t, e)  # type: ignore[arg-type]
        elif kind is ev.FutexCall:
            self._futex(t, e)  # type: ignore[arg-type]
        elif kind is ev.PollCall:
            self._poll(t, e)  # type: ignore[arg-type]
        elif kind is ev.IoctlCall:
            t.ioctls[(e.fd_kind or "?", e.request, e.request_name or "")] += 1  # type: ignore
        elif kind is ev.ReadCall:
            self._read(t, e)  # type: ignore[arg-type]

    @staticmethod
    def _poll(t: ThreadStats, e: ev.PollCall) -> None:
        t.polls += 1
        if e.timeout is None:
            t.poll_infinite += 1
        else:
            t.poll_timeout_values[round(e.timeout, 3)] += 1
        if e.timed_out or e.err == "ETIMEDOUT":
            t.poll_timeouts += 1
        for k in e.fd_kinds:
            t.poll_fd_kinds[k] += 1

    def _read(self, t: ThreadStats, e: ev.ReadCall) -> None:
        if e.name.startswith("accept"):
            if e.ret is not None and e.ret >= 0:
                t.accepts += 1
        elif e.ret and e.ret > 0 and e.fd_kind != "eventfd" \
                and not self.is_internal(e.pid, e.fd_target):
            t.input_bytes += e.ret
            if e.fd_kind == "file":
                t.file_reads += 1

    def _write(self, t: ThreadStats, e: ev.WriteCall) -> None:
        n = max(e.nbytes, 0)
        if e.err is not None:
            return
        kind = e.fd_kind
        if kind == "eventfd":
            t.eventfd_writes += 1
            return
        if kind is None:
            # No fd decoration (strace without -y): an eventfd write always moves exactly 8
            # bytes and a wake-up pipe write 1, so only larger writes are surely output.
            if n > WAKEUP_MAX_BYTES:
                self._output(t, e, n)
            else:
                t.unjudged_writes += 1
            return
        if n <= WAKEUP_MAX_BYTES and kind in ("pipe", "unix", "socket", "fifo") \
                and self.is_internal(e.pid, e.fd_target):
            t.wakeup_writes += 1
            return
        if kind in ev.OUTPUT_FD_KINDS:
            self._output(t, e, n)

    @staticmethod
    def _output(t: ThreadStats, e: ev.WriteCall, n: int) -> None:
        t.output_bytes += n
        t.output_writes += 1
        t.last_output_ts = e.ts
        label = f"fd {e.fd} ({e.fd_target})" if e.fd_target else f"fd {e.fd}"
        if len(t.output_targets) < 32 or label in t.output_targets:
            t.output_targets[label] += n

    def _futex(self, t: ThreadStats, e: ev.FutexCall) -> None:
        op = e.op
        if op.startswith("WAIT") or op in ("LOCK_PI", "LOCK_PI2", "WAIT_REQUEUE_PI"):
            t.futex_waits += 1
            if e.timeout is not None:
                t.futex_waits_timeout += 1
            if e.err == "ETIMEDOUT":
                t.futex_timeouts += 1
        elif op.startswith("WAKE") or op in ("UNLOCK_PI", "REQUEUE", "CMP_REQUEUE"):
            t.futex_wakes += 1
            if e.ret and e.ret > 0 and (e.addr in self.futex_wakers
                                        or len(self.futex_wakers) < MAX_FUTEX_ADDRS):
                self.futex_wakers[e.addr] = (t.pid, t.tid)

    def _sample(self, s: ev.ThreadSample) -> None:
        t = self._thread(s.pid, s.tid)
        if s.comm:
            t.comm = s.comm
        t.samples += 1
        if t.first_sample is None:
            t.first_sample = s
        t.last_sample = s
        t.states[s.state] += 1
        if len(t.sample_calls) < 64:
            t.sample_calls[_strip_sp_pc(s.syscall)] += 1

    # ------------------------------------------------------------------ finish
    def finish(self, end: Optional[float] = None, *, truncated: bool = False) -> Recording:
        start = self.start if self.start is not None else 0.0
        stop = end if end is not None else (self.last_ts if self.last_ts is not None else start)
        return Recording(start=start, end=max(stop, start), threads=self.threads,
                         processes=self.processes, backends=self.backends,
                         capabilities=self.capabilities, lost=self.lost,
                         lost_reasons=self.lost_reasons, truncated=truncated,
                         futex_wakers=self.futex_wakers, roots=self.roots)


def _as_dict(info: ev.ProcessInfo) -> dict:
    return {f: getattr(info, f) for f in ev.field_names(ev.ProcessInfo)}


def _internal_targets(fds: List[ev.FdInfo]) -> set:
    """Pipe/socket targets that appear on two fds of one process (a self-pipe or socketpair)."""
    seen: Counter = Counter(f.target for f in fds if f.kind in ("pipe", "fifo"))
    return {target for target, n in seen.items() if n >= 2}
