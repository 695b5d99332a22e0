"""record/ending.py: the end of a large tree's recording in the window's last part (the survey,
the early part, the rest after the stop) and a small tree's after it, with probes and run
counts that are fakes. No assertion depends on how fast the machine is."""
from __future__ import annotations

import threading

from tracer import events as ev
from tracer.record import ending
from tracer.record.ending import EARLY_MIN_PROCESSES, Ending, lead_for
from tracer.record.probe_run import mark


def test_the_lead_is_for_large_trees_and_at_most_half_the_window():
    assert lead_for(EARLY_MIN_PROCESSES - 1, 5.0, 3.0) == 0.0
    assert lead_for(EARLY_MIN_PROCESSES, 0.4, 3.0) == 0.4
    assert lead_for(2000, 5.0, 3.0) == 1.5


class _Still:
    """RunCounts that says ``still`` of whatever it is asked."""

    def __init__(self, still: set) -> None:
        self.asked: list = []
        self.still_set = still

    def still(self, pids):
        self.asked.append(sorted(pids))
        return set(pids) & self.still_set


def _probe(name: str, calls: list, **marks):
    def probe(pids, analyzer):
        calls.append((name, sorted(pids), threading.current_thread().name))
        return [ev.ObserveError(ts=0.0, source=name, what="x", why=str(len(pids)))]
    probe.__name__ = name
    return mark(probe, **marks)


def test_a_large_tree_s_end_surveyed_early_and_late(monkeypatch):
    looked: list = []
    monkeypatch.setattr(ending, "final_infos", lambda pids: looked.append(sorted(pids)) or [])
    calls: list = []
    probes = [_probe("futex owners", calls, after_stop=True), _probe("socket peers", calls),
              _probe("stack motion", calls, per_process=True, beside=True),
              _probe("python stacks", calls, per_process=True, beside=True),
              _probe("memory (end)", calls, per_process=True),
              _probe("evidence (end)", calls, per_process=True)]
    counts = _Still({2, 3, 4})
    end = Ending(probes, [1, 4], lead_s=1.0, counts=counts, start_cost_s=0.5)  # type: ignore
    taken: list = []
    pids = [1, 2, 3, 4, 5]
    need, trouble = end.survey(pids, object(), taken.append)
    assert trouble == [] and 0 < need <= 1.0 and end.still == {2, 3}   # a root never
    assert [c[0] for c in calls] == ["socket peers"] and calls[0][1] == pids
    end.early(pids, object(), taken.append)
    assert counts.asked == [pids, [2, 3]]       # those still at the survey looked at again
    assert looked == [[1, 4, 5]]
    early = {c[0]: c for c in calls[1:]}
    assert set(early) == {"stack motion", "python stacks", "memory (end)", "evidence (end)"}
    assert all(c[1] == [1, 4, 5] for c in early.values())
    assert early["python stacks"][2] == "hangtrace-stacks" != early["memory (end)"][2]
    assert [e.source for e in taken] == ["socket peers", "stack motion", "python stacks",
                                         "memory (end)", "evidence (end)"]
    assert end.notes and end.notes[0].startswith("2 of 5 processes did nothing since the start")
    end.late(pids, object(), taken.append)
    assert calls[-1][:2] == ("futex owners", pids) and looked == [[1, 4, 5]]
    assert [e.source for e in taken][-1] == "futex owners"


def test_a_small_tree_s_end_runs_whole_after_the_window(monkeypatch):
    looked: list = []
    monkeypatch.setattr(ending, "final_infos", lambda pids: looked.append(sorted(pids)) or [])
    calls: list = []
    probes = [_probe("futex owners", calls, after_stop=True),
              _probe("memory (end)", calls, per_process=True)]
    end = Ending(probes, [1], counts=_Still({2}))  # type: ignore[arg-type]
    taken: list = []
    end.late([1, 2], object(), taken.append)
    assert looked == [[1, 2]] and [c[:2] for c in calls] == [("futex owners", [1, 2]),
                                                             ("memory (end)", [1, 2])]
    assert end.notes == []


