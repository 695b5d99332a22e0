"""Read what the eBPF program counted (bpf/hangtrace.bpf.c) into ``events.ThreadCounts``.

Contract:
- ``KernelSnapshot.read(maps)`` takes one consistent picture of the counts (per-CPU caches
  and hash maps; its docstring says how); ``cancelled()`` (optional) is looked at every
  ``CHECK_ROWS`` rows and, when True, stops the read with ``SnapshotCancelled``. ``threads``
  is keyed (tgid, tid); ``maps``: name -> loader.MapView (either loader's).
- ``CountEmitter.events(snapshot, ts)`` turns a snapshot into one ThreadCounts per thread whose
  counts changed since the last call (all of them with ``every=True``); ``blocked_s`` leaves
  out the time of the calls that were streamed (``note_streamed``).
Nothing here writes to the kernel maps.
"""
from __future__ import annotations

import errno
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from .... import events as ev
from ....events.counts import ThreadCounts
from . import layout as L
from .loader import MapView

__all__ = ["ThreadTotals", "KernelSnapshot", "CountEmitter", "CATEGORY_KEYS", "fslot_fields",
           "SnapshotCancelled"]

CHECK_ROWS = 1024


class SnapshotCancelled(Exception):
    """A snapshot's ``cancelled()`` said stop (module doc)."""

# ht_tcount.cat / ht_cache.cat index -> (ThreadCounts field, key); accepts is a plain int.
CATEGORY_KEYS = {
    L.HT_CAT_FUTEX_WAITS: ("futex", "waits"),
    L.HT_CAT_FUTEX_WAITS_TIMEOUT: ("futex", "waits_timeout"),
    L.HT_CAT_FUTEX_TIMEOUTS: ("futex", "timeouts"),
    L.HT_CAT_FUTEX_WAKES: ("futex", "wakes"),
    L.HT_CAT_POLLS: ("polls", "calls"),
    L.HT_CAT_POLL_TIMEOUTS: ("polls", "timeouts"),
    L.HT_CAT_POLL_INFINITE: ("polls", "infinite"),
    L.HT_CAT_ACCEPTS: ("accepts", ""),
}
_KEY0 = bytes(4)   # the per-CPU cache's one key (u32 0)
_FD_SUMS = ("writes", "wbytes", "wsmall", "wsbytes", "reads", "rbytes")   # the others: min/max


@dataclass
class ThreadTotals:
    """One thread's counts in one snapshot, in the kernel's units (ns, syscall numbers)."""
    calls: Dict[int, List[int]] = field(default_factory=dict)      # nr -> [count, streamed, ns]
    fds: Dict[int, Dict[str, int]] = field(default_factory=dict)    # fd -> ht_fd fields
    cats: List[int] = field(default_factory=lambda: [0] * L.HT_NCATS)
    ioctls: Dict[Tuple[int, int], int] = field(default_factory=dict)  # (fd, request) -> calls
    fails: Dict[Tuple[int, int], int] = field(default_factory=dict)   # (nr, errno) -> calls

    def add_call(self, nr: int, count: int, streamed: int, ns: int) -> None:
        c = self.calls.setdefault(nr, [0, 0, 0])
        c[0] += count
        c[1] += streamed
        c[2] += ns

    def add_fd(self, fd: int, src: Mapping[str, int]) -> None:
        """Merge one ht_fd (from a map or a cache slot) as the kernel's flush_fd does."""
        if not src["writes"] and not src["reads"]:
            return
        d = self.fds.get(fd)
        if d is None:
            self.fds[fd] = dict(src)
            return
        if src["writes"]:
            d["wmin"] = src["wmin"] if not d["writes"] else min(d["wmin"], src["wmin"])
            d["wmax"] = max(d["wmax"], src["wmax"])
        for k in _FD_SUMS:
            d[k] += src[k]
        firsts = [v for v in (d["first_ns"], src["first_ns"]) if v]
        d["first_ns"] = min(firsts) if firsts else 0
        d["last_ns"] = max(d["last_ns"], src["last_ns"])


def _fd_fields(f: Any) -> Dict[str, int]:
    """ht_fd fields of a map value or of a cache slot (struct ht_fslot: the same names)."""
    return {n: int(getattr(f, n)) for n in L.FD_FIELDS}


