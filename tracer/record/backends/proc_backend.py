"""The /proc sampling backend: periodic looks at every thread of every target process.

Contract (on top of backends/base.py):
- Never stops, signals or ptrace-attaches the target: it only reads /proc (without root on
  one's own processes); a file that exists but may not be read gives one ``ObserveError`` per
  process and kind (``ProcBackend._unreadable``); other trouble goes to ``errors``.
- One daemon thread samples at ``rate_hz``: each round (``ProcBackend.tick``) emits thread
  samples, starts, exits, process I/O (its own: without its reaped children's, linux/reaped_io),
  fresh ``ProcessInfo`` and ``ProcessExit``. ``prepare()`` + ``tick()`` are public: one round
  at a time, no thread (tests, cost measures). A long round ends at ``stop()`` (its doc).
- ``beside_ebpf`` (eBPF sees every call, fork and exit): descendants looked for once per
  ``info_interval``, and each live process's I/O read once more at ``stop()``.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from ...linux import access, procfs
from ...linux.reaped_io import ReapedIO
from ...linux.fdtarget import FdTarget
from ...linux.tcpdiag import TcpSock, accepted_since, tcp_sockets
from ...events import (ObserveError, ProcessExit, ProcessInfo, ServedConnections,
                       SocketCounters, ThreadExit,
                       ThreadStart)
from ...linux.procfs_fds import SocketTables, listening_sockets, read_fds_checked
from .base import Backend, Emit, TargetSet
from ..targets import ParentCache, decode_wait_status

__all__ = ["ProcBackend"]

LONG_TICK_S = 0.25


def _info_signature(info: ProcessInfo) -> tuple:
    # File positions move with every write; they are not a change of what the process holds.
    return (info.comm, tuple(info.cmdline), tuple(sorted(info.threads.items())),
            tuple((f.fd, f.kind, f.target, f.mode) for f in info.fds), tuple(info.listening),
            info.state)


@dataclass
class _Tracked:
    """What the backend last saw of one process."""
    tids: Set[int]
    signature: Optional[tuple] = None
    next_info: float = 0.0
    exited: bool = False
    tcp: Dict[int, Tuple[int, str]] = field(default_factory=dict)   # inode -> (fd, target)
    counters: Dict[int, tuple] = field(default_factory=dict)        # inode -> last emitted


def _listening(tr: _Tracked) -> List[Tuple[str, int]]:
    """The (address, port) pairs of the listening TCP sockets among a process's fds."""
    out = []
    for _, target in tr.tcp.values():
        t = FdTarget.parse(target)
        if t.local and not t.remote and ":" in t.local:
            addr, _, port = t.local.rpartition(":")
            if port.isascii() and port.isdecimal() and len(port) <= 5:
                out.append((addr.strip("[]"), int(port)))
    return out


def _tcp_fds(info: Optional[ProcessInfo]) -> Dict[int, Tuple[int, str]]:
    return {f.inode: (f.fd, f.target) for f in (info.fds if info else [])
            if f.kind == "tcp" and f.inode}


