"""Reading the kernel's counts (ebpf/counts.py) and the calls in flight at stop
(ebpf/inflight.py) from fake maps (loader.MapView), /proc lines and memory: no root, no BCC.
"""
from __future__ import annotations

import struct

from tracer import events as ev
from tracer.linux.syscall_table import X86_64, syscall_name
from tracer.record.backends.ebpf import layout as L
from tracer.record.backends.ebpf.convert import Converter, FdCache
from tracer.record.backends.ebpf.counts import CountEmitter, KernelSnapshot
from tracer.record.backends.ebpf.inflight import ongoing_call

NR = {name: nr for nr, name in X86_64.items()}


class FakeMap:
    """A loader.MapView over ctypes (key, value) pairs, or per-CPU values for key 0."""

    def __init__(self, pairs=(), caches=None):
        self.pairs = [(bytes(k), bytes(v)) for k, v in pairs]
        self.caches = caches

    def items(self):
        return list(self.pairs)

    def get(self, key):
        return dict(self.pairs).get(key)

    def set(self, key, value, only_new=False):
        raise AssertionError("the readers never write to the kernel maps")

    def percpu(self, key):
        assert key == bytes(4)
        return [bytes(c) for c in self.caches]


def _maps(caches, aggr=(), fds=(), tcounts=(), ioctls=(), fails=()):
    return {"cache": FakeMap(caches=caches), "aggr": FakeMap(aggr), "fds": FakeMap(fds),
            "tcounts": FakeMap(tcounts), "ioctls": FakeMap(ioctls), "fails": FakeMap(fails)}


def _cache(tid, tgid, seq=0):
    c = L.HtCache(tid=tid, tgid=tgid, seq=seq)
    for i in range(L.HT_FD_SLOTS):
        c.f[i].fd = -1
    return c


def test_a_thread_is_its_map_entries_plus_the_caches_it_owns():
    c0, c1 = _cache(7, 5), _cache(8, 5)
    c0.c[2].nr, c0.c[2].count, c0.c[2].streamed, c0.c[2].ns = NR["futex"], 10, 4, 1000
    f = c0.f[3]
    f.fd, f.writes, f.wbytes, f.wmin, f.wmax = 3, 5, 50, 2, 20
    f.first_ns, f.last_ns = 200, 900
    c0.cat[L.HT_CAT_FUTEX_WAKES] = 3
    aggr = [(L.HtAggKey(7, 5, NR["futex"]), L.HtAgg(count=90, streamed=6, ns=500)),
            (L.HtAggKey(9, 5, NR["getpid"]), L.HtAgg(count=1)),
            (L.HtAggKey(7, 6, NR["getpid"]), L.HtAgg(count=2))]   # tid 7 reused by pid 6
    fds = [(L.HtFdKey(7, 5, 3), L.HtFd(writes=2, wbytes=4, wmin=1, wmax=3, first_ns=100,
                                       last_ns=150))]
    snap = KernelSnapshot().read(_maps([c0, c1], aggr, fds))
    t7 = snap.threads[(5, 7)]
    assert t7.calls[NR["futex"]] == [100, 10, 1500]
    assert t7.fds[3]["writes"] == 7 and t7.fds[3]["wbytes"] == 54
    assert (t7.fds[3]["wmin"], t7.fds[3]["wmax"]) == (1, 20)
    assert (t7.fds[3]["first_ns"], t7.fds[3]["last_ns"]) == (100, 900)
    assert t7.cats[L.HT_CAT_FUTEX_WAKES] == 3
    assert set(snap.threads) == {(5, 7), (5, 8), (5, 9), (6, 7)}
    assert snap.threads[(5, 9)].calls[NR["getpid"]][0] == 1
    assert snap.threads[(6, 7)].calls == {NR["getpid"]: [2, 0, 0]}


def test_a_cache_slot_s_repeated_writes_are_added_as_the_kernel_settles_them():
    """The fast path counts a write of the size of the slot's last write counted in full as one
    more of it ("reps", each of size rep - 1: hangtrace.h struct ht_fslot); a reader adds them
    to the sums as fd_settle does (a small size to the small-write counts too); a slot with
    none pending, or no size noted, reads as it is."""
    c0, c1 = _cache(7, 5), _cache(8, 5)
    f = c0.f[3]   # 2 writes counted in full (1 and 100 bytes), then 1000 more of 1 byte
    f.fd, f.writes, f.wbytes, f.wmin, f.wmax, f.wsmall, f.wsbytes = 3, 2, 101, 1, 100, 1, 1
    f.reads, f.rbytes, f.first_ns, f.last_ns = 4, 40, 10, 20
    f.rep, f.reps = 1 + 1, 1000
    g = c0.f[4]   # 1 write of 50 bytes counted in full, then 7 more of it
    g.fd, g.writes, g.wbytes, g.wmin, g.wmax, g.first_ns, g.last_ns = 4, 1, 50, 50, 50, 10, 20
    g.rep, g.reps = 50 + 1, 7
    h = c1.f[3]   # another thread's slot: a size noted, none pending
    h.fd, h.writes, h.wbytes, h.wmin, h.wmax, h.first_ns, h.last_ns = 3, 1, 9, 9, 9, 10, 20
    h.rep = 9 + 1
    snap = KernelSnapshot().read(_maps([c0, c1]))
    three, four = snap.threads[(5, 7)].fds[3], snap.threads[(5, 7)].fds[4]
    assert (three["writes"], three["wbytes"], three["wmin"], three["wmax"]) == (1002, 1101, 1, 100)
    assert (three["wsmall"], three["wsbytes"], three["reads"], three["rbytes"]) == (1001, 1001, 4, 40)
    assert (four["writes"], four["wbytes"], four["wsmall"], four["wsbytes"]) == (8, 400, 0, 0)
    assert snap.threads[(5, 8)].fds[3]["writes"] == 1
    assert snap.threads[(5, 8)].fds[3]["wbytes"] == 9