def fslot_fields(f: L.HtFslot) -> Dict[str, int]:
    """ht_fd fields of a cache slot with the writes its "reps" stands for, each of size
    ``rep - 1``, added to the sums as the kernel's fd_settle does (bpf/ht_count.bpf.h); that
    size is already in the min and max."""
    d = _fd_fields(f)
    reps, n = int(f.reps), int(f.rep) - 1
    if reps and n >= 0:
        d["writes"] += reps
        d["wbytes"] += reps * n
        if n <= L.HT_SMALL_WRITE:
            d["wsmall"] += reps
            d["wsbytes"] += reps * n
    return d


class KernelSnapshot:
    """One consistent read of the counting maps (``read``)."""

    def __init__(self) -> None:
        self.threads: Dict[Tuple[int, int], ThreadTotals] = {}
        self.retries = 0
        self._cancelled: Callable[[], bool] = lambda: False

    def _t(self, tid: int, tgid: int) -> ThreadTotals:
        t = self.threads.get((tgid, tid))
        if t is None:
            t = self.threads[(tgid, tid)] = ThreadTotals()
        return t

    @staticmethod
    def _caches(maps: Mapping[str, MapView]) -> List[L.HtCache]:
        return [L.HtCache.from_buffer_copy(v) for v in maps["cache"].percpu(_KEY0)]

    def read(self, maps: Mapping[str, MapView],
             cancelled: Callable[[], bool] = lambda: False) -> "KernelSnapshot":
        """One consistent picture of the counts: the per-CPU caches, then the hash maps ("aggr",
        "fds", "tcounts", "ioctls", "fails"), then the caches again; when a cache's ``seq`` changed
        in between (a flush moved counts from a cache to the maps while we read) it reads again (at
        most 4 times, then keeps the last picture: counts later come out right). ``cancelled()`` is
        looked at every ``CHECK_ROWS`` rows: when True the read stops and raises
        ``SnapshotCancelled`` (a recording that ends does not wait for a periodic read of big maps:
        thread churn filled them with 65,536 rows, seconds of Python). A thread (a tid in a tgid:
        pid numbers are reused) is its map entries plus the cache of every CPU it owns; ``maps`` is
        a mapping name -> loader.MapView (either loader's; the hash maps read in batches)."""
        self._cancelled = cancelled
        for attempt in range(4):
            before = self._caches(maps)
            rows = {name: maps[name].items() for name in ("aggr", "fds", "tcounts", "ioctls")}
            rows["fails"] = maps["fails"].items() if "fails" in maps else []
            after = self._caches(maps)
            stable = all(a.seq == b.seq and a.seq % 2 == 0 for a, b in zip(before, after))
            if stable or attempt == 3:
                self.retries = attempt
                self._fill(rows, after)
                return self
        raise AssertionError("unreachable")  # pragma: no cover

    def _rows(self, rows: List[Tuple[bytes, bytes]]) -> Iterator[Tuple[bytes, bytes]]:
        for i, row in enumerate(rows):
            if i % CHECK_ROWS == 0 and self._cancelled():
                raise SnapshotCancelled()
            yield row

    def _fill(self, rows: Dict[str, List[Tuple[bytes, bytes]]], caches: List[L.HtCache]) -> None:
        self.threads = {}
        for k, v in self._rows(rows["aggr"]):
            key, agg = L.HtAggKey.from_buffer_copy(k), L.HtAgg.from_buffer_copy(v)
            self._t(key.tid, key.tgid).add_call(key.nr, agg.count, agg.streamed, agg.ns)
        for k, v in self._rows(rows["fds"]):
            key, f = L.HtFdKey.from_buffer_copy(k), L.HtFd.from_buffer_copy(v)
            self._t(key.tid, key.tgid).add_fd(key.fd, _fd_fields(f))
        for k, v in self._rows(rows["tcounts"]):
            key, tc = L.HtTkey.from_buffer_copy(k), L.HtTcount.from_buffer_copy(v)
            t = self._t(key.tid, key.tgid)
            for i in range(L.HT_NCATS):
                t.cats[i] += tc.cat[i]
        for k, v in self._rows(rows["ioctls"]):
            key, io = L.HtIocKey.from_buffer_copy(k), L.HtIoc.from_buffer_copy(v)
            t = self._t(key.tid, key.tgid)
            t.ioctls[(key.fd, key.request)] = t.ioctls.get((key.fd, key.request), 0) + io.count
        for k, v in self._rows(rows["fails"]):
            key, fl = L.HtFailKey.from_buffer_copy(k), L.HtFail.from_buffer_copy(v)
            t = self._t(key.tid, key.tgid)
            t.fails[(key.nr, key.err)] = t.fails.get((key.nr, key.err), 0) + fl.count
        for c in caches:
            if not c.tid:
                continue
            t = self._t(c.tid, c.tgid)
            for slot in c.c:
                if slot.count:
                    t.add_call(slot.nr, slot.count, slot.streamed, slot.ns)
            for fslot in c.f:
                t.add_fd(fslot.fd, fslot_fields(fslot))
            for i in range(L.HT_NCATS):
                t.cats[i] += c.cat[i]


