"""Partial hangs (analysis/verdicts/partial.py) on recorded traces: a section of the report, never the
verdict. The live case (a mutex held by a stuck thread) is in live/test_attach_verdicts.py (partial_hang)."""
from pathlib import Path

from tracer.load.trace import analyze_trace

TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"


def test_an_idle_pool_is_named_but_not_called_certain():
    r = analyze_trace(str(TRACES / "parked_pool.strace.htrace.gz"))
    assert r.verdict == "progressing"
    [h] = r.partial_hangs
    assert (h["kind"], h["certain"], len(h["tids"])) == ("futex", False, 8)
    assert "an idle pool waits like this too" in h["evidence"]


def test_nothing_when_the_tree_itself_is_hung_or_no_group_waits():
    assert analyze_trace(str(TRACES / "lock_order_deadlock.strace.htrace.gz")).partial_hangs == []
    assert analyze_trace(str(TRACES / "healthy_worker.strace.htrace.gz")).partial_hangs == []
