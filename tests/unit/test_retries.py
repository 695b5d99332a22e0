"""Retries (analysis/progress/retries.py, accumulate's failure counts): periodic wake-ups that
each carry the same failing call are a retry loop; an event loop's EAGAIN and a heartbeat
are not."""
from __future__ import annotations

from tracer import events as ev
from tracer.analysis.accumulate.accumulator import Accumulator
from tracer.analysis.accumulate.stats import ThreadStats
from tracer.analysis.progress.retries import retrying


def _thread(calls):
    acc = Accumulator(start=0.0, backends=["strace"])
    for i, (name, err) in enumerate(calls):
        acc.feed(ev.Syscall(ts=1.0 + i * 0.25, pid=5, tid=6, name=name, ret=-1 if err else 0,
                            err=err, dur=0.0))
    return acc.threads[(5, 6)]


def test_a_refused_connect_on_every_wake_up_is_a_retry():
    t = _thread([("connect", "ECONNREFUSED"), ("close", None), ("clock_nanosleep", None)] * 6)
    assert t.failures == {("connect", "ECONNREFUSED"): 6}
    text = retrying(t, t.sleeps, 6.0, True)
    assert text == ("retries connect() every 1.0 s: ECONNREFUSED each time (6 failures, "
                    "6 wake-ups in 6.0 s); it never succeeds")


def test_not_retries():
    eagain = _thread([("read", "EAGAIN"), ("epoll_wait", None)] * 6)
    assert not eagain.failures and retrying(eagain, 6, 6.0, True) is None
    heartbeat = _thread([("write", None), ("clock_nanosleep", None)] * 6)
    assert retrying(heartbeat, heartbeat.sleeps, 6.0, True) is None
    rare = _thread([("connect", "ECONNREFUSED")] + [("clock_nanosleep", None)] * 8)
    assert retrying(rare, rare.sleeps, 6.0, True) is None        # one failure in 8 wake-ups
    assert retrying(ThreadStats(pid=1, tid=1), 0, 6.0, True) is None
