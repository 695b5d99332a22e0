"""The predicates of ``hangtrace watch``: progress between two cheap looks at a watched tree.

Contract: pure functions of two ``TreeLook``s (what /proc, sock_diag and NVML showed of the tree
at two instants; tracer/record/watch_looks.py takes them). ``progress_signals(a, b)`` returns the
signs of progress between them, each with its kind, pid and a sentence a person would cite; an
empty list is silence. A process that is new in ``b``, or whose pid was reused, has no deltas
yet. Each kind is one rule, the analyzer's own where it has one: ``output``, ``sent``,
``accepted``, ``work``, ``memory``, ``gpu`` (each function's docstring says what counts).
``stack_signals(samples)``: a ``stacks`` signal for each thread whose Python code moves.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

from .. import events as ev
from ..events.evidence import CudaDriverCalls, LogLines
from ..linux.tcpdiag import TcpSock, accepted_since, on_listening_port
from .accumulate.accumulator import ProcessStats
from .accumulate.gpu import BUSY_UTIL, IDLE_UTIL, GpuAccumulator
from .accumulate.io_class import proc_input_bytes
from ..events.stacks import StackSamples
from .progress.gpu import driver_work, gpu_work
from .progress.stacks import code_moves
from .progress.log_lines import heartbeat_fds
from .progress.memory import LOAD_FEW_FAULTS, LOAD_FEW_RATE, LOAD_MIN_FAULT_RATE, LOAD_MIN_RATE
from .progress.reports import stream_is_report
from .threads.output import process_output_bytes
from .accumulate.traffic import from_counters as counters_traffic
from .accumulate.traffic import keepalive

__all__ = ["ProcessLook", "TreeLook", "Signal", "progress_signals", "stack_signals",
           "driver_signals", "WORK_MIN_CPU",
           "WORK_MIN_INPUT_RATE"]

WORK_MIN_CPU = 0.01             # fraction of one core (as threads.output.rule_varied_work)
WORK_MIN_INPUT_RATE = 256 << 10  # bytes a second of input beyond wake-up reads


@dataclass(frozen=True)
class ProcessLook:
    """One process at one instant: /proc/PID/stat (all threads summed) and /proc/PID/io."""
    pid: int
    start_time: int                 # stat field 22 (ticks after boot): tells a reused pid
    cpu_ticks: int                  # utime + stime of every thread
    io: Optional[ev.ProcessIO] = None
    ticks_hz: int = 100
    comm: str = ""
    state: str = ""
    threads: int = 0
    # {fd: (path, position)} of the regular files it writes (stdout or a log among them)
    positions: Dict[int, Tuple[str, int]] = field(default_factory=dict)
    # {fd: LogLines} of what those files gained since the previous look, as line templates
    lines: Dict[int, LogLines] = field(default_factory=dict)
    faults: int = 0                 # minor + major page faults of every thread (stat 10, 12)
    rss_bytes: int = 0              # resident size (stat 24)


@dataclass
class TreeLook:
    """The watched tree at one instant (module doc)."""
    ts: float
    processes: Dict[int, ProcessLook] = field(default_factory=dict)
    # Every TCP socket of the network namespace by cookie (None: not dumped), so that a socket
    # missing from the earlier look is one that is new since then.
    sockets: Optional[Dict[int, TcpSock]] = None
    owners: Dict[int, int] = field(default_factory=dict)    # inode of a tree's socket -> pid
    listening: FrozenSet[Tuple[str, int]] = frozenset()     # (address, port) the tree listens on
    gpus: List[ev.GpuSample] = field(default_factory=list)


@dataclass(frozen=True)
class Signal:
    kind: str                       # output, sent, accepted, work, gpu
    pid: Optional[int]
    text: str


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.0f} B"


def _same(a: ProcessLook, b: ProcessLook) -> bool:
    return a.start_time == b.start_time


def advanced_files(a: ProcessLook, b: ProcessLook) -> Dict[str, int]:
    """{path: bytes} of the files whose position advanced between the looks on the same fd: output
    however small its writes (the analyzer's fd-position rule, threads/output.py), unless their
    new lines are a heartbeat."""
    out: Dict[str, int] = {}
    beats = heartbeat_fds(b.lines.values())
    for fd, (path, pos) in b.positions.items():
        old = a.positions.get(fd)
        if old is not None and old[0] == path and pos > old[1] and fd not in beats:
            out[path] = out.get(path, 0) + pos - old[1]
    return out


def _heartbeat_bytes(a: ProcessLook, b: ProcessLook) -> int:
    beats = heartbeat_fds(b.lines.values())
    return sum(pos - a.positions[fd][1] for fd, (path, pos) in b.positions.items()
               if fd in beats and fd in a.positions and a.positions[fd][0] == path
               and pos > a.positions[fd][1])


def _output(a: ProcessLook, b: ProcessLook) -> Optional[Signal]:
    """``output``: a regular file the process writes (stdout or stderr sent to a file, a log)
    whose position advanced, however small the writes (PYTHONUNBUFFERED prints a line per write),
    unless its new lines are a heartbeat (progress/log_lines.py ``heartbeat_fds``: the
    analyzer's own judgement); else bytes written beyond wake-up writes, by
    ``threads.output.process_output_bytes`` (the analyzer's /proc rule: /proc/PID/io wchar
    beyond 8 bytes per write call, so eventfd pokes and self-pipe wake-ups are not output):
    pipes, ttys, write(2) on sockets, unless no faster than a timer's reports
    (progress/reports.stream_is_report: a stats line every 2 s is no progress)."""
    files = advanced_files(a, b)
    if files:
        path, n = max(files.items(), key=lambda kv: kv[1])
        more = f" and {len(files) - 1} other file(s)" if len(files) > 1 else ""
        return Signal("output", b.pid, f"pid {b.pid} ({b.comm}) wrote {_bytes(n)} to {path}"
                      f"{more} (its position advanced: fdinfo)")
    if a.io is None or b.io is None:
        return None
    n = process_output_bytes(ProcessStats(pid=b.pid, first_io=a.io, last_io=b.io)) \
        - _heartbeat_bytes(a, b)
    if n <= 0 or stream_is_report(n, b.io.ts - a.io.ts):
        return None
    return Signal("output", b.pid, f"pid {b.pid} ({b.comm}) wrote {_bytes(n)} beyond wake-up "
                  f"writes in {b.io.syscw - a.io.syscw} write calls (/proc io)")


def _work(a: ProcessLook, b: ProcessLook, dt: float) -> Optional[Signal]:
    """``work``: the process ran (CPU at least ``WORK_MIN_CPU`` of a core) while reading input
    beyond wake-up reads at ``WORK_MIN_INPUT_RATE`` or more (rchar beyond 8 bytes per read call,
    or reads from storage): /proc's counterpart of the analyzer's ``varied-work`` (a thread that
    reads input and runs varied syscalls). A spin, a poll loop and eventfd wake-ups read no
    input."""
    cpu = (b.cpu_ticks - a.cpu_ticks) / max(b.ticks_hz, 1) / dt
    if cpu < WORK_MIN_CPU or a.io is None or b.io is None:
        return None
    beyond = proc_input_bytes(b.io.rchar - a.io.rchar, b.io.syscr - a.io.syscr)
    storage = b.io.read_bytes - a.io.read_bytes
    got = max(beyond, storage)
    if got < WORK_MIN_INPUT_RATE * dt:
        return None
    return Signal("work", b.pid, f"pid {b.pid} ({b.comm}) ran {cpu * 100:.0f}% of a CPU while "
                  f"reading {_bytes(got)} of input ({_bytes(got / dt)}/s, /proc io)")


def _memory(a: ProcessLook, b: ProcessLook, dt: float) -> Optional[Signal]:
    """``memory``: the process faulted pages in while memory came in at ``LOAD_MIN_RATE`` (reads
    from storage, resident growth): the analyzer's ``loads-memory``, a loader bringing weights in
    through mmap. ``progress.memory.LOAD_MIN_FAULT_RATE`` faults a second, or, as a fault maps
    up to a large folio of a file, at least ``LOAD_FEW_FAULTS`` while ``LOAD_FEW_RATE`` came in."""
    faults = b.faults - a.faults
    storage = b.io.read_bytes - a.io.read_bytes if a.io is not None and b.io is not None else 0
    grew = b.rss_bytes - a.rss_bytes
    came = max(storage, grew)
    if came < LOAD_MIN_RATE * dt or faults < min(LOAD_MIN_FAULT_RATE * dt, LOAD_FEW_FAULTS) \
            or (faults < LOAD_MIN_FAULT_RATE * dt and came < LOAD_FEW_RATE * dt):
        return None
    how = "read from storage" if storage >= grew else "grew its resident size"
    return Signal("memory", b.pid, f"pid {b.pid} ({b.comm}) faulted memory in ({faults / dt:.0f} "
                  f"page faults/s) and {how} by {_bytes(came)} ({_bytes(came / dt)}/s)")


def _endpoint(s: TcpSock) -> str:
    return f"{s.local[0]}:{s.local[1]}->{s.remote[0]}:{s.remote[1]}"


def _tree_sockets(look: TreeLook) -> List[TcpSock]:
    """The tree's TCP sockets: those its fds hold, and connections it accepted on its listening
    ports since its fd tables were last read (a file refers to them)."""
    socks = look.sockets or {}
    return [s for s in socks.values() if s.inode and (
        s.inode in look.owners or (s.state != "LISTEN" and on_listening_port(s, look.listening)))]


def _sent(a: TreeLook, b: TreeLook, dt: float) -> List[Signal]:
    """``sent``: bytes a peer acknowledged on a TCP socket of the tree (tcp_info; send(2) is not in
    wchar), unless the socket only chattered: small messages at a slow period, judged by
    ``traffic.keepalive``, the analyzer's own rule (heartbeats, keep-alive and ping frames)."""
    if a.sockets is None or b.sockets is None:
        return []
    out: List[Signal] = []
    for s in _tree_sockets(b):
        if s.bytes_acked is None:
            continue
        old = a.sockets.get(s.cookie)
        # A socket new since look a counts from its start (a client's bytes_acked counts its SYN).
        base, segs0 = (old.bytes_acked or 0, old.data_segs_out or 0) if old else (1, 0)
        sent = s.bytes_acked - base
        if sent <= 0:
            continue
        segs = (s.data_segs_out or 0) - segs0
        got = (s.bytes_received or 0) - ((old.bytes_received or 0) if old else 0)
        got_segs = (s.data_segs_in or 0) - ((old.data_segs_in or 0) if old else 0)
        if s.data_segs_out is not None and segs > 0 and keepalive(
                counters_traffic(0, "", segs, sent, max(0, got_segs), max(0, got)),
                max(dt, 1.0)):
            continue                     # keep-alive chatter: the analyzer's own rule
        pid = b.owners.get(s.inode)
        who = f"pid {pid}" if pid is not None else "the tree"
        out.append(Signal("sent", pid, f"{who} sent {_bytes(sent)} on TCP {_endpoint(s)}"
                          + (f" in {segs} data segments" if s.data_segs_out is not None else "")))
    return out


def _accepted(a: TreeLook, b: TreeLook) -> List[Signal]:
    """``accepted``: a connection that is new since the last look on a port the tree listens on and
    that the tree took out of the accept queue (a file refers to it), or closed from its side
    (TIME_WAIT): the analyzer's ``served-connections``. A connection accepted and closed by the
    client between two looks, with nothing sent, leaves no trace in the kernel's tables: such a
    server shows its progress by what it sends or logs."""
    if a.sockets is None or b.sockets is None or not b.listening:
        return []
    ports = accepted_since(a.sockets, b.sockets, b.listening)
    return [Signal("accepted", None, f"the tree accepted {n} new connection"
                   f"{'s' if n > 1 else ''} on port {port}") for port, n in sorted(ports.items())]


def _gpu_works(b: TreeLook) -> Optional[Signal]:
    """A GPU the tree uses does real work at look ``b`` (power or SM activity)."""
    acc = GpuAccumulator()
    for g in b.gpus:
        acc.feed(g)
    for pid in sorted(b.processes):
        text = gpu_work(acc.gpus, pid)
        if text:
            return Signal("gpu", pid, f"pid {pid}: {text}")
    return None


def _gpu(a: TreeLook, b: TreeLook) -> List[Signal]:
    """``gpu``: a GPU the tree uses does real work by ``progress.gpu.gpu_work`` (GPM's SM activity,
    else board power against its limit: the analyzer's ``gpu-computes``); or, where NVML gives
    neither, its utilization strictly between ``accumulate.gpu.IDLE_UTIL`` and
    ``accumulate.gpu.BUSY_UTIL``, or swinging from one side to the other between the looks:
    kernels that start and finish. A GPU pinned "busy" near its idle power is a kernel that does
    not finish (``threads.gpu.gpu_findings`` says the same), a GPU idle is no work: neither is
    progress."""
    works = _gpu_works(b)
    if works is not None:
        return [works]
    mine = set(b.processes)
    any_pids = any(g.pids for g in b.gpus)
    before = {g.gpu: g for g in a.gpus}
    out: List[Signal] = []
    for g in b.gpus:
        if g.util_pct is None or (any_pids and not mine & set(g.pids)):
            continue
        old = before.get(g.gpu)
        u0 = old.util_pct if old is not None else None
        between = IDLE_UTIL < g.util_pct < BUSY_UTIL
        swing = u0 is not None and min(u0, g.util_pct) <= IDLE_UTIL \
            and max(u0, g.util_pct) >= BUSY_UTIL
        if between or swing:
            users = sorted(mine & set(g.pids))
            who = f" (used by pid {', '.join(map(str, users))})" if users else ""
            how = f"{g.util_pct}%" if between else f"{u0}% then {g.util_pct}%"
            out.append(Signal("gpu", users[0] if users else None,
                              f"GPU {g.gpu}{who} at {how} utilization: kernels start and finish"))
    return out


def progress_signals(a: TreeLook, b: TreeLook) -> List[Signal]:
    """Signs of progress between look ``a`` and the later look ``b`` (module doc; each
    kind's rule is its function's docstring)."""
    dt = max(b.ts - a.ts, 1e-3)
    out: List[Signal] = []
    for pid, pb in sorted(b.processes.items()):
        pa = a.processes.get(pid)
        if pa is None or not _same(pa, pb):
            continue
        for rule in (_output(pa, pb), _work(pa, pb, dt), _memory(pa, pb, dt)):
            if rule is not None:
                out.append(rule)
    out.extend(_sent(a, b, dt))
    out.extend(_accepted(a, b))
    out.extend(_gpu(a, b))
    return out


def stack_signals(samples: List[StackSamples]) -> List[Signal]:
    """A ``stacks`` signal for each thread whose code moves by ``progress.stacks.code_moves``
    (the analyzer's ``code-moves``: a capture walking model layers, a compile), from the
    ``StackSamples`` taken before a capture (several Python stacks of the threads on a CPU,
    record/probes/stack_motion.py); the watcher asks for them only once silence has lasted long
    enough to capture, since they cost a second of py-spy."""
    return _per_thread("stacks", samples, code_moves)


def _per_thread(kind: str, facts: Sequence[Any], judge: Callable[[Any], Optional[str]]
                ) -> List[Signal]:
    """A ``kind`` signal for each per-thread fact (``pid``, ``tid``) that ``judge`` finds
    progress in, with its sentence."""
    return [Signal(kind, e.pid, f"pid {e.pid} thread {e.tid}: {text}") for e in facts
            if (text := judge(e))]


def driver_signals(calls: List[CudaDriverCalls]) -> List[Signal]:
    """A ``gpu`` signal per thread whose GPU work completed while libcuda's uprobes counted
    for a moment (record/probes/driver_motion.py: what ``watch`` asks before it records):
    the analyzer's own rule (progress/gpu.driver_work)."""
    return _per_thread("gpu", calls, driver_work)
