"""The merge of the kernel's counts (events.ThreadCounts) into the accumulator: each field's
mapping, no double counting of streamed calls, cumulative replacement, and old traces.

Pure: no root, no BCC.
"""
from __future__ import annotations

import pytest

from tracer import events as ev
from tracer.events.counts import ThreadCounts
from tracer.analysis.accumulate.accumulator import Accumulator
from tracer.analysis.analyzer import Analyzer
from tracer.analysis.accumulate.kernel_counts import KernelFd, contribution
from tracer.tracefile.format import TraceReader, TraceWriter, make_header

PID, TID = 100, 101


def _fd(fd, kind, target="", **kw):
    d = {"fd": fd, "kind": kind, "target": target, "writes": 0, "wbytes": 0, "wmin": 0,
         "wmax": 0, "wsmall": 0, "wsbytes": 0, "reads": 0, "rbytes": 0, "first": None,
         "last": None}
    d.update(kw)
    return d


def _counts(ts=10.0, **kw):
    return ThreadCounts(ts=ts, pid=PID, tid=TID, since=1.0, **kw)


def _info(fds):
    return ev.ProcessInfo(ts=1.0, pid=PID, ppid=1, comm="x", threads={TID: "w"}, fds=fds)


def _feed(*events, fds=()):
    """The thread's stats once the recording is finished (output is judged there)."""
    acc = Accumulator(start=1.0, backends=["ebpf"], processes=[_info(list(fds))])
    for e in events:
        acc.feed(e)
    acc.finish(10.0)
    return acc.threads[(PID, TID)], acc


# (per_fd entry, process fd table, expected ThreadStats fields) -- what Accumulator._write and
# _read decide call by call, decided here from the per-fd sums.
PIPE = [ev.FdInfo(5, "pipe", "pipe:[7]"), ev.FdInfo(6, "pipe", "pipe:[7]")]
FD_CASES = [
    # 3M one-byte writes to /dev/null: counted, not output
    (_fd(3, "null", "/dev/null", writes=3_000_000, wbytes=3_000_000, wmin=1, wmax=1,
         wsmall=3_000_000, wsbytes=3_000_000, last=9.5),
     [], dict(null_writes=3_000_000, written_bytes=3_000_000, output_writes=0, output_bytes=0,
              last_output_ts=None)),
    # writes to a log file: output
    (_fd(3, "file", "/var/log/x.log", writes=40, wbytes=4000, wmin=100, wmax=100, last=9.5),
     [], dict(output_writes=40, output_bytes=4000, last_output_ts=9.5)),
    # eventfd: every write is an eventfd write, reads are not input
    (_fd(4, "eventfd", "eventfd:[3]", writes=10, wbytes=80, wmin=8, wmax=8, wsmall=10,
         wsbytes=80, reads=10, rbytes=80),
     [], dict(eventfd_writes=10, output_bytes=0, input_bytes=0)),
    # a self-pipe: small writes are wake-ups, larger ones output; reads of it are not input
    (_fd(5, "pipe", "pipe:[7]", writes=7, wbytes=1005, wmin=1, wmax=1000, wsmall=5,
         wsbytes=5, reads=3, rbytes=300),
     PIPE, dict(wakeup_writes=5, output_writes=2, output_bytes=1000, input_bytes=0)),
    # an fd closed before its kind was read: only writes over 8 bytes are surely output
    (_fd(9, None, "", writes=4, wbytes=208, wmin=1, wmax=100, wsmall=2, wsbytes=8),
     [], dict(unjudged_writes=2, output_writes=2, output_bytes=200)),
    # a TCP socket both ways, messages of many sizes: sends are output, recvs input
    (_fd(7, "tcp", "TCP:[1:2->3:4]", writes=3, wbytes=1010, wmin=10, wmax=500, reads=2,
         rbytes=2, first=2.0, last=9.0),
     [], dict(output_writes=3, output_bytes=1010, input_bytes=2, last_output_ts=9.0)),
    # a keep-alive: 60-byte messages, a few a second at most, answered in kind: not output
    (_fd(7, "tcp", "TCP:[1:2->3:4]", writes=9, wbytes=540, wmin=60, wmax=60, reads=9,
         rbytes=540, first=1.0, last=9.0), [], dict(output_writes=0, input_bytes=540)),
    # NCCL's RAS keep-alive, once a second: a 4-byte length, then 56 bytes (two writes)
    (_fd(7, "tcp", "TCP:[1:2->3:4]", writes=12, wbytes=360, wmin=4, wmax=56, wsmall=6,
         wsbytes=24, reads=12, rbytes=360, first=1.0, last=7.0), [],
     dict(output_writes=0, input_bytes=360)),
    # a stream of small messages faster than a heartbeat: output
    (_fd(7, "tcp", "TCP:[1:2->3:4]", writes=900, wbytes=54000, wmin=60, wmax=60,
         first=1.0, last=9.0), [], dict(output_writes=900, output_bytes=54000)),
    # reads of a file are input and file reads
    (_fd(8, "file", "/data/x", reads=4, rbytes=4096), [], dict(input_bytes=4096, file_reads=4)),
    # with a time: the input is dated by the fd's last call, its place among the calls unknown
    (_fd(8, "file", "/proc/1/status", reads=3, rbytes=1400, first=1.5, last=2.5), [],
     dict(input_bytes=1400, input_ts=2.5, input_at=None)),
]


