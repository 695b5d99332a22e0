"""The recording's queue and its last drain are bounded (issue 35 item 3, record/inbox.py), and
a signal after the window closed skips the end probes not yet run (record/session.py)."""
from __future__ import annotations

from tracer import events as ev
from tracer.record.inbox import CHECK_EVERY, Inbox
from tracer.record.probe_run import run_probes


def _event(i: int) -> ev.Event:
    return ev.ThreadExit(ts=float(i), pid=1, tid=i)


def test_a_full_inbox_drops_and_counts_instead_of_blocking_the_backend() -> None:
    box = Inbox(limit=10)
    for i in range(25):
        box.put(_event(i))                     # never blocks: the 15 past the limit dropped
    taken: list = []
    assert box.drain(taken.append) == 0
    assert [e.tid for e in taken] == list(range(10))
    [lost] = box.lost(99.0, 0)
    assert lost.count == 15 and "dropped" in lost.reason


def test_the_last_drain_stops_at_a_signal_and_says_what_it_left() -> None:
    box = Inbox()
    for i in range(10 * CHECK_EVERY):
        box.put(_event(i))
    taken: list = []
    left = box.drain(taken.append, budget_s=60.0, interrupted=lambda: len(taken) >= CHECK_EVERY)
    assert len(taken) == CHECK_EVERY and left == 9 * CHECK_EVERY
    [lost] = box.lost(99.0, left)
    assert lost.count == left and "not read" in lost.reason


def test_the_last_drain_stops_at_its_time_budget() -> None:
    box = Inbox()
    for i in range(4 * CHECK_EVERY):
        box.put(_event(i))
    taken: list = []
    left = box.drain(taken.append, budget_s=0.0)
    assert len(taken) == CHECK_EVERY and left == 3 * CHECK_EVERY


def test_nothing_lost_says_nothing() -> None:
    box = Inbox()
    box.put(_event(1))
    assert box.drain(lambda e: None) == 0 and box.lost(1.0, 0) == []


def test_a_signal_after_the_window_skips_the_end_probes_not_yet_run() -> None:
    ran: list = []
    signals = []

    def first(pids, analyzer):
        ran.append("first")
        signals.append("SIGTERM")          # a signal comes while the first probe runs
        return [_event(1)]

    def second(pids, analyzer):
        ran.append("second")
        return []
    second.__name__ = "py-spy stacks"
    taken: list = []
    errors, cut = run_probes([first, second], [1], object(), taken.append, budget_s=60,
                             interrupted=lambda: bool(signals))
    assert ran == ["first"] and len(taken) == 1
    assert errors == [("session", "a signal ended the recording: py-spy stacks not run")]
    assert cut == ["py-spy stacks"]


def _slow(name: str, ran: list, clock: list, takes: float):
    def probe(pids, analyzer):
        ran.append(name)
        clock[0] += takes
        return []
    probe.__name__ = name
    return probe


def test_probes_past_their_budget_are_named_and_their_end_twins_cut(monkeypatch) -> None:
    from tracer.record import probe_run
    clock = [0.0]
    monkeypatch.setattr(probe_run.time, "monotonic", lambda: clock[0])
    ran: list = []
    starts = [_slow("evidence (start)", ran, clock, 1.5), _slow("memory (start)", ran, clock, 1)]
    errors, cut = run_probes(starts, [1, 2], None, lambda e: None, budget_s=1.0,
                             phase="start")
    assert ran == ["evidence (start)"] and cut == ["memory (start)"]
    assert errors == [("session", "the start probes' 1 s were spent (2 processes): "
                       "memory (start) not run")]
    ends = [_slow("kernel stacks", ran, clock, 0.1), _slow("memory (end)", ran, clock, 0.1),
            _slow("evidence (end)", ran, clock, 0.1)]
    errors, cut = run_probes(ends, [1, 2], object(), lambda e: None, budget_s=1.0,
                             cut_before={"memory (start)"})
    assert ran[1:] == ["kernel stacks", "evidence (end)"] and cut == ["memory (end)"]
    assert errors == [("session", "memory (end) not run: memory (start) was not")]


def test_the_end_budget_counts_from_the_end_s_start(monkeypatch) -> None:
    """The last /proc reads of the tree (before the probes) count against the end's budget."""
    from tracer.record import probe_run
    clock = [10.0]
    monkeypatch.setattr(probe_run.time, "monotonic", lambda: clock[0])
    ran: list = []
    probes = [_slow("futex owners", ran, clock, 0.1), _slow("kernel stacks", ran, clock, 0.1)]
    errors, cut = run_probes(probes, [1, 2], object(), lambda e: None, budget_s=0.5,
                             began=9.55)      # 0.45 s went on the final /proc reads
    assert ran == ["futex owners"] and cut == ["kernel stacks"]
    assert errors == [("session", "the end probes' 0.5 s were spent (2 processes): "
                       "kernel stacks not run")]
