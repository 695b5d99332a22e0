"""record/backends/proc_backend.py: a sampling round that stop() interrupts. A tree whose last
round was long (2,000 processes: a second) ends its round at stop() at once; one whose rounds
are short finishes it (its samples stay one instant's). The processes are fakes."""
from __future__ import annotations

from tracer.record.backends.proc_backend import LONG_TICK_S, ProcBackend


class _Targets:
    def pids(self):
        return list(range(1000, 1200))


def _round(last_tick_s: float) -> list:
    b = ProcBackend()
    sampled: list = []
    b._targets, b._emit = _Targets(), lambda e: None           # type: ignore[assignment]
    b._discover = lambda: None                                   # type: ignore[assignment]
    b._sample_process = lambda pid, sockets: sampled.append(pid)  # type: ignore[assignment]
    b._sample_sockets = lambda: None                             # type: ignore[assignment]
    b.last_tick_s = last_tick_s
    b._stop.set()
    b.tick()
    return sampled


def test_a_long_tree_s_round_ends_at_stop():
    assert len(_round(LONG_TICK_S * 4)) == 63


def test_a_short_round_is_finished():
    assert len(_round(0.001)) == 200