def _timed(name: str, calls: list, sleep: float = 0.0, **marks):
    def probe(pids, analyzer):
        import time
        calls.append((name, time.monotonic(), threading.current_thread().name))
        time.sleep(sleep)
        return [ev.ObserveError(ts=0.0, source=name, what="x", why="")]
    probe.__name__ = name
    return mark(probe, **marks)


def test_the_window_probes_run_before_the_window_s_end_each_beside_the_others(monkeypatch):
    import time
    monkeypatch.setattr(ending, "final_infos", lambda pids: [])
    calls: list = []
    probes = [_timed("futex owners", calls, after_stop=True),
              _timed("stack motion", calls, 0.2, per_process=True, in_window=True),
              _timed("python stacks", calls, 0.2, per_process=True, in_window=True),
              _timed("log lines", calls, per_process=True)]
    end = Ending(probes, [1])
    window_end = time.monotonic() + 0.6
    end.start_window(lambda: [1, 2], window_end, lead_s=0.5)
    time.sleep(max(0.0, window_end - time.monotonic()))
    end.window_over()
    taken: list = []
    assert end.late([1, 2], object(), taken.append) == []
    when = {c[0]: c for c in calls}
    assert when["stack motion"][1] < window_end and when["python stacks"][1] < window_end
    assert when["stack motion"][2] != when["python stacks"][2]         # side by side
    assert when["futex owners"][1] >= window_end and len(calls) == 4   # none run twice
    assert sorted(e.source for e in taken) == sorted(c[0] for c in calls)


def test_a_window_that_ends_early_wakes_its_probes_and_unfinished_ones_are_said(monkeypatch):
    import time
    monkeypatch.setattr(ending, "final_infos", lambda pids: [])
    monkeypatch.setattr(ending, "END_PROBES_S", 0.2)
    monkeypatch.setattr(ending, "WINDOW_WAIT_S", 0.0)
    calls: list = []

    def stacks(pids, analyzer):            # the deciding process's stack first, then a hang
        yield ev.ObserveError(ts=0.0, source="deciding stack", what="x", why="")
        time.sleep(3.0)
        yield ev.ObserveError(ts=0.0, source="other stack", what="x", why="")
    stacks.__name__ = "python stacks"
    probes = [_timed("memory (end)", calls, in_window=True), mark(stacks, in_window=True)]
    end = Ending(probes, [1])
    end.start_window(lambda: [1], time.monotonic() + 60, lead_s=1.0)
    end.window_over()                      # a signal: the window ends now, not in a minute
    taken: list = []
    trouble = end.late([1], object(), taken.append)
    assert [e.source for e in taken] == ["memory (end)", "deciding stack"]   # what came
    assert len(trouble) == 1 and trouble[0][1].startswith("python stacks (1 events came) did "
                                                          "not finish")


def test_the_end_s_budget_counts_from_the_window_s_end(monkeypatch):
    import time
    monkeypatch.setattr(ending, "final_infos", lambda pids: [])
    monkeypatch.setattr(ending, "END_PROBES_S", 0.3)
    calls: list = []
    probes = [_timed("futex owners", calls, after_stop=True),
              _timed("kernel stacks", calls, after_stop=True)]
    end = Ending(probes, [1])
    end.start_window(lambda: [1], time.monotonic() - 0.5)   # ended 0.5 s ago: all spent
    trouble = end.late([1], object(), lambda e: None)
    assert calls == [] and "futex owners, kernel stacks not run" in trouble[0][1]


def test_the_window_lead_grows_with_the_load_and_stays_within_half_the_window():
    assert ending.window_lead(5.0, load=0.0, cpus=2) == ending.WINDOW_WORK_S
    assert ending.window_lead(10.0, load=4.0, cpus=2) == ending.WINDOW_WORK_S * 2.5
    assert ending.window_lead(5.0, load=40.0, cpus=2) == 2.5
