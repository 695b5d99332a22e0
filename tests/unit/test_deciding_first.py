"""Which stacks the end takes first (issue 43 item 2): probes/deciding.order (processes by the
CPU they gained, then state D, then the rest), kernel_stacks' order (D state, device calls,
futex waits) and pystacks._bounded_stacks, which waits for the deciding processes' dumps
whatever the budget and says which others it left. Fakes for py-spy; no timing asserted."""
from __future__ import annotations

import time

from tracer import events as ev
from tracer.record import pystacks
from tracer.record.probe_run import run_probes
from tracer.record.probes import deciding, kernel_stacks


def test_processes_that_gained_cpu_come_first_then_d_state_then_the_busiest_before():
    before = {1: (100, "S"), 2: (5, "S"), 3: (50, "R"), 4: (7, "D"), 5: (900, "S"), 6: None}
    after = {1: (100, "S"), 2: (9, "R"), 3: (80, "R"), 4: (7, "D"), 5: (900, "S"), 6: None}
    ordered, leading = deciding.order([1, 2, 3, 4, 5, 6], before, after)
    assert ordered == [3, 2, 4, 5, 1, 6] and leading == 3


def test_kernel_stacks_read_d_state_then_device_calls_then_futex_waits():
    wanted = {(1, 10): "blocked all window in a futex wait without timeout",
              (1, 11): "D state (uninterruptible sleep)",
              (2, 20): "blocked all window in ioctl(/dev/nvidia0)",
              (0, 5): "blocked all window in a futex wait without timeout"}
    got = [k for k, _ in sorted(wanted.items(), key=kernel_stacks._first)]
    assert got == [(1, 11), (2, 20), (0, 5), (1, 10)]


def test_the_deciding_processes_stacks_are_kept_past_the_budget(monkeypatch):
    def take(pid, exe, timeout, native):
        time.sleep({7: 0.6, 9: 2.0}.get(pid, 0.0))
        return [ev.PyStack(ts=0.0, pid=pid, tid=pid, frames=["f (x.py:1)"])]
    monkeypatch.setattr(pystacks, "take_stacks", take)

    def probe(pids, analyzer):
        return pystacks._bounded_stacks([7, 8, 9], "py-spy", False, must=1)
    out: list = []
    trouble, cut = run_probes([probe], [7, 8, 9], None, out.append, budget_s=0.2)
    assert trouble == [] and cut == []
    assert [(e.pid, bool(e.error)) for e in out] == [(8, False), (7, False), (9, True)]
    assert "budget" in out[2].error            # as each dump ended; the one left out last


def test_a_spent_budget_still_runs_the_deciding_probes_but_a_signal_cuts_them():
    from tracer.record.probe_run import mark, probe_deadline
    ran: list = []

    def probe(name: str, **marks):
        def run(pids, analyzer):
            ran.append((name, probe_deadline() is not None))
            return []
        run.__name__ = name
        return mark(run, **marks)
    probes = [probe("futex owners"), probe("kernel stacks", deciding=True), probe("log lines")]
    trouble, cut = run_probes(probes, [1], None, lambda e: None, budget_s=1.0,
                              began=time.monotonic() - 10)
    assert ran == [("kernel stacks", True)] and cut == ["futex owners", "log lines"]
    assert "futex owners, log lines not run" in trouble[0][1]
    ran.clear()
    trouble, cut = run_probes(probes, [1], None, lambda e: None, budget_s=60.0,
                              interrupted=lambda: True)
    assert ran == [] and cut == ["futex owners", "kernel stacks", "log lines"]
