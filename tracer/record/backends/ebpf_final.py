"""What the eBPF backend emits at stop, from the kernel maps and a last look at /proc.

Contract: ``final_events(backend)`` runs once, after the ring buffer is drained and before the
BPF object is freed, and returns (in this order):
1. summary ``Syscall`` events: one per (thread, call) for the calls the kernel counted but did
   not stream (kinds never streamed, and streamed kinds over the per-thread rate), from
   "aggr" and the live threads' count caches; ``args`` reads "<N calls counted in kernel>",
   ``ts`` is the attach time, ``dur`` their share of the kernel's total_ns, which for calls
   counted only is the time they spent blocked (the kernel reads no clock for a call that
   does not leave the CPU), so a lower bound of their time;
2. the calls in flight at stop as ``ongoing`` events (ret None, dur = stop - enter): from the
   kernel's in-flight state when the enter was seen (a call counted only is dated from when
   it first left the CPU, or now if it never did; one over the stream rate has its arguments
   from /proc/PID/task/TID/syscall, the kernel kept none); for a thread never seen entering or
   leaving a call, from /proc/PID/task/TID/syscall when it reads the same blocking call at
   attach and at stop (ts = attach time);
3. ``ThreadCpu`` for every thread (live ones measured up to now, exited ones at their exit);
4. ``ThreadSample`` for every live thread;
5. ``Lost`` for rate-limited calls (the sum of the kernel's per-(tid, nr) dropped counts) and
   ring-buffer overflow (the evidence is incomplete).
"""
from __future__ import annotations

import ctypes as ct
import time
from typing import TYPE_CHECKING, Dict, List, Tuple

from ... import events as ev
from ...linux import procfs
from ...linux.syscall_table import parse_proc_syscall, syscall_name
from . import ebpf_layout as L
from .ebpf_convert import aux_from_registers, flags_from_registers

if TYPE_CHECKING:  # pragma: no cover
    from .ebpf_backend import EbpfBackend


def _strip(text: str) -> str:
    """A /proc .../syscall line without sp/pc (they move while the call stays the same)."""
    parts = text.split()
    return " ".join(parts[:7]) if len(parts) >= 9 else text


def final_events(be: "EbpfBackend") -> List[ev.Event]:
    b = be._bpf
    clock = be._clock
    now_ns = clock.now_ns()
    stop_ts = clock.epoch(now_ns)
    start_ts = be._start_ts
    out: List[ev.Event] = []

    # 1. calls counted in the kernel only: "aggr" plus what live threads still hold in their
    #    count cache (exited threads flushed theirs to "aggr" in the kernel)
    threads: Dict[int, L.HtThread] = {}
    for k, v in b[b"threads"].items():
        threads[ct.c_uint32.from_buffer_copy(bytes(k)).value] = \
            L.HtThread.from_buffer_copy(bytes(v))
    counts: Dict[Tuple[int, int], List[int]] = {}   # (tid, nr) -> [count, ns, dropped, tgid]
    for k, v in b[b"aggr"].items():
        key = L.HtAggKey.from_buffer_copy(bytes(k))
        agg = L.HtAgg.from_buffer_copy(bytes(v))
        c = counts.setdefault((key.tid, _s32(key.nr)), [0, 0, 0, agg.tgid])
        c[0] += agg.count
        c[1] += agg.total_ns
        c[2] += agg.dropped
    for tid, st in threads.items():
        for i in range(L.HT_AGG_SLOTS):
            if st.c_count[i] or st.c_dropped[i]:
                c = counts.setdefault((tid, st.c_nr[i]), [0, 0, 0, st.tgid])
                c[0] += st.c_count[i]
                c[1] += st.c_ns[i]
                c[2] += st.c_dropped[i]
    dropped = 0
    for (tid, nr), (count, total_ns, ndropped, tgid) in sorted(counts.items()):
        dropped += ndropped
        streamed = be._streamed.get((tid, nr), 0)
        n = count - streamed
        if n <= 0:
            continue
        pid = tgid or be._pid_of.get(tid, tid)
        # total_ns covers every call; give the summary the share of the unstreamed ones.
        share = total_ns * n / count if count else 0
        out.append(ev.Syscall(ts=start_ts, pid=pid, tid=tid, name=syscall_name(nr),
                              args=f"<{n} calls counted in kernel"
                                   + (f", {streamed} streamed>" if streamed else ">"),
                              ret=None, dur=share / 1e9))

    # 2-3. in-flight calls and CPU of live threads
    live: Dict[int, List[int]] = {}
    assert be._targets is not None
    for pid in be._targets.pids():
        if pid in be._exited:
            continue
        tids = procfs.list_tids(pid)
        if tids:
            live[pid] = tids
    for pid, tids in live.items():
        for tid in tids:
            st = threads.get(tid)
            # enter_ns 0: an untimed call that has not left the CPU since it began (now, then)
            enter_ns = (st.enter_ns or now_ns) if st is not None else now_ns
            dur = max(0.0, (now_ns - enter_ns) / 1e9)
            if st is not None and st.flags & L.HT_T_IN_CALL and st.cflags & L.HT_F_DROPPED:
                # over the stream rate at enter: the kernel kept no arguments, /proc has them
                out.append(_in_flight_from_proc(be, pid, tid, st, clock.epoch(enter_ns), dur))
            elif st is not None and st.flags & L.HT_T_IN_CALL:
                out.append(be._conv.syscall(
                    ts=clock.epoch(enter_ns), pid=pid, tid=tid, name=syscall_name(st.nr),
                    kind=st.kind, args=list(st.args), ret=None, dur=dur, flags=st.cflags,
                    aux=st.aux, pfds=list(st.pfds)))
            elif st is None or not st.flags & L.HT_T_SEEN:
                e = _blocked_since_attach(be, pid, tid, start_ts, stop_ts)
                if e is not None:
                    out.append(e)
            if st is not None:
                on = st.on_cpu_ns + (now_ns - st.last_in_ns if st.flags & L.HT_T_ON_CPU else 0)
                since = max(start_ts, be._born.get(tid, start_ts))
                out.append(ev.ThreadCpu(ts=stop_ts, pid=pid, tid=tid, since=since,
                                        on_cpu_ns=int(on), switches=int(st.switches)))
    out.extend(be._exited_cpu)

    # 4. a last look at every live thread
    for pid, tids in live.items():
        for tid in tids:
            s = procfs.read_thread_sample(pid, tid, ts=time.time())
            if s is not None:
                out.append(s)

    # 5. what did not come one by one
    counters = b[b"counters"]
    full = counters[ct.c_int(L.HT_C_RINGBUF_FULL)].value
    limited = dropped   # the kernel counts them per (tid, nr) only (ht_agg.dropped)
    if full:
        out.append(ev.Lost(ts=stop_ts, count=int(full),
                           reason="eBPF ring buffer full: calls counted but not streamed"))
    if limited:
        out.append(ev.Lost(ts=stop_ts, count=int(limited),
                           reason=f"eBPF rate limit ({L.HT_RATE_MAX} calls per thread per "
                                  f"{L.HT_RATE_WINDOW_NS // 1_000_000} ms): calls counted "
                                  "in the kernel, not streamed one by one"))
    for idx, what in ((L.HT_C_THREADS_FULL, "threads"), (L.HT_C_AGG_FULL, "syscall counts"),
                      (L.HT_C_TARGETS_FULL, "processes")):
        n = counters[ct.c_int(idx)].value
        if n:
            be.errors.append(f"ebpf: the kernel map for {what} was full {n} times")
    return out


