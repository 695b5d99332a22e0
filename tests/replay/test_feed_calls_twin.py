"""The compiled loop over calls (tracer/analysis/accumulate/csrc/feed.c, ``feed_calls``) leaves
an accumulator exactly as the pure-Python loop does (analysis/accumulate/calls.py, the
reference): every thread's statistics, the process table, the futex wakers, lock holders and
followed fds, the first and last times, and the report, on every recorded trace under fixtures/
and on random calls of every class (odd results, failures past the kinds kept, accepts, reads
of every fd kind, closes and dups of followed sockets, a log without times). The module comes
from conftest's compiled_helpers."""
import glob
import os
import random

import pytest

from tracer import events as ev
from tracer.analysis.analyzer import Analyzer
from tracer.load.trace import analyzer_for, trace_notes
from tracer.tracefile.format import TraceReader

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRACES = sorted(glob.glob(os.path.join(ROOT, "fixtures", "traces", "*.htrace.gz"))
                + glob.glob(os.path.join(ROOT, "fixtures", "gpu", "traces", "*.htrace.gz")))


def _state(an: Analyzer) -> dict:
    acc = an.acc
    return {"threads": acc.threads, "processes": acc.processes, "wakers": acc.futex_wakers,
            "locks": acc.lock_holders, "times": (acc.start, acc.last_ts),
            "followed": {pid: fds for pid, fds in acc._traffic_fds.items() if fds},
            "by_pid": {pid: [t.tid for t in ts] for pid, ts in acc._threads_by_pid.items()}}


def _both(make, batches, fast):
    """(pure analyzer, compiled analyzer), each fed ``batches``."""
    out = []
    for calls in (None, fast.feed_calls):
        an = make()
        an.feed_batches(batches, calls)
        out.append(an)
    return out


def test_traces_feed_alike(compiled_helpers):
    assert len(TRACES) > 100
    for path in TRACES:
        reader = TraceReader(path)
        batches = list(reader.batches())
        pure, fast = _both(lambda: analyzer_for(reader), batches, compiled_helpers)
        a, b = _state(pure), _state(fast)
        assert a == b, path
        end = reader.info.end.ts if reader.info.end is not None else None
        reports = [an.report(end=end, trace_path=path, extra_notes=trace_notes(reader.info))
                   for an in (pure, fast)]
        assert reports[0].to_json() == reports[1].to_json(), path


_NAMES = ["read", "pread64", "recvfrom", "accept", "accept4", "write", "sendto", "openat",
          "close", "dup2", "dup3", "nanosleep", "clock_nanosleep", "sched_yield", "connect",
          "flock", "fcntl", "clock_gettime", "gettimeofday", "ioctl", "futex", "poll",
          "epoll_wait", "wait4", "mmap"]
_KINDS = [None, "", "file", "dir", "tty", "pipe", "fifo", "unix", "tcp", "udp", "socket",
          "eventfd", "null", "nvidiactl", "epoll"]
_TARGETS = [None, "", "/x", "pipe:[7]", "TCP:[1.2.3.4:5->6.7.8.9:10]", "UNIX-STREAM:[3->4]"]
_ERRS = [None] * 6 + ["EAGAIN", "ETIMEDOUT", "EINTR"] + [f"E{i}" for i in range(40)]
_RETS = [None, -1, 0, 0, 1, 7, 4096, 1 << 40, -(1 << 62)]


def _call(rnd: random.Random, ts: float) -> ev.Event:
    pid = rnd.choice([10, 11])
    base = dict(ts=ts, pid=pid, tid=rnd.choice([pid, pid, pid + 100, pid + 200]),
                name=rnd.choice(_NAMES), args=rnd.choice(["", "3, LOCK_EX", "3, F_UNLCK",
                                                          "CLOCK_MONOTONIC, {tv_sec=5}"]),
                ret=rnd.choice(_RETS), err=rnd.choice(_ERRS),
                dur=rnd.choice([None, 0.0, 1e-06, 0.25, 3.0]),
                fd=rnd.choice([None, 3, 4, 5]), fd_kind=rnd.choice(_KINDS),
                fd_target=rnd.choice(_TARGETS), ongoing=rnd.random() < 0.03)
    kind = rnd.randrange(9)
    if kind == 0:
        return ev.ReadCall(**base, nbytes=rnd.choice([0, 5]))
    if kind == 1:
        return ev.WriteCall(**base, nbytes=rnd.choice([-1, 0, 1, 8, 100]))
    if kind == 2:
        return ev.IoctlCall(**base, request=rnd.choice([0, 0xc0, 1 << 40]),
                            request_name=rnd.choice([None, "", "NV_ESC_RM_CONTROL"]))
    if kind == 3:
        return ev.FutexCall(**base, op=rnd.choice(["WAIT", "WAKE", "LOCK_PI", "REQUEUE"]),
                            addr=rnd.choice([1, 2]), timeout=rnd.choice([None, 1.0]))
    if kind == 4:
        return ev.PollCall(**base, timeout=rnd.choice([None, 0.5]), nfds=1,
                           fd_kinds=("tcp",), timed_out=rnd.random() < 0.5)
    if kind == 5:
        return ev.WaitChild(**base, child=-1)
    return ev.Syscall(**base)


def _other(rnd: random.Random, ts: float) -> ev.Event:
    pid = rnd.choice([10, 11])
    return rnd.choice([
        ev.ThreadStart(ts=ts, pid=pid, tid=pid + 300), ev.ThreadExit(ts=ts, pid=pid, tid=pid),
        ev.SignalDelivered(ts=ts, pid=pid, tid=pid, signal="SIGCONT"),
        ev.ProcessInfo(ts=ts, pid=pid, ppid=1, threads={pid: "x"},
                       fds=[ev.FdInfo(fd=3, kind="pipe", target="pipe:[7]", inode=7)])])


@pytest.mark.parametrize("seed", range(12))
def test_random_calls_feed_alike(compiled_helpers, seed):
    rnd = random.Random(seed)
    ts, events = (0.0 if seed % 3 == 0 else 1700000000.0), []
    for _ in range(3000):
        ts += rnd.choice([0.0, 0.001, 0.5, -0.25])
        events.append(_call(rnd, ts) if rnd.random() < 0.95 else _other(rnd, ts))
    cuts = sorted(rnd.sample(range(1, len(events)), 20))
    batches = [events[a:b] for a, b in zip([0] + cuts, cuts + [len(events)])]
    caps = {"timestamps": seed % 2 == 0}
    pure, fast = _both(lambda: Analyzer(backends=["strace-log"], capabilities=caps),
                       batches, compiled_helpers)
    a, b = _state(pure), _state(fast)
    assert a["threads"] == b["threads"]
    assert a == b
    assert pure.acc.finish() == fast.acc.finish()
