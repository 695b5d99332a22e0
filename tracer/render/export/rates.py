"""The counter tracks of the timeline export: per process syscalls/s, bytes written/s and output
bytes/s, and per GPU its utilization.

Contract:
- ``Rates(syscalls, is_internal, bucket_s)`` is fed every event of a trace in order
  (``feed``) and gives counter points through ``flush(emit)``: ``emit(pid, series, ts, value)``
  with ``ts`` the start of a ``bucket_s`` bucket (epoch seconds) and ``value`` a rate per
  second; every bucket between a series' first and last one is given (0 where nothing
  happened), in time order. GPU utilization is given as sampled (``GPU_PID``, "GPU i
  utilization %", the percent NVML reported).
- What counts is decided by the analyzer's own rules, never here (``Rates``); memory is
  bounded by processes and a few open buckets (``Rates.flush``).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from ... import events as ev
from ...events.counts import ThreadCounts
from ...analysis.accumulate.io_class import IoClass, proc_output_bytes, write_class
from ...analysis.accumulate.kernel_counts import contribution

__all__ = ["Rates", "GPU_PID", "SYSCALLS", "WRITTEN", "OUTPUT", "BUCKET_S", "MAX_BUCKETS"]

BUCKET_S = 0.5
MAX_BUCKETS = 20_000           # counter points per series that a window may need (window.py)
LATE_BUCKETS = 2
GPU_PID = 1 << 22              # above pid_max: the timeline's own "hangtrace" process
SYSCALLS, WRITTEN, OUTPUT = "syscalls/s", "written B/s", "output B/s"

Emit = Callable[[int, str, float, float], None]


class _Series:
    def __init__(self) -> None:
        self.buckets: Dict[int, float] = {}
        self.next = None            # type: Optional[int]  # the first bucket not given yet

    def add(self, b: int, amount: float) -> None:
        if self.next is not None and b < self.next:
            b = self.next           # late: the oldest bucket still open
        self.buckets[b] = self.buckets.get(b, 0.0) + amount


class Rates:
    """Counter points from a stream of events (module doc). What counts, by the analyzer's own
    rules: with a syscall backend (``syscalls`` True: strace, an strace log, eBPF) each completed
    call is one syscall and a write event's bytes are written; they are output when
    io_class.write_class says OUTPUT (a socket's bytes are judged by the keep-alive rule at the end
    of the window, not per call, so they are written, not output); the kernel's counts under eBPF
    (ThreadCounts, cumulative) add what the previous counts of the thread did not have
    (kernel_counts.contribution: the calls not streamed, written_bytes, plain_bytes), spread evenly
    over the time between the two reads. With /proc samples alone there is no syscall series; bytes
    come from /proc/PID/io (wchar, and io_class.proc_output_bytes for output), spread between two
    samples."""

    def __init__(self, syscalls: bool, is_internal: Callable[[int, Optional[str]], bool],
                 bucket_s: float = BUCKET_S) -> None:
        self.syscalls = syscalls
        self.is_internal = is_internal
        self.bucket_s = bucket_s
        self.series: Dict[Tuple[int, str], _Series] = {}
        self.gpu: List[Tuple[int, str, float, float]] = []
        self._kernel: Dict[Tuple[int, int], Tuple[float, float, float, float]] = {}
        self._io: Dict[int, Tuple[float, int, int]] = {}
        self._latest = 0
        self._given_to: Optional[int] = None     # buckets before this one were given

    # ------------------------------------------------------------------ feeding
    def _add(self, pid: int, name: str, ts: float, amount: float) -> None:
        if amount <= 0:
            return
        b = int(ts // self.bucket_s)
        self.series.setdefault((pid, name), _Series()).add(b, amount)
        self._latest = max(self._latest, b)

    def _spread(self, pid: int, name: str, t0: float, t1: float, amount: float) -> None:
        """``amount`` evenly over [t0, t1] (one bucket when the span is empty)."""
        if amount <= 0:
            return
        if t1 <= t0:
            self._add(pid, name, t1, amount)
            return
        b0, b1 = int(t0 // self.bucket_s), int(t1 // self.bucket_s)
        if b1 - b0 > MAX_BUCKETS:
            self._add(pid, name, t1, amount)
            return
        for b in range(b0, b1 + 1):
            lo, hi = max(t0, b * self.bucket_s), min(t1, (b + 1) * self.bucket_s)
            if hi > lo:
                self._add(pid, name, lo, amount * (hi - lo) / (t1 - t0))

    def feed(self, e: ev.Event) -> None:
        if isinstance(e, ev.Syscall):
            if self.syscalls:
                self._syscall(e)
        elif type(e) is ThreadCounts:
            self._counts(e)      # type: ignore[arg-type]
        elif type(e) is ev.ProcessIO and not self.syscalls:
            self._proc_io(e)     # type: ignore[arg-type]
        elif type(e) is ev.GpuSample and e.util_pct is not None:  # type: ignore[attr-defined]
            self.gpu.append((GPU_PID, f"GPU {e.gpu} utilization %", e.ts,  # type: ignore[attr-defined]
                             float(e.util_pct)))  # type: ignore[attr-defined]

    def _syscall(self, e: ev.Syscall) -> None:
        if e.ongoing:             # still running at the end: counted when done, as the kernel does
            return
        self._add(e.pid, SYSCALLS, e.ts, 1.0)
        if type(e) is ev.WriteCall and e.err is None and e.nbytes > 0:  # type: ignore[attr-defined]
            n = e.nbytes  # type: ignore[attr-defined]
            self._add(e.pid, WRITTEN, e.ts, n)
            if write_class(e.fd_kind, n, lambda: self.is_internal(e.pid, e.fd_target)) \
                    is IoClass.OUTPUT:
                self._add(e.pid, OUTPUT, e.ts, n)

    def _counts(self, e: ThreadCounts) -> None:
        c = contribution(e, self.is_internal)
        now = (e.ts, float(sum(c["syscalls"].values())), float(c.get("written_bytes", 0)),
               float(c.get("plain_bytes", 0)))
        t0, calls, written, output = self._kernel.get((e.pid, e.tid), (e.since, 0.0, 0.0, 0.0))
        self._kernel[(e.pid, e.tid)] = now
        self._spread(e.pid, SYSCALLS, t0, e.ts, now[1] - calls)
        self._spread(e.pid, WRITTEN, t0, e.ts, now[2] - written)
        self._spread(e.pid, OUTPUT, t0, e.ts, now[3] - output)

    def _proc_io(self, e: ev.ProcessIO) -> None:
        prev = self._io.get(e.pid)
        self._io[e.pid] = (e.ts, e.wchar, e.syscw)
        if prev is None:
            return
        t0, wchar, syscw = prev
        self._spread(e.pid, WRITTEN, t0, e.ts, e.wchar - wchar)
        self._spread(e.pid, OUTPUT, t0, e.ts,
                     proc_output_bytes(e.wchar - wchar, e.syscw - syscw))

    # ------------------------------------------------------------------ giving points
    def flush(self, emit: Emit, final: bool = False) -> None:
        """Give every bucket that can no longer change (all of them when ``final``).
        Memory is bounded by processes and a few open buckets: a bucket is given once events are
        two buckets past it; a late event counts in the oldest bucket still open. An amount spread
        over more than ``MAX_BUCKETS`` buckets (only a window whose end is not known first,
        export/window.py, allows one) is counted in its last bucket."""
        upto = None if final else self._latest - LATE_BUCKETS
        if upto is not None and self._given_to is not None and upto < self._given_to:
            return                                 # nothing closed since the last time
        self._given_to = None if upto is None else upto + 1
        for (pid, name), s in self.series.items():
            if not s.buckets:
                continue
            start = s.next if s.next is not None else min(s.buckets)
            last = max(s.buckets) if upto is None else min(upto, max(s.buckets))
            for b in range(start, last + 1):
                emit(pid, name, b * self.bucket_s, s.buckets.pop(b, 0.0) / self.bucket_s)
            s.next = max(start, last + 1)
        for point in self.gpu:
            emit(*point)
        self.gpu.clear()

    def pending(self) -> Any:
        """How many buckets are held (for the bounded-memory test)."""
        return sum(len(s.buckets) for s in self.series.values())