@pytest.mark.parametrize("entry,fds,want", FD_CASES)
def test_per_fd_sums_map_as_single_writes_would(entry, fds, want):
    t, _ = _feed(_counts(per_fd=[entry]), fds=fds)
    for name, value in want.items():
        assert getattr(t, name) == value, name


def test_output_targets_are_labelled_as_single_writes_label_them():
    t, _ = _feed(_counts(per_fd=[FD_CASES[1][0]]))
    assert t.output_targets == {"fd 3 (/var/log/x.log)": 4000}


def test_a_keepalive_socket_is_named_as_one():
    t, _ = _feed(_counts(per_fd=[FD_CASES[6][0]]))
    assert [k.fd for k in t.keepalives] == [7]


def test_calls_counted_and_streamed_add_up_to_the_kernel_total():
    streamed_write = ev.Syscall(ts=2.0, pid=PID, tid=TID, name="sched_yield", dur=0.0)
    futex = ev.FutexCall(ts=2.0, pid=PID, tid=TID, name="futex", op="WAIT", timeout=None,
                         dur=0.1)
    c = _counts(calls={"sched_yield": 1000, "futex": 50, "nanosleep": 3, "getpid": 7},
                streamed={"sched_yield": 1, "futex": 1}, blocked_s=2.5,
                futex={"waits": 30, "waits_timeout": 10, "timeouts": 4, "wakes": 19},
                polls={"calls": 0})
    t, _ = _feed(streamed_write, futex, c)
    assert t.syscalls == {"sched_yield": 1000, "futex": 50, "nanosleep": 3, "getpid": 7}
    assert t.total_syscalls == 1060
    assert t.yields == 1000 and t.sleeps == 3
    assert t.futex_waits == 31 and t.futex_wakes == 19 and t.futex_timeouts == 4
    assert t.futex_waits_timeout == 10
    assert t.syscall_time == pytest.approx(2.6)


def test_a_later_count_replaces_the_earlier_one():
    first = _counts(ts=5.0, calls={"write": 100}, per_fd=[_fd(3, "file", "/x", writes=100,
                                                              wbytes=100, wsmall=100,
                                                              wsbytes=100)])
    second = _counts(ts=6.0, calls={"write": 250}, per_fd=[_fd(3, "file", "/x", writes=250,
                                                               wbytes=250, wsmall=250,
                                                               wsbytes=250, last=5.9)])
    t, acc = _feed(first, second)
    assert t.syscalls["write"] == 250 and t.output_bytes == 250 and t.output_writes == 250
    assert t.last_output_ts == 5.9
    assert acc.kernel.traffic(PID, TID) == [KernelFd.from_dict(second.per_fd[0])]
    # a read that came out lower (a torn read of the maps) is corrected, not accumulated
    t2, _ = _feed(second, first)
    assert t2.syscalls["write"] == 100 and t2.output_bytes == 100