FdLookup = Callable[[int, int], Optional[ev.FdInfo]]


class CountEmitter:
    """Snapshots -> ThreadCounts events, only for threads whose counts changed (``events``)."""

    def __init__(self, *, since: float, epoch: Callable[[int], float], name: Callable[[int], str],
                 fd_info: FdLookup) -> None:
        self.since = since
        self.epoch = epoch
        self.name = name
        self.fd_info = fd_info
        self.streamed_ns: Dict[Tuple[int, int, int], int] = {}   # (tgid, tid, nr) -> event ns
        self._last: Dict[Tuple[int, int], Any] = {}

    def note_streamed(self, tgid: int, tid: int, nr: int, ns: int) -> None:
        """A streamed call of ``ns`` spent blocked was emitted as an event."""
        key = (tgid, tid, nr)
        self.streamed_ns[key] = self.streamed_ns.get(key, 0) + max(0, ns)

    def events(self, snap: KernelSnapshot, ts: float, every: bool = False) -> List[ThreadCounts]:
        """One ThreadCounts per thread whose counts changed since the last call (all of them with
        ``every=True``): names from the syscall table, fd kinds/targets from the FdCache (re-read
        from /proc at most once a second per process while it lives, the last table read once it is
        gone), monotonic stamps to epoch seconds through the backend's Clock. ``blocked_s`` leaves
        out the time of the calls that were streamed (``streamed_ns``: the durations of the events
        the backend emitted)."""
        out = []
        for key, t in sorted(snap.threads.items()):
            if not every:       # (at stop, with every, no later call compares with it)
                state = (sorted((k, tuple(v)) for k, v in t.calls.items()),
                         sorted((k, tuple(sorted(v.items()))) for k, v in t.fds.items()),
                         tuple(t.cats), sorted(t.ioctls.items()), sorted(t.fails.items()))
                if self._last.get(key) == state:
                    continue
                self._last[key] = state
            out.append(self._event(key[0], key[1], t, ts))
        return out

    def _event(self, pid: int, tid: int, t: ThreadTotals, ts: float) -> ThreadCounts:
        calls: Dict[str, int] = {}
        streamed: Dict[str, int] = {}
        blocked_ns = 0
        for nr, (count, nstreamed, ns) in t.calls.items():
            name = self.name(nr)
            calls[name] = calls.get(name, 0) + count
            if nstreamed:
                streamed[name] = streamed.get(name, 0) + nstreamed
            blocked_ns += max(0, ns - self.streamed_ns.get((pid, tid, nr), 0))
        e = ThreadCounts(ts=ts, pid=pid, tid=tid, since=self.since, calls=calls,
                            streamed=streamed, blocked_s=round(blocked_ns / 1e9, 6))
        for fd, d in sorted(t.fds.items()):
            info = self.fd_info(pid, fd)
            e.per_fd.append({
                "fd": fd, "kind": info.kind if info else None, "target": info.target if info else "",
                "writes": d["writes"], "wbytes": d["wbytes"], "wmin": d["wmin"], "wmax": d["wmax"],
                "wsmall": d["wsmall"], "wsbytes": d["wsbytes"], "reads": d["reads"],
                "rbytes": d["rbytes"],
                "first": round(self.epoch(d["first_ns"]), 6) if d["first_ns"] else None,
                "last": round(self.epoch(d["last_ns"]), 6) if d["last_ns"] else None})
        for i, n in enumerate(t.cats):
            what, key = CATEGORY_KEYS[i]
            if not n:
                continue
            if what == "accepts":
                e.accepts += n
            else:
                getattr(e, what)[key] = n
        for (nr, err), n in sorted(t.fails.items()):
            key = f"{self.name(nr)}:{errno.errorcode.get(err, f'E{err}')}"
            e.failures[key] = e.failures.get(key, 0) + n
        for (fd, request), n in sorted(t.ioctls.items()):
            info = self.fd_info(pid, fd)
            e.ioctls.append({"fd": fd, "kind": info.kind if info else None,
                             "target": info.target if info else "", "request": request,
                             "calls": n})
        return e
