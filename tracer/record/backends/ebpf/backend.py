"""Live recording backend on eBPF tracepoints: syscall counts, blocking calls, forks, execs,
exits and CPU time of a process tree, without ever stopping the target (its design:
docs/ARCHITECTURE.md, "The eBPF backend").

Contract (on top of base.py):
- ``EbpfBackend(loader=None)``: ``loader`` "libbpf" or "bcc" pins one; None tries them in
  loader.preferred()'s order. ``check()`` is env.ebpf_problem() for those loaders.
- ``start(targets, emit)`` loads bpf/hangtrace.bpf.c through the first loader that can and
  starts one reader thread (``EbpfBackend.start``); ``attach_s``, ``load_s`` and ``notes``
  say how long and with which loader. The reader's events: ``EbpfBackend._read_loop``.
- ``stop()`` (idempotent, any thread, any exit path) detaches, drains, emits ebpf/final.py's
  events and closes the program. The events are the same whichever loader ran.
"""
from __future__ import annotations

import ctypes as ct
import os
import select
import threading
import time
from typing import Dict, List, Optional, Set, Tuple

from .... import events as ev
from ....linux import procfs
from ....linux.syscall_table import syscall_name, syscall_table
from ....linux.tracefs import TRACEFS_DIRS
from . import layout as L
from ..base import Backend, Emit, TargetSet
from .convert import Clock, Converter, FdCache
from .counts import CountEmitter, KernelSnapshot, SnapshotCancelled
from .env import choose, describe_loader, ebpf_problem
from .loader import MapView, Program
from .programs import load_hangtrace
from ...targets import decode_wait_status

__all__ = ["EbpfBackend", "ebpf_problem", "TRACEFS_DIRS"]

_PENDING_EXIT_S = 1.0
# The reader's bound on work per drain: one poll reads at most this many records, then the
# loop looks at its stop flag and the clock again (a fork storm fills the ring buffer faster
# than Python reads it: one unbounded poll never returned, and attach -d 2 ran past 60 s).
RECORDS_PER_POLL = 2000
COUNTS_EVERY_S = 1.0
_MAPS = ("threads", "aggr", "fds", "tcounts", "ioctls", "fails", "cache", "counters")


def _u32(v: int) -> bytes:
    return bytes(ct.c_uint32(v))