def test_polls_ioctls_and_accepts():
    c = _counts(calls={"epoll_wait": 40, "ioctl": 9, "accept4": 2},
                polls={"calls": 40, "timeouts": 38, "infinite": 1},
                ioctls=[{"fd": 5, "kind": "nvidiactl", "target": "/dev/nvidiactl",
                         "request": 0xc020462a, "calls": 9}], accepts=2)
    t, _ = _feed(c)
    assert (t.polls, t.poll_timeouts, t.poll_infinite) == (40, 38, 1)
    assert t.ioctls == {("nvidiactl", 0xc020462a, ""): 9}
    assert t.accepts == 2


def test_contribution_ignores_streamed_calls_only():
    c = contribution(_counts(calls={"futex": 5}, streamed={"futex": 5}), lambda p, t: False)
    assert not c["syscalls"]


def test_counts_reach_the_report_counters(tmp_path):
    path = str(tmp_path / "t.htrace.gz")
    w = TraceWriter(path, make_header(backends=["ebpf"], source="attach", targets=[PID],
                                      start=1.0, processes=[_info([])]))
    w.write(_counts(ts=4.0, calls={"write": 3_187_500, "read": 187_500},
                    per_fd=[FD_CASES[0][0], _fd(4, "eventfd", writes=187_500,
                                                 wbytes=1_500_000, wsmall=187_500,
                                                 wsbytes=1_500_000)]))
    w.close(end_ts=5.0)
    events = list(TraceReader(path).events())
    assert isinstance(events[0], ThreadCounts) and events[0].per_fd[1]["fd"] == 4
    an = Analyzer(start=1.0, backends=["ebpf"], processes=[_info([])], roots=[PID])
    an.feed_all(events)
    counters = an.report(end=5.0).processes[0].counters
    assert counters["syscalls"] == 3_375_000
    # every byte written (the truth), of which none is output (/dev/null, an eventfd)
    assert counters["bytes_written"] == 4_500_000 and counters["output_bytes"] == 0
    assert counters["eventfd_writes"] == 187_500


def test_a_trace_without_the_counts_field_names_still_reads(tmp_path):
    """Readers map fields by name: a trace whose header lacks the ThreadCounts schema (any
    trace written before it existed) reads as before."""
    path = str(tmp_path / "old.htrace")
    header = make_header(backends=["ebpf"], source="attach", targets=[PID], start=1.0,
                         processes=[])
    del header["schema"]["cnt"]
    w = TraceWriter(path, header)
    w.write(ev.Syscall(ts=2.0, pid=PID, tid=TID, name="getpid"))
    w.close(end_ts=3.0)
    assert [type(e) for e in TraceReader(path).events()] == [ev.Syscall]


def test_failed_calls_are_the_threads_failures():
    """connect() refused every 0.5 s, as the kernel counted it (a retry loop); the normal
    answers of an event loop the kernel lets through (ECHILD, ENOTTY) are not failures; a later
    count replaces the earlier one."""
    first = _counts(ts=5.0, calls={"connect": 4}, failures={"connect:ECONNREFUSED": 4})
    second = _counts(ts=6.0, calls={"connect": 6, "wait4": 2, "ioctl": 1},
                     failures={"connect:ECONNREFUSED": 6, "wait4:ECHILD": 2,
                               "ioctl:ENOTTY": 1})
    t, _ = _feed(first, second)
    assert dict(t.failures) == {("connect", "ECONNREFUSED"): 6}
    t_old, _ = _feed(_counts(calls={"connect": 4}))       # a trace from before the field
    assert not t_old.failures


@pytest.mark.parametrize("last,old", [(2.5, True), (8.5, False)])
def test_input_the_kernel_counted_is_old_news_by_its_time_alone(last, old):
    """The counts say when a thread last read, not after which call: a read 7.5 s before the
    end of a 9 s window is old news, one 1.5 s before it is not (io_class.is_old_news)."""
    from tracer.analysis.accumulate.io_class import is_old_news
    t, _ = _feed(_counts(calls={"read": 3}, per_fd=[_fd(8, "file", "/x", reads=3, rbytes=300,
                                                        first=1.5, last=last)]))
    assert t.input_at is None and t.input_ts == last
    assert is_old_news(t.ncalls, t.input_at, t.input_ts, 9.0, 10.0, True) is old
    assert is_old_news(t.ncalls, t.input_at, t.input_ts, 9.0, 10.0, False) is False
