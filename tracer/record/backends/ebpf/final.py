"""What the eBPF backend emits at stop, from the kernel maps and a last look at /proc.

Contract: ``final_events(ctx)`` runs once, after the programs were detached and the ring
buffer drained, and before the BPF object is freed; ``ctx`` (``StopContext``) carries
everything it needs explicitly (no backend internals). It returns ``(events, errors)``: the
ongoing calls of the live threads, ``ThreadCounts``, ``ThreadCpu`` and ``ThreadSample`` per
thread and a ``Lost`` when the ring overflowed (the order and where each comes from:
``final_events``); ``errors`` has one line per kernel map that was full.
"""
from __future__ import annotations

import ctypes as ct
import time
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Set, Tuple

from msgspec.structs import replace

from .... import events as ev
from ....events.counts import ThreadCounts
from ....linux import procfs
from . import layout as L
from .convert import Clock, Converter
from .counts import CountEmitter, KernelSnapshot
from .inflight import MemReader, ongoing_call, read_mem
from .loader import MapView

__all__ = ["StopContext", "final_events", "blind_line", "BLIND_RUNS"]


@dataclass
class StopContext:
    maps: Mapping[str, MapView]                  # BPF maps by name (read only)
    clock: Clock
    conv: Converter
    kinds: Dict[int, int]                        # nr -> kind (ebpf_layout.kinds_for)
    start_ts: float                              # attach (epoch s)
    start_samples: Dict[int, ev.ThreadSample]    # tid -> its sample at attach
    born: Dict[int, float]                       # tid -> epoch s of its fork
    live: Dict[int, List[int]]                   # pid -> tids, processes still running
    exited_cpu: List[ev.ThreadCpu]
    emitter: CountEmitter
    mem: MemReader = read_mem
    errors: List[str] = field(default_factory=list)
    still: Set[int] = field(default_factory=set)  # processes that did not run since the attach


def _threads(maps: Mapping[str, MapView]) -> Dict[int, L.HtThread]:
    out = {}
    for k, v in maps["threads"].items():
        out[ct.c_uint32.from_buffer_copy(k).value] = L.HtThread.from_buffer_copy(v)
    return out


def _counter(maps: Mapping[str, MapView], idx: int) -> int:
    raw = maps["counters"].get(bytes(ct.c_uint32(idx)))
    return ct.c_uint64.from_buffer_copy(raw).value if raw else 0


def final_events(ctx: StopContext) -> Tuple[List[ev.Event], List[str]]:
    """``(events, errors)`` at stop, the events in this order:

    1. the calls the live threads are blocked in, as ``ongoing`` events (ebpf/inflight.py), dated
    from when the thread went to sleep in them (the kernel's blocked_ns; the attach time for a
    thread asleep since before it);

    2. ``ThreadCounts`` for every thread the kernel counted, exited ones included (ebpf/counts.py);

    3. ``ThreadCpu`` for every thread: live ones from /proc schedstat (exact; the first sample at
    attach, or 0 for a thread born since), exited ones as the kernel measured them at exit;

    4. ``ThreadSample`` for every live thread;

    5. ``Lost`` when the ring buffer overflowed (calls counted, but their details are lost).

    ``errors`` has one line per kernel map that was full."""
    now_ns = ctx.clock.now_ns()
    stop_ts = ctx.clock.epoch(now_ns)
    threads = _threads(ctx.maps)
    out: List[ev.Event] = []
    samples: Dict[int, ev.ThreadSample] = {}
    for pid, tids in ctx.live.items():
        for tid in tids:
            s = _sample(ctx, pid, tid)
            if s is None:
                continue
            samples[tid] = s
            if s.state not in ("S", "D") or not s.syscall:
                continue
            st = threads.get(tid)
            since = ctx.clock.epoch(st.blocked_ns) if st is not None and st.blocked_ns else None
            if since is None:
                first = ctx.start_samples.get(tid)
                since = ctx.start_ts if first is not None and first.state in ("S", "D") else stop_ts
            e = ongoing_call(ctx.conv, pid, tid, s.syscall, ctx.kinds, since,
                             stop_ts - since, ctx.mem)
            if e is not None:
                out.append(e)
    counted = ctx.emitter.events(KernelSnapshot().read(ctx.maps), stop_ts, every=True)
    out.extend(counted)
    blind = blind_line(ctx.start_samples, samples, threads, bool(ctx.exited_cpu) or any(
        isinstance(e, ThreadCounts) for e in counted))
    if blind:
        ctx.errors.append(blind)
    for pid, tids in ctx.live.items():
        for tid in tids:
            cpu = _live_cpu(ctx, pid, tid, samples.get(tid), threads.get(tid), now_ns, stop_ts)
            if cpu is not None:
                out.append(cpu)
    out.extend(ctx.exited_cpu)
    out.extend(samples.values())
    full = _counter(ctx.maps, L.HT_C_RINGBUF_FULL)
    if full:
        out.append(ev.Lost(ts=stop_ts, count=int(full),
                           reason="eBPF ring buffer full: calls counted, their details lost"))
    for idx, what in ((L.HT_C_THREADS_FULL, "threads"), (L.HT_C_AGG_FULL, "syscall counts"),
                      (L.HT_C_FDS_FULL, "per-fd counts"), (L.HT_C_IOCTLS_FULL, "ioctl counts")):
        n = _counter(ctx.maps, idx)
        if n:
            ctx.errors.append(f"ebpf: the kernel map for {what} was full {n} times")
    return out, ctx.errors


