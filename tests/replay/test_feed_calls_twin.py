"""The compiled analysis of a trace (tracefile/csrc/rows.c reading rows in place,
analysis/accumulate/csrc/feed.c and rowfeed.c feeding them) leaves the reader and the
accumulator exactly as the pure-Python path does (the codec, analysis/accumulate/calls.py):
every thread's statistics, the process table, the futex wakers, lock holders and followed
fds, the first and last times, the reader's counts (events, bad lines, cut short, end record)
and the report, on every recorded trace under fixtures/, on random calls of every class (odd
results, failures past the kinds kept, accepts, reads of every fd kind, closes and dups of
followed sockets, a log without times) as lists and as trace rows, and on those rows mutated
as text (numbers and strings in other JSON spellings, fields missing or added, blank and bad
lines). The module comes from conftest's compiled_helpers."""
import functools
import glob
import os
import random
import re

import pytest

from tracer import events as ev
from tracer.analysis.analyzer import Analyzer
from tracer.load.trace import analyzer_for, trace_notes
from tracer.tracefile import format as trace_format
from tracer.tracefile.format import TraceReader, TraceWriter, make_header

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
    """(pure analyzer, compiled analyzer), each fed ``batches`` (lists: feed_calls)."""
    out = []
    for helpers in (None, fast):
        an = make()
        an.feed_batches(batches, helpers)
        out.append(an)
    return out


def _read_both(path, fast):
    """[(reader's counts, analyzer, reader)] of the trace at ``path``, pure and compiled (read
    in place: RowBlocks, feed_rows)."""
    out = []
    for helpers in (None, fast):
        reader = TraceReader(path)
        an = analyzer_for(reader)
        an.feed_batches(reader.batches(helpers and helpers.parse_rows), helpers)
        info = reader.info
        out.append(((info.events, info.bad_lines, info.truncated, info.end), an, reader))
    return out


@pytest.mark.slow
def test_traces_feed_alike(compiled_helpers):
    assert len(TRACES) > 100
    for path in TRACES:
        (info_a, pure, reader), (info_b, fast, _) = _read_both(path, compiled_helpers)
        assert info_a == info_b, path
        assert _state(pure) == _state(fast), path
        end = reader.info.end.ts if reader.info.end is not None else None
        reports = [an.report(end=end, trace_path=path, extra_notes=trace_notes(reader.info))
                   for an in (pure, fast)]
        assert reports[0].to_json() == reports[1].to_json(), path


def test_trace_lists_feed_alike(compiled_helpers):
    """A trace's event lists (what the reader gives without the compiled reader, and what an
    strace log's analysis feeds) through feed_calls."""
    for path in TRACES[::5]:
        reader = TraceReader(path)
        batches = list(reader.batches())
        pure, fast = _both(lambda: analyzer_for(reader), batches, compiled_helpers)
        assert _state(pure) == _state(fast), path


_NAMES = ["read", "pread64", "recvfrom", "accept", "accept4", "write", "sendto", "openat",
          "close", "dup2", "dup3", "nanosleep", "clock_nanosleep", "sched_yield", "connect",
          "flock", "fcntl", "clock_gettime", "gettimeofday", "ioctl", "futex", "poll",
          "epoll_wait", "wait4", "mmap"]
_KINDS = [None, "", "file", "dir", "tty", "pipe", "fifo", "unix", "tcp", "udp", "socket",
          "eventfd", "null", "nvidiactl", "epoll"]
_TARGETS = [None, "", "/x", "pipe:[7]", "TCP:[1.2.3.4:5->6.7.8.9:10]", "UNIX-STREAM:[3->4]"]
_ERRS = [None] * 6 + ["EAGAIN", "ETIMEDOUT", "EINTR"] + [f"E{i}" for i in range(40)]
_RETS = [None, -1, 0, 0, 1, 7, 4096, 1 << 40, -(1 << 62)]
_ARGS = ["", "3, LOCK_EX", "3, F_UNLCK", "CLOCK_MONOTONIC, {tv_sec=5}", '3, "...", 5',
         "/é", "a\tb"]