class _Flushing(FakeMap):
    """A cache map whose seq moves on the first reads, as if a flush ran meanwhile."""

    def __init__(self, caches):
        super().__init__(caches=caches)
        self.reads = 0

    def percpu(self, key):
        self.reads += 1
        out = [L.HtCache.from_buffer_copy(bytes(c)) for c in self.caches]
        if self.reads <= 2:
            out[0].seq = self.reads   # 1 (odd: mid-flush), then 2: changed under the reader
        return [bytes(c) for c in out]


def test_a_flush_during_the_read_makes_it_read_again():
    table = _Flushing([_cache(7, 5, seq=4)])
    maps = _maps([])
    maps["cache"] = table
    snap = KernelSnapshot().read(maps)
    assert snap.retries == 1 and table.reads == 4


def test_emitter_gives_names_fd_kinds_wall_clock_and_only_what_changed():
    c = _cache(7, 5)
    c.c[0].nr, c.c[0].count, c.c[0].streamed, c.c[0].ns = NR["futex"], 10, 4, 3_000_000_000
    f = c.f[3]
    f.fd, f.writes, f.wbytes, f.first_ns, f.last_ns = 3, 1, 9, 1, 2
    c.cat[L.HT_CAT_POLL_TIMEOUTS], c.cat[L.HT_CAT_ACCEPTS] = 2, 1
    ioctls = [(L.HtIocKey(7, 5, 4, 0xc020462a), L.HtIoc(count=3))]
    em = CountEmitter(since=1.0, epoch=lambda ns: 1000.0 + ns, name=syscall_name,
                      fd_info=lambda pid, fd: ev.FdInfo(fd, "null", "/dev/null"))
    em.note_streamed(5, 7, NR["futex"], 1_000_000_000)
    snap = KernelSnapshot().read(_maps([c], ioctls=ioctls))
    [e] = em.events(snap, ts=5.0)
    assert (e.pid, e.tid, e.since) == (5, 7, 1.0)
    assert e.calls == {"futex": 10} and e.streamed == {"futex": 4}
    assert e.blocked_s == 2.0     # 3 s blocked in all, 1 s of it in the streamed calls
    assert e.per_fd == [{"fd": 3, "kind": "null", "target": "/dev/null", "writes": 1,
                         "wbytes": 9, "wmin": 0, "wmax": 0, "wsmall": 0, "wsbytes": 0,
                         "reads": 0, "rbytes": 0, "first": 1001.0, "last": 1002.0}]
    assert e.polls == {"timeouts": 2} and e.accepts == 1
    assert e.ioctls == [{"fd": 4, "kind": "null", "target": "/dev/null",
                         "request": 0xc020462a, "calls": 3}]
    assert em.events(snap, ts=6.0) == []                  # nothing changed
    assert len(em.events(snap, ts=7.0, every=True)) == 1  # at stop: all of them


def test_failed_calls_by_name_and_errno():
    fails = [(L.HtFailKey(7, 5, NR["connect"], 111), L.HtFail(count=6)),
             (L.HtFailKey(7, 5, NR["openat"], 2), L.HtFail(count=1)),
             (L.HtFailKey(7, 5, NR["connect"], 4000), L.HtFail(count=1))]
    em = CountEmitter(since=1.0, epoch=lambda ns: 1000.0 + ns, name=syscall_name,
                      fd_info=lambda pid, fd: None)
    [e] = em.events(KernelSnapshot().read(_maps([_cache(7, 5)], fails=fails)), ts=5.0)
    assert e.failures == {"connect:ECONNREFUSED": 6, "openat:ENOENT": 1, "connect:E4000": 1}


# ---------------------------------------------------------------- calls in flight at stop
def _mem(table):
    def mem(pid, addr, size):
        data = table.get(addr)
        return data[:size] if data is not None and len(data) >= size else None
    return mem


def _line(name, *args):
    a = list(args) + [0] * (6 - len(args))
    return f"{NR[name]} " + " ".join(f"{v:#x}" for v in a) + " 0x7ffc0 0x7f000"