# /proc's run counts of the tree (times a thread was put on a CPU) that say it ran for sure
BLIND_RUNS = 3


def blind_line(first: Mapping[int, ev.ThreadSample], last: Mapping[int, ev.ThreadSample],
               threads: Mapping[int, L.HtThread], counted: bool) -> Optional[str]:
    """One line when the kernel programs saw nothing of a tree that /proc shows running: no
    call counted, no exit and no context switch of any of its threads (``threads``' switches,
    which sched_switch counts for every followed thread, a pure CPU spinner's preemptions
    too), while its threads' schedstat run counts went up ``BLIND_RUNS`` times or more from
    the attach (``first``) to the stop (``last``). Its counts are then missing, not zero (a
    program that numbers pids otherwise than hangtrace: issue 42), and the report says so
    rather than calling the tree idle. None when eBPF saw something, or /proc shows no run."""
    if counted or any(threads[t].switches for t in last if t in threads):
        return None
    ran = cpu_ns = 0
    for tid, s in last.items():
        f = first.get(tid)
        if f is None or s.run_count is None or f.run_count is None:
            continue
        ran += max(0, s.run_count - f.run_count)
        cpu_ns += max(0, (s.run_ns or 0) - (f.run_ns or 0))
    if ran < BLIND_RUNS:
        return None
    cpu = f", {cpu_ns / 1e9:.2f} s of CPU" if cpu_ns >= 10_000_000 else ""
    return (f"eBPF saw no call, switch or exit of the traced tree while /proc shows it ran "
            f"({ran} times on a CPU{cpu}): its counts are missing, "
            "not zero, and the verdict cannot rest on them; record with -b proc or -b strace "
            "(hangtrace doctor says what this eBPF sees)")


def _sample(ctx: StopContext, pid: int, tid: int) -> Optional[ev.ThreadSample]:
    """The thread's look at /proc now: for a process that did not run since its first one
    (``still``: its threads' run counts, exact), that first look, dated now."""
    first = ctx.start_samples.get(tid) if pid in ctx.still else None
    if first is not None:
        return replace(first, ts=time.time())
    return procfs.read_thread_sample(pid, tid, ts=time.time())


def _live_cpu(ctx: StopContext, pid: int, tid: int, s: ev.ThreadSample | None,
              st: L.HtThread | None, now_ns: int, stop_ts: float) -> ev.ThreadCpu | None:
    """On-CPU time of a live thread since the attach (or its birth): schedstat's exact sum
    where /proc has it, else the kernel's slices (without the one in progress)."""
    born = ctx.born.get(tid)
    since = max(ctx.start_ts, born) if born is not None else ctx.start_ts
    first = ctx.start_samples.get(tid)
    base = None                                   # (run_ns, run_count) at the attach
    if first is not None and first.run_ns is not None:
        base = (first.run_ns, first.run_count or 0)
    elif first is None and born is not None:
        base = (0, 0)                             # born after the attach
    if s is not None and s.run_ns is not None and base is not None:
        return ev.ThreadCpu(ts=stop_ts, pid=pid, tid=tid, since=since,
                            on_cpu_ns=max(0, s.run_ns - base[0]),
                            switches=max(0, (s.run_count or 0) - base[1]))
    if st is None:
        return None
    return ev.ThreadCpu(ts=stop_ts, pid=pid, tid=tid, since=since, on_cpu_ns=int(st.on_cpu_ns),
                        switches=int(st.switches))