def _s32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def _in_flight_from_proc(be: "EbpfBackend", pid: int, tid: int, st: L.HtThread, ts: float,
                         dur: float) -> ev.Event:
    """A call in flight at stop whose arguments the kernel did not keep (HT_F_DROPPED): they
    are in /proc/PID/task/TID/syscall while the thread is still inside that call."""
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall") as f:
            cs = parse_proc_syscall(f.read().strip())
    except OSError:
        cs = None
    kind = st.kind if st.kind <= L.HT_K_STREAMED_MAX else L.HT_K_NONE
    if cs is None or cs.kind != "syscall" or cs.nr != st.nr:
        # it left the call since the kernel state was read: an ongoing call without arguments
        return be._conv.syscall(ts=ts, pid=pid, tid=tid, name=syscall_name(st.nr),
                                kind=L.HT_K_NONE, args=[], ret=None, dur=dur)
    return be._conv.syscall(ts=ts, pid=pid, tid=tid, name=syscall_name(st.nr), kind=kind,
                            args=list(cs.args), ret=None, dur=dur,
                            flags=flags_from_registers(kind, cs.args),
                            aux=aux_from_registers(kind, cs.args))


def _blocked_since_attach(be: "EbpfBackend", pid: int, tid: int, start_ts: float,
                          stop_ts: float) -> ev.Event | None:
    """The call a thread sat in from before the attach to now, when /proc shows it twice."""
    first = be._start_samples.get(tid)
    if first is None:
        return None
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall") as f:
            now_text = f.read().strip()
    except OSError:
        return None
    if not first.syscall or _strip(first.syscall) != _strip(now_text):
        return None
    cs = parse_proc_syscall(now_text)
    if cs is None or cs.kind != "syscall" or cs.nr is None:
        return None
    kind = be._kinds.get(cs.nr, L.HT_K_NONE)
    if kind > L.HT_K_STREAMED_MAX:
        kind = L.HT_K_NONE
    return be._conv.syscall(ts=start_ts, pid=pid, tid=tid, name=syscall_name(cs.nr), kind=kind,
                            args=list(cs.args), ret=None, dur=max(0.0, stop_ts - start_ts),
                            flags=flags_from_registers(kind, cs.args),
                            aux=aux_from_registers(kind, cs.args))