def _call(rnd: random.Random, ts: float) -> ev.Event:
    pid = rnd.choice([10, 11])
    base = dict(ts=ts, pid=pid, tid=rnd.choice([pid, pid, pid + 100, pid + 200]),
                name=rnd.choice(_NAMES), args=rnd.choice(_ARGS),
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


def _random_events(seed: int) -> list:
    rnd = random.Random(seed)
    ts, events = (0.0 if seed % 3 == 0 else 1700000000.0), []
    for _ in range(3000):
        ts += rnd.choice([0.0, 0.001, 0.5, -0.25])
        events.append(_call(rnd, ts) if rnd.random() < 0.95 else _other(rnd, ts))
    return events


@pytest.mark.parametrize("seed", range(12))
def test_random_calls_feed_alike(compiled_helpers, seed):
    rnd = random.Random(seed)
    events = _random_events(seed)
    cuts = sorted(rnd.sample(range(1, len(events)), 20))
    batches = [events[a:b] for a, b in zip([0] + cuts, cuts + [len(events)])]
    caps = {"timestamps": seed % 2 == 0}
    pure, fast = _both(lambda: Analyzer(backends=["strace-log"], capabilities=caps),
                       batches, compiled_helpers)
    assert _state(pure) == _state(fast)
    assert pure.acc.finish() == fast.acc.finish()


# a row's text changed: (pattern, replacement), at the first match
_MUTATIONS = [
    (r"(?<=,)(\d+)\.(\d+)(?=,)", r"\1.\g<2>0"), (r"(?<=,)(\d+)\.(\d+)(?=,)", r"\1\2e-\2"),
    (r"(?<=,)1(\d+\.\d+)(?=,)", r"1\1E0"), (r"(?<=,)(\d+)\.0(?=,)", r"\1"),
    (r",null,", ", null,"), (r",null,", ",0,"), (r",false]", ",false,1]"), (r",false]", "]"),
    (r'"sc"', '"rd"'), (r'"rd"', '"sc"'), (r'"io"', '"sc"'), (r'"sc"', '"wr"'),
    (r'"x', '"\\u0078'), (r'"E', '"\\u00c9'), (r",-1,", ",-01,"), (r",-1,", ",-0,"),
    (r",0,", ",-0,"), (r",7,", ",7.0,"), (r'"/x"', '"/\\/x"'), (r'"/x"', '"/x\t"'),
    (r'"/x"', '"/\u00e9"'), (r"$", "\r"), (r"$", " "), (r"^", " "), (r"\]$", ""), (r"^.*$", ""),
    (r'"mmap"', '"mm\\"ap"'), (r",1700", ",99999999999999999999"), (r",1700", ",-1700"),
    (r"true", "True"), (r",1,", ",1e400,"), (r'"E', '"\\x'), (r'"3, ', '"3\\x, '),
    (r'(?<=^\["..",)[^,]+', "999999999999.5"), (r'(?<=^\["..",)[^,]+', "1.5"),
    (r'(?<=^\["..",)[^,]+', "-1e22")]


def _mutated(line: str, pattern: str, repl: str) -> str:
    """``line`` with the first match of ``pattern`` replaced: by the template ``repl`` where
    the pattern has groups, else by ``repl`` as it is."""
    grouped = re.compile(pattern).groups > 0
    return re.sub(pattern, (lambda m: m.expand(repl)) if grouped else (lambda m: repl), line,
                  count=1)


@pytest.mark.parametrize("seed", range(10))
def test_rows_read_alike(compiled_helpers, tmp_path, monkeypatch, seed):
    rnd = random.Random(seed)
    # blocks of 2 KiB (a dozen rows): a bad line leaves the others read in place
    monkeypatch.setattr(trace_format, "byte_blocks", functools.partial(
        trace_format.byte_blocks, size=2048))
    path = str(tmp_path / "t.htrace")
    header = make_header(backends=["strace-log"], source="import-strace", targets=[10],
                         start=1700000000.0, processes=[],
                         options={"capabilities": {"timestamps": seed % 2 == 0}})
    with TraceWriter(path, header) as w:
        for e in _random_events(seed):
            w.write(e)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if seed:                                        # seed 0: the rows as written
        for k in range(1, len(lines) - 2):
            if rnd.random() < (0.02 if seed % 2 else 0.1):
                lines[k] = _mutated(lines[k], *rnd.choice(_MUTATIONS))
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    (info_a, pure, _), (info_b, fast, _) = _read_both(path, compiled_helpers)
    assert info_a == info_b
    assert _state(pure) == _state(fast)
    assert pure.acc.finish() == fast.acc.finish()