class EbpfBackend(Backend):
    name = "ebpf"

    def __init__(self, poll_ms: int = 25, loader: Optional[str] = None) -> None:
        super().__init__()
        self.poll_ms = poll_ms          # the reader's wait while exits or fd reads are pending
        self.loaders = (loader,) if loader else None
        self.loader: Optional[str] = None        # the one that loaded the program
        self.notes: List[str] = []
        self.attach_s: Optional[float] = None
        self.load_s: Optional[float] = None
        self.events_read = 0
        self._prog: Optional[Program] = None
        self._gen = 0                                     # the "gen" map's value
        self._emit: Optional[Emit] = None
        self._targets: Optional[TargetSet] = None
        self._clock = Clock()
        self._fds = FdCache()
        self._conv = Converter(self._fds)
        self._table = syscall_table()
        self._kinds = L.kinds_for(self._table)
        self._lock = threading.Lock()
        self._stopping = False
        self._done = threading.Event()
        self._quit = threading.Event()
        self._reader: Optional[threading.Thread] = None
        self._wake: Optional[Tuple[int, int]] = None    # stop() wakes the reader's wait
        self._start_ts = 0.0
        self._start_samples: Dict[int, ev.ThreadSample] = {}
        self._born: Dict[int, float] = {}                 # tid -> epoch ts of its fork
        self._exited_cpu: List[ev.ThreadCpu] = []
        self._pending_exits: Dict[int, float] = {}        # pid -> deadline (monotonic)
        self._exited: Set[int] = set()
        self._counts: Optional[CountEmitter] = None
        self._next_counts = 0.0
        self._budget = 0             # records the poll in progress may still read

    # ------------------------------------------------------------------ contract
    def check(self) -> Optional[str]:
        """env.ebpf_problem() for this backend's loaders: None only when one can load here, else
        one line saying why. Its one side effect: mounting tracefs where BCC needs it and it is
        missing (as under ``ip netns exec``). ``bcc`` and libbpf are loaded inside
        ``start``/``check`` only, so analysis and replay run anywhere."""
        return ebpf_problem(self.loaders)

    def describe(self) -> str:
        """How it would record here, for the line saying which backends run and why."""
        name, _ = choose(self.loaders)
        return f"kernel tracepoints through {describe_loader(name)}" if name else \
            "kernel tracepoints"

    def start(self, targets: TargetSet, emit: Emit) -> None:
        """Load bpf/hangtrace.bpf.c through the first loader that can (the CO-RE object with
        libbpf: loader ``libbpf``; the text compiled by BCC: ``bcc``; when the libbpf load itself
        fails and BCC may be used, BCC, the reason kept in ``notes``), fill the "kinds" array, mark
        the tree's processes, and for each thread emit a ``ThreadSample`` (a sleeping one is marked
        blocked since the attach), then start one reader thread. ``attach_s``: seconds from start()
        until the program counts, of which ``load_s`` loading and attaching; ``notes`` says which
        loader and those times. Processes forked later are followed in the kernel and added to
        ``targets``."""
        if self._prog is not None or self._stopping:
            raise RuntimeError("EbpfBackend.start called twice")
        self._emit, self._targets = emit, targets
        t0 = time.monotonic()
        self._prog, fallback = load_hangtrace(self.loaders)
        self.loader, self.load_s = self._prog.loader, self._prog.load_s
        try:
            self._setup(targets)
        except BaseException:
            self._cleanup()
            raise
        self.attach_s = time.monotonic() - t0
        self.notes = fallback + [f"eBPF: {describe_loader(self.loader)}; counting "
                                 f"{self.attach_s:.2f} s after the start (load "
                                 f"{self.load_s:.2f} s)"]
        self._wake = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._reader = threading.Thread(target=self._read_loop, name="hangtrace-ebpf",
                                        daemon=True)
        self._reader.start()

    def stop(self) -> None:
        """Detach the programs, drain the ring buffer, emit what ebpf/final.py gives (blocked
        calls, final ThreadCounts, ThreadCpu, ThreadSample, Lost), then close the program (no map,
        program or link left). Idempotent, from any thread and any exit path; nothing is emitted
        after it."""
        with self._lock:
            already, self._stopping = self._stopping, True
        if already:
            self._done.wait(timeout=15)
            return
        try:
            self._quit.set()
            self._budget = 0            # the reader's poll in progress ends at its next record
            if self._wake is not None:
                os.write(self._wake[1], b"x")    # and its wait at once
            reader, self._reader = self._reader, None
            if reader is not None and reader is not threading.current_thread():
                reader.join(timeout=10)
            if self._prog is not None and self._emit is not None:
                try:
                    self._prog.detach()     # no call is counted or streamed after this
                    self._drain_rest(reader)
                    self._resolve_exits(final=True)
                    self._final_events()
                except Exception as e:  # noqa: BLE001 - detaching must still happen
                    self.errors.append(f"ebpf: final read failed: {type(e).__name__}: {e}")
        finally:
            self._cleanup()
            self._emit = None
            self._done.set()

    def _drain_rest(self, reader: Optional[threading.Thread]) -> None:
        """Read what the detached programs left in the ring buffer: at most what it holds
        (nothing is added after the detach), and nothing while the reader thread is still in a
        poll (one ring buffer, one reader)."""
        assert self._prog is not None
        if reader is not None and reader.is_alive():
            self.errors.append("ebpf: the reader did not stop within 10 s: the ring buffer's "
                               "last records were not read")
            return
        ring = L.HT_RINGBUF_PAGES * os.sysconf("SC_PAGE_SIZE")
        self._budget = ring // ct.sizeof(L.HtEvent) + 1
        self._prog.consume()

    # ------------------------------------------------------------------ setup
    def _setup(self, targets: TargetSet) -> None:
        assert self._prog is not None
        name, entries = L.kinds_entries(L.kinds_value(self._table), self.loader or "")
        for key, value in entries:
            self._prog.map(name).set(key, value)
        self._start_ts = time.time()
        self._clock = Clock()
        self._counts = CountEmitter(since=self._start_ts, epoch=self._clock.epoch,
                                    name=syscall_name, fd_info=self._fd_info)
        seen: Set[int] = set()
        # Twice: first what the TargetSet's discovery found (record/targets.py), then one walk
        # of /proc for a process forked between that walk and the fill (after the fill, the
        # fork tracepoint catches every new child).
        targets.discover()
        for walk in range(2):
            pids = targets.pids()
            if walk:
                tree: Dict[int, List[int]] = {}
                for pid in procfs.list_pids():
                    st = procfs.read_stat(pid)
                    if st is not None:
                        tree.setdefault(st.ppid, []).append(pid)
                pids = sorted(p for p in set(pids) | set(procfs.descendants(pids, tree=tree))
                              if not targets.excluded(p))
            # just before the filter: a pid another process took since discovery is left out
            dropped = targets.drop_reused(pids)
            self.errors.extend(line for _, line in dropped)
            pids = [p for p in pids if p not in {d for d, _ in dropped}]
            for pid in pids:
                if pid not in seen:
                    targets.add(pid)
                    self._mark("procs", pid, True)
            for pid in pids:
                if pid not in seen:
                    seen.add(pid)
                    self._add_threads(pid)
        self._prog.open_ring("events", self._on_record)

    def _mark(self, array: str, pid: int, on: bool) -> None:
        """Set a pid-indexed u8 array ("procs" by tgid, "blocked" by tid). After a change of
        either, gen[HT_GEN_USER] moves on: the per-CPU caches of who is current and followed
        are decided again (hangtrace.h, ht_cache.cur_*); a hit is what lets a call take the
        fast path, which does not look at "blocked" (hangtrace.bpf.c: sys_exit_fast)."""
        if self._prog is None:
            return
        try:
            self._prog.map(array).set(_u32(pid), bytes([1 if on else 0]))
        except (IndexError, KeyError, OSError):
            if on:
                self.errors.append(f"ebpf: pid {pid} is above pid_max: not followed")
            return
        self._gen += 1
        self._prog.map(L.GEN_MAP[self.loader or ""]).set(*L.gen_entry(self._gen))

    def _add_threads(self, pid: int) -> None:
        assert self._emit is not None and self._prog is not None
        threads = self._prog.map("threads")
        now_ns = self._clock.now_ns()
        for tid in procfs.list_tids(pid):
            s = procfs.read_thread_sample(pid, tid, ts=self._start_ts)
            if s is None:
                continue
            self._start_samples[tid] = s
            st = L.HtThread(tgid=pid)
            if s.state == "R":
                st.last_in_ns = now_ns      # on CPU (or about to be) from now on
            elif s.state in ("S", "D"):
                st.blocked_ns = now_ns      # asleep since before the attach: dated from it
            # the kernel may have created it already (a switch): then it is left as it is
            if threads.set(_u32(tid), bytes(st), only_new=True) and st.blocked_ns:
                self._mark("blocked", tid, True)
            self._emit(s)

    def _fd_info(self, pid: int, fd: int) -> Optional[ev.FdInfo]:
        if pid not in self._exited:
            self._fds.refresh(pid, COUNTS_EVERY_S)
        return self._fds.get(pid, fd)

    # ------------------------------------------------------------------ reading
    def _read_loop(self) -> None:
        """The reader thread. It emits: streamed calls as events/__init__.py syscall objects
        (ebpf/convert.py), forks -> ``ThreadStart`` (+``ProcessInfo`` for a new process), execs ->
        ``ProcessExec``, thread exits -> ``ThreadExit``, the last thread of a process ->
        ``ProcessExit`` (status from the zombie's /proc stat, None when it was reaped first), and
        about once a second (``COUNTS_EVERY_S``) a ``ThreadCounts`` per thread whose kernel counts
        changed (less often when reading the maps takes over a tenth of that: at most a tenth of
        the reader's time). One poll reads at most ``RECORDS_PER_POLL`` records (the rest stay in
        the ring for the next), so the reader sees ``stop()`` within one such batch however fast
        the tree forks."""
        self._next_counts = time.monotonic() + COUNTS_EVERY_S
        assert self._prog is not None and self._wake is not None
        waiter = select.poll()
        waiter.register(self._prog.ring_fd("events"), select.POLLIN)
        waiter.register(self._wake[0], select.POLLIN)
        while not self._quit.is_set():
            try:
                assert self._prog is not None
                self._budget = RECORDS_PER_POLL
                waiter.poll(self._wait_ms())
                self._prog.consume()
                self._fds.read_pending(self._exited)
                if self._pending_exits:
                    self._resolve_exits()
                if time.monotonic() >= self._next_counts and not self._quit.is_set():
                    took = time.monotonic()
                    self._emit_counts()
                    took = time.monotonic() - took
                    # a read of big maps (thread churn: 30,000 threads) is spaced out so
                    # that it takes at most a tenth of the reader's time
                    self._next_counts = time.monotonic() + max(COUNTS_EVERY_S, 9 * took)
            except Exception as e:  # noqa: BLE001
                self.errors.append(f"ebpf: reader failed: {type(e).__name__}: {e}")
                return

    def _wait_ms(self) -> int:
        """The reader's wait on the ring and stop()'s pipe: to the counts' next read, or poll_ms."""
        if self._pending_exits or self._fds.pending:
            return self.poll_ms
        return max(1, int(1000 * (self._next_counts - time.monotonic())) + 1)

    def _maps(self) -> Dict[str, MapView]:
        assert self._prog is not None
        return {name: self._prog.map(name) for name in _MAPS}

    def _emit_counts(self) -> None:
        assert self._counts is not None
        try:     # stop() does not wait for it: the final snapshot supersedes it
            snap = KernelSnapshot().read(self._maps(), cancelled=self._quit.is_set)
        except SnapshotCancelled:
            return
        emit = self._emit
        for e in self._counts.events(snap, time.time()):
            if emit is not None:
                emit(e)

    def _on_record(self, data: int, size: int) -> bool:
        """Emit the record's event; True when this drain has read its share (loader.OnRecord)."""
        self._budget -= 1
        try:
            if size < ct.sizeof(L.HtEvent):
                raise ValueError(f"a {size}-byte record")
            e = L.HtEvent.from_buffer_copy(ct.string_at(data, ct.sizeof(L.HtEvent)))
            self.events_read += 1
            if e.type == L.HT_EV_SYSCALL:
                self._on_syscall(e)
            elif e.type == L.HT_EV_FORK:
                self._on_fork(e)
            elif e.type == L.HT_EV_EXEC:
                self._on_exec(e)
            elif e.type == L.HT_EV_EXIT:
                self._on_exit(e)
            elif e.type == L.HT_EV_FD:     # an fd's first use: its table read after the drain
                self._fds.first_use(e.tgid, e.enter_ns / 1e9)
        except Exception as exc:  # noqa: BLE001 - a bad record must not stop the reader
            if len(self.errors) < 20:
                self.errors.append(f"ebpf: event dropped: {type(exc).__name__}: {exc}")
        return self._budget <= 0

    def _on_syscall(self, e: L.HtEvent) -> None:
        dur_ns = e.exit_ns - e.enter_ns
        if self._counts is not None:
            self._counts.note_streamed(e.tgid, e.tid, e.nr, dur_ns)
        emit = self._emit
        if emit is None:
            return
        emit(self._conv.syscall(
            ts=self._clock.epoch(e.enter_ns), pid=e.tgid, tid=e.tid,
            name=syscall_name(e.nr), kind=e.kind, args=list(e.args), ret=e.ret,
            dur=dur_ns / 1e9, flags=e.flags, aux=e.aux, pfds=list(e.pfds)))

    def _on_fork(self, e: L.HtEvent) -> None:
        child, ctgid = int(e.args[0]), int(e.args[1])
        new_process = bool(e.flags & L.HT_F_NEW_PROCESS)
        if e.flags & L.HT_F_GUESSED:
            real = procfs.tgid_of(child)
            if real is not None and real != child:   # it was a thread after all
                new_process, ctgid = False, real
                self._mark("procs", child, False)
                threads = self._prog.map("threads") if self._prog is not None else None
                raw = threads.get(_u32(child)) if threads is not None else None
                if threads is not None and raw is not None:
                    st = L.HtThread.from_buffer_copy(raw)
                    st.tgid = real
                    threads.set(_u32(child), bytes(st))
        ts = self._clock.epoch(e.enter_ns)
        self._born[child] = ts
        assert self._emit is not None and self._targets is not None
        if new_process:
            self._targets.add(ctgid)
            info = procfs.read_process_info(ctgid)
            if info is not None:
                self._fds.forget(ctgid)
                self._emit(info)
        self._emit(ev.ThreadStart(ts=ts, pid=ctgid, tid=child, parent_tid=e.tid,
                                  new_process=new_process))

    def _on_exec(self, e: L.HtEvent) -> None:
        pid = e.tgid
        self._fds.forget(pid)
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            exe = ""
        assert self._emit is not None
        self._emit(ev.ProcessExec(ts=self._clock.epoch(e.enter_ns), pid=pid, tid=e.tid,
                                  filename=exe, argv=procfs.read_cmdline(pid)))

    def _on_exit(self, e: L.HtEvent) -> None:
        ts = self._clock.epoch(e.enter_ns)
        pid, tid = e.tgid, e.tid
        since = max(self._start_ts, self._born.get(tid, self._start_ts))
        self._exited_cpu.append(ev.ThreadCpu(ts=ts, pid=pid, tid=tid, since=since,
                                             on_cpu_ns=int(e.args[1]),
                                             switches=int(e.args[2])))
        assert self._emit is not None
        self._emit(ev.ThreadExit(ts=ts, pid=pid, tid=tid))
        group_dead = int(e.args[0])
        if group_dead == 1 or (group_dead == 2 and not procfs.list_tids(pid)):
            self._pending_exits.setdefault(pid, time.monotonic() + _PENDING_EXIT_S)
            self._resolve_exits()

    def _resolve_exits(self, final: bool = False) -> None:
        """ProcessExit once /proc shows the zombie (its exit code) or the pid gone."""
        emit = self._emit
        for pid, deadline in list(self._pending_exits.items()):
            st = procfs.read_stat(pid)
            if st is not None and st.state not in ("Z", "X") and not final \
                    and time.monotonic() < deadline:
                continue   # still inside do_exit(): not a zombie yet
            del self._pending_exits[pid]
            if pid in self._exited or emit is None:
                continue
            self._exited.add(pid)
            self._mark("procs", pid, False)
            status, sig, core = None, None, False
            if st is not None and st.exit_code is not None and st.state in ("Z", "X"):
                status, sig, core = decode_wait_status(st.exit_code)
            emit(ev.ProcessExit(ts=time.time(), pid=pid, status=status, signal=sig,
                                core_dumped=core))

    # ------------------------------------------------------------------ stop
    def _final_events(self) -> None:
        from .final import StopContext, final_events
        assert self._emit is not None and self._targets is not None and self._counts
        self._fds.read_pending(self._exited, final=True)
        live: Dict[int, List[int]] = {}
        for pid in self._targets.pids():
            tids = procfs.list_tids(pid) if pid not in self._exited else []
            if tids:
                live[pid] = tids
        # what did not run since the discovery read it is as it was: its fds, its threads
        still = self._targets.run_counts.still(live, live)
        for pid in still:
            info = self._targets.infos.get(pid)
            if info is not None:
                self._fds.known(pid, info.fds)
        ctx = StopContext(maps=self._maps(), clock=self._clock, conv=self._conv,
                          kinds=self._kinds, start_ts=self._start_ts,
                          start_samples=self._start_samples, born=self._born, live=live,
                          exited_cpu=self._exited_cpu, emitter=self._counts, still=still)
        events, errors = final_events(ctx)
        for e in events:
            self._emit(e)
        self.errors.extend(errors)

    def _cleanup(self) -> None:
        for fd in self._wake or ():
            os.close(fd)
        self._wake = None
        prog, self._prog = self._prog, None
        if prog is not None:
            try:
                prog.close()   # detaches every tracepoint, closes map and program fds
            except Exception as e:  # noqa: BLE001
                self.errors.append(f"ebpf: cleanup failed: {type(e).__name__}: {e}")