class ProcBackend(Backend):
    name = "proc"

    def __init__(self, rate_hz: float = 10.0, root: str = "/proc",
                 info_interval: float = 1.0, socket_interval: float = 0.5,
                 beside_ebpf: bool = False) -> None:
        super().__init__()
        self.interval = 1.0 / rate_hz
        self.beside_ebpf = beside_ebpf
        self._next_discovery = 0.0
        self.root = root
        self.info_interval = info_interval
        self.socket_interval = socket_interval
        self._next_sockets = 0.0
        self._last_tcp: Optional[Dict[int, TcpSock]] = None    # the last TCP dump, by cookie
        self.ticks = 0
        self.last_tick_s = 0.0
        self.max_tick_s = 0.0
        self._targets: Optional[TargetSet] = None
        self._emit: Optional[Emit] = None
        self._tracked: Dict[int, _Tracked] = {}
        self._parents = ParentCache()
        self._own_io = ReapedIO()
        self._reported: Set[str] = set()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()  # tick() from the thread and from callers never overlap

    # ------------------------------------------------------------------ Backend interface
    def check(self) -> Optional[str]:
        try:
            os.listdir(self.root)
        except OSError as e:
            return f"{self.root} is not readable: {e.strerror}"
        if procfs.read_stat(os.getpid(), root=self.root) is None and self.root == "/proc":
            return "/proc is mounted without our own process (hidepid or another pid namespace)"
        return None

    def start(self, targets: TargetSet, emit: Emit) -> None:
        self.prepare(targets, emit)
        self._thread = threading.Thread(target=self._run, name="hangtrace-proc", daemon=True)
        self._thread.start()

    def prepare(self, targets: TargetSet, emit: Emit) -> None:
        """Everything ``start`` does but the thread: then call ``tick()`` by hand."""
        self._targets, self._emit = targets, emit
        self._stop.clear()
        # The trace header (the TargetSet's discovery) covers the targets and their
        # descendants as they were then: track them all silently; later arrivals are announced.
        targets.discover(self.root)
        for pid in targets.pids():
            info = targets.infos.get(pid)
            tids = set(info.threads) if info else set(procfs.list_tids(pid, self.root))
            self._tracked[pid] = _Tracked(tids, _info_signature(info) if info else None,
                                          time.time() + self.info_interval, tcp=_tcp_fds(info))

    def stop(self) -> None:
        """Stop the sampling thread. A round that has run over ``LONG_TICK_S`` when ``stop()``
        comes ends there, and so does one after a round that took longer (the processes not yet
        sampled keep their last round's samples): a 2,000-process tree's round took seconds,
        and the end of the recording waited for it (then up to ``LONG_TICK_S`` more)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            # Bounded: a /proc read can block (cmdline of a process whose mm is locked); stop
            # must return all the same (the thread is a daemon and emits nothing after this).
            thread.join(timeout=5)
        got = self._lock.acquire(timeout=5)
        if got and self.beside_ebpf:
            self._last_io()
        self._emit = None  # nothing after stop(), even from a concurrent tick() caller
        if got:
            self._lock.release()
        else:
            self.errors.append("proc: the sampling thread did not stop within 5 s")

    def _last_io(self) -> None:
        """Beside eBPF: each live process's I/O counters at the window's end (module doc)."""
        if self._emit is None:
            return
        now = time.time()
        for pid, tr in list(self._tracked.items()):
            io = None if tr.exited else procfs.read_io(pid, self.root, ts=now)
            st = None if io is None else procfs.read_stat(pid, root=self.root)
            if io is not None and st is not None and st.state not in ("Z", "X"):
                self._emit(self._own_io.own(io, st, self._is_gone))

    def _is_gone(self, pid: int) -> bool:
        return procfs.reaped(pid, self.root)

    # ------------------------------------------------------------------ sampling
    def _run(self) -> None:
        deadline = time.monotonic()
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception as e:  # never let one odd /proc read kill the recording
                self._error("tick", f"proc: sampling error: {type(e).__name__}: {e}")
            deadline += self.interval
            now = time.monotonic()
            if deadline < now:  # fell behind (a slow tick, a suspended VM): do not burst
                deadline = now
            self._stop.wait(deadline - now)

    def tick(self) -> None:
        """One sampling round over every target. Each round:

        - descendants of every target are looked for; a new one is added to ``targets`` and gets a
        ``ProcessInfo`` and a ``ThreadStart(new_process=True)``. What ``targets.discover()`` found
        (record/targets.py; the trace header's processes) is tracked silently, from the infos it
        read.

        - every thread of every live target -> ``ThreadSample``; a thread that appeared ->
        ``ThreadStart``; one that disappeared -> ``ThreadExit``; every process -> ``ProcessIO``.

        - every ``info_interval`` seconds the fd table is re-read and a fresh ``ProcessInfo``
        emitted when something other than file positions changed (threads, fds, sockets, state,
        exec).

        - a process that is gone -> ``ProcessExit(status=None)`` once (it was reaped: the status is
        lost); a zombie -> ``ProcessExit`` once with the wait status kept in stat field 52."""
        with self._lock:
            if self._emit is None or self._targets is None:
                return
            t0 = time.perf_counter()
            if not self.beside_ebpf or time.monotonic() >= self._next_discovery:
                # the machine's every pid listed: beside eBPF (the fork tracepoint adds
                # children) once per info_interval, for what no fork shows (a subreaper's
                # orphans)
                self._next_discovery = time.monotonic() + self.info_interval
                self._discover()
            sockets = SocketTables(self.root)
            long = self.last_tick_s > LONG_TICK_S       # the last round was long too
            for i, pid in enumerate(self._targets.pids()):
                if i % 64 == 63 and self._stop.is_set() \
                        and (long or time.perf_counter() - t0 > LONG_TICK_S):
                    break   # stop() waits for no long round (2,000 processes: seconds)
                self._sample_process(pid, sockets)
            if time.monotonic() >= self._next_sockets:
                self._next_sockets = time.monotonic() + self.socket_interval
                self._sample_sockets()
            self.last_tick_s = time.perf_counter() - t0
            self.max_tick_s = max(self.max_tick_s, self.last_tick_s)
            self.ticks += 1

    def _error(self, key: str, line: str) -> None:
        if key not in self._reported:
            self._reported.add(key)
            self.errors.append(line)

    def _unreadable(self, pid: int, what: str, path: str, consequence: str) -> None:
        """Once per (pid, what): an ObserveError saying why ``path`` could not be read, unless
        the process or thread was simply gone (analysis/threads/observed.py reads these).
        A file that exists but may not be read is syscall, io or fd of another user's process; a
        thread whose current syscall cannot be read is not judged
        (analysis/threads/observed.py)."""
        key = f"{what}{pid}"
        if key in self._reported or self._emit is None:
            return
        data, why = access.read_checked(path)
        if data or why == access.GONE:
            return          # readable after all (an empty read), or gone: nothing to say
        self._reported.add(key)
        denied = why == access.DENIED
        self._emit(ObserveError(ts=time.time(), source="proc", what=what, pid=pid,
                                why=("permission denied" if denied else "cannot be read")
                                + f" ({consequence})", denied=denied))

    def _discover(self) -> None:
        assert self._targets is not None and self._emit is not None
        tree = self._parents.refresh(self.root)
        tracked_or_targets = set(self._targets.pids()) | self._tracked.keys()
        for pid in procfs.descendants(tracked_or_targets, self.root, tree=tree):
            if pid in self._tracked or self._targets.excluded(pid):
                continue
            added = self._targets.add(pid)
            info = procfs.read_process_info(pid, self.root)
            if info is None:
                continue  # born and gone within one tick: nothing to say about it
            self._tracked[pid] = _Tracked(set(info.threads), _info_signature(info),
                                          time.time() + self.info_interval, tcp=_tcp_fds(info))
            self._emit(info)
            if added:
                self._emit(ThreadStart(ts=info.ts, pid=pid, tid=pid, parent_tid=info.ppid,
                                       new_process=True))

    def _sample_process(self, pid: int, sockets: SocketTables) -> None:
        assert self._emit is not None
        emit, root = self._emit, self.root
        tr = self._tracked.get(pid)
        if tr is None:  # added by another backend since the last discovery
            tr = self._tracked[pid] = _Tracked(set())
        if tr.exited:
            return
        now = time.time()
        io = procfs.read_io(pid, root, ts=now)   # before stat: linux/reaped_io.py
        st = procfs.read_stat(pid, root=root)
        if st is None:
            tr.exited = True
            self._own_io.ended(pid)
            emit(ProcessExit(ts=now, pid=pid, status=None))
            return
        # A zombie leader with other threads alive is a process whose main thread called
        # pthread_exit: it is still running. A real zombie has only its leader left.
        if st.state in ("Z", "X") and st.num_threads <= 1:
            tr.exited = True
            self._own_io.ended(pid, io)     # a zombie's io: what its reaper will absorb
            status, sig, core = decode_wait_status(st.exit_code or 0)
            if st.exit_code is None:
                self._error(f"exit{pid}", f"proc: exit code of {pid} unknown (kernel < 3.5)")
            emit(ProcessExit(ts=now, pid=pid, status=status, signal=sig, core_dumped=core))
            return

        tids = procfs.list_tids(pid, root)
        for tid in tids:
            sample = procfs.read_thread_sample(pid, tid, root, ts=now)
            if sample is None:
                continue  # exited between the listing and the read
            if tid not in tr.tids:
                emit(ThreadStart(ts=now, pid=pid, tid=tid, parent_tid=None))
            if not sample.syscall and sample.state not in ("Z", "X"):
                self._unreadable(pid, "syscall", f"{root}/{pid}/task/{tid}/syscall",
                                 "needs ptrace access: same user and Yama ptrace_scope 0, "
                                 "or root")
            emit(sample)
        current = set(tids)
        for tid in sorted(tr.tids - current):
            emit(ThreadExit(ts=now, pid=pid, tid=tid))
        tr.tids = current

        if io is not None:
            emit(self._own_io.own(io, st, self._is_gone))
        else:
            self._unreadable(pid, "io", f"{root}/{pid}/io", "I/O counters skipped")

        if now >= tr.next_info:
            tr.next_info = now + self.info_interval
            self._refresh_info(pid, tr, sockets)

    def _refresh_info(self, pid: int, tr: _Tracked,
                      sockets: SocketTables) -> None:
        assert self._emit is not None
        root = self.root
        # Socket tables are per network namespace; processes of one tree usually share one.
        # They are read only for a table with a socket in it: a /proc/PID/net/tcp read walks
        # the kernel's whole hash (5-60 ms here), every second for every process.
        fds = read_fds_checked(pid, root, tables=sockets)
        if fds is None:
            self._unreadable(pid, "fd", f"{root}/{pid}/fd", "fds skipped")
            fds = []
        info = procfs.read_process_info(pid, root, with_fds=False)
        if info is None:
            return
        info.fds = fds
        info.listening = listening_sockets(pid, root, fds=fds, tables=sockets)
        tr.tcp = _tcp_fds(info)
        sig = _info_signature(info)
        if sig != tr.signature:
            tr.signature = sig
            self._emit(info)

    def _served(self, sockets: Dict[int, TcpSock], wanted: List[Tuple[int, _Tracked]]) -> None:
        """Connections the targets took on the ports they listen on since the last dump
        (tcpdiag.accepted_since): a server that answers each request on a new connection
        shows no other sign of it between two samples."""
        before, self._last_tcp = self._last_tcp, sockets
        if before is None or not sockets:
            return
        now = time.time()
        for pid, tr in wanted:
            listen = _listening(tr)
            if not listen:
                continue
            for port, n in sorted(accepted_since(before, sockets, listen).items()):
                self._emit(ServedConnections(now, pid, port, n))  # type: ignore[misc]

    def _sample_sockets(self) -> None:
        """TCP counters of the targets' sockets (linux/tcpdiag.py), emitted when they moved:
        socket sends are invisible in /proc/PID/io. Only this network namespace is visible."""
        assert self._emit is not None
        wanted = [(pid, tr) for pid, tr in self._tracked.items() if tr.tcp and not tr.exited]
        if not wanted or self.root != "/proc":
            return
        sockets = tcp_sockets()
        self._served(sockets or {}, wanted)
        table = {s.inode: s for s in (sockets or {}).values() if s.inode}
        if sockets is None:
            self._error("tcpdiag", "proc: TCP counters (NETLINK_SOCK_DIAG) not readable: "
                        "socket sends are not seen without a syscall backend")
            return
        now = time.time()
        for pid, tr in wanted:
            for inode, (fd, target) in tr.tcp.items():
                c = table.get(inode)
                if c is None:
                    continue
                sent = c.bytes_sent if c.bytes_sent is not None else c.bytes_acked
                values = (sent, c.bytes_received, c.data_segs_out, c.data_segs_in)
                if tr.counters.get(inode) == values:
                    continue
                tr.counters[inode] = values
                self._emit(SocketCounters(now, pid, fd, target, *values))