class _NoFds(FdCache):
    def get(self, pid, fd):
        return {3: ev.FdInfo(3, "pipe", "pipe:[9]")}.get(fd)

    def epoll_kinds(self, pid, epfd):
        return ("eventfd",)


CONV = Converter(_NoFds())
KINDS = L.kinds_for(X86_64)


def test_a_futex_wait_gets_its_timeout_from_the_target_memory():
    ts = struct.pack("<qq", 2, 500_000_000)
    e = ongoing_call(CONV, 5, 7, _line("futex", 0x1000, 0x80, 0, 0x2000), KINDS, 10.0, 3.0,
                     _mem({0x2000: ts}))
    assert isinstance(e, ev.FutexCall) and e.ongoing and e.ret is None
    assert (e.op, e.addr, e.private, e.timeout, e.dur) == ("WAIT", 0x1000, True, 2.5, 3.0)
    # NULL: no timeout; WAIT_BITSET: an absolute deadline; unreadable: a limit of unknown length
    e = ongoing_call(CONV, 5, 7, _line("futex", 0x1000, 0x80), KINDS, 10.0, 3.0, _mem({}))
    assert e.timeout is None
    e = ongoing_call(CONV, 5, 7, _line("futex", 0x1000, 0x89, 0, 0x2000), KINDS, 1, 1, _mem({}))
    assert e.op == "WAIT_BITSET" and e.timeout == -1.0
    e = ongoing_call(CONV, 5, 7, _line("futex", 0x1000, 0x80, 0, 0x2000), KINDS, 1, 1, _mem({}))
    assert e.timeout == -1.0


def test_polls_reads_ioctls_and_waits_in_flight():
    e = ongoing_call(CONV, 5, 7, _line("poll", 0x3000, 2, 0xffffffff), KINDS, 1, 1,
                     _mem({0x3000: struct.pack("<ihhihh", 3, 1, 0, 4, 1, 0)}))
    assert isinstance(e, ev.PollCall) and e.timeout is None and e.fd_kinds == ("pipe",)
    e = ongoing_call(CONV, 5, 7, _line("ppoll", 0x3000, 1, 0x4000), KINDS, 1, 1,
                     _mem({0x4000: struct.pack("<qq", 0, 100_000_000)}))
    assert e.timeout == 0.1
    e = ongoing_call(CONV, 5, 7, _line("epoll_wait", 6, 0x10, 8, 500), KINDS, 1, 1, _mem({}))
    assert e.timeout == 0.5 and e.fd_kinds == ("eventfd",)
    e = ongoing_call(CONV, 5, 7, _line("read", 3, 0x10, 8), KINDS, 1, 1, _mem({}))
    assert isinstance(e, ev.ReadCall) and e.fd == 3 and e.fd_kind == "pipe" and e.ongoing
    e = ongoing_call(CONV, 5, 7, _line("write", 3, 0x10, 8), KINDS, 1, 1, _mem({}))
    assert isinstance(e, ev.WriteCall) and e.fd_target == "pipe:[9]"
    rm = 0xc020462a   # _IOWR('F', 0x2a, 32): NV_ESC_RM_CONTROL
    e = ongoing_call(CONV, 5, 7, _line("ioctl", 3, rm, 0x5000), KINDS, 1, 1,
                     _mem({0x5008: struct.pack("<I", 0x20800403)}))
    assert isinstance(e, ev.IoctlCall) and e.request_name == "RM_CONTROL cmd=0x20800403"
    e = ongoing_call(CONV, 5, 7, _line("wait4", 0xffffffff, 0, 0), KINDS, 1, 1, _mem({}))
    assert isinstance(e, ev.WaitChild) and e.child == -1
    assert ongoing_call(CONV, 5, 7, "running", KINDS, 1, 1, _mem({})) is None
    assert ongoing_call(CONV, 5, 7, "-1 0x7ffc0 0x7f000", KINDS, 1, 1, _mem({})) is None


def test_a_lock_wait_that_began_before_the_recording_names_its_fd():
    """flock and fcntl(F_SETLKW) in flight: the fd and the lock command, as strace prints
    them, so that the wait-for graph finds the lock's holder in /proc/locks (issue 30)."""
    from tracer.analysis.vocab.waits import waits_for_lock
    e = ongoing_call(CONV, 5, 7, _line("flock", 3, 2), KINDS, 1, 1, _mem({}))
    assert (e.fd, e.fd_kind, e.fd_target, e.args) == (3, "pipe", "pipe:[9]", "3, LOCK_EX")
    assert waits_for_lock(e)
    e = ongoing_call(CONV, 5, 7, _line("fcntl", 3, 7, 0x6000), KINDS, 1, 1, _mem({}))
    assert e.args == "3, F_SETLKW" and waits_for_lock(e)
    e = ongoing_call(CONV, 5, 7, _line("fcntl", 3, 6, 0x6000), KINDS, 1, 1, _mem({}))
    assert e.args == "3, F_SETLK" and not waits_for_lock(e)
