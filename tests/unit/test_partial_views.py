"""Partial views prove nothing (issue 32 item 5): a log of several strace sessions joined, or
of a process traced by one thread alone, gives no deadlock proof; the report says what the
view lacks. The same waits in a whole view are a deadlock (test_rules)."""
from __future__ import annotations

import pytest

from tracer import events as ev
from tracer.analysis.verdicts.view import view_lacks
from tracer.strace.importer import import_strace
from tracer.load.trace import analyze_trace

from test_rules import T0, futex_block, info, pipe_cycle, run
from pathlib import Path

FIELD = Path(__file__).resolve().parents[1] / "data" / "strace" / "field"


def _pipe_cycle(caps):
    return pipe_cycle(caps=caps)


def _futexes(caps):
    evs = [futex_block(40, 40, 0x10), futex_block(40, 41, 0x20)]
    return run(evs, [info(40, threads={40: "main", 41: "t1"})], caps=caps)


WHOLE = {"one_session": True, "all_threads": True}


@pytest.mark.parametrize("case", [_pipe_cycle, _futexes])
@pytest.mark.parametrize("lack", ["one_session", "all_threads"])
def test_a_partial_view_proves_no_deadlock(case, lack):
    assert case(WHOLE).verdict == "deadlocked"
    r = case(dict(WHOLE, **{lack: False}))
    assert r.verdict == "blocked", (r.verdict, r.rule)
    assert all(p.verdict != "deadlocked" for p in r.processes)
    assert "Proof" not in str(r.root_cause)
    assert any("partial view" in str(n) and view_lacks({lack: False})[0] in str(n)
               for n in r.notes)


def test_a_recording_that_does_not_say_is_whole():
    assert view_lacks({}) == [] and _pipe_cycle(None).verdict == "deadlocked"


@pytest.mark.parametrize("log, lacks", [
    ("pasted_two_p_sessions.log", {"one_session", "all_threads"}),
    ("pasted_p_sessions_strace6.log", {"one_session", "all_threads"}),
    # strace 4.x at a terminal: "^CProcess N detached" glued to the call in flight
    ("pasted_p_sessions_old_format.log", {"one_session", "all_threads"}),
    ("watchdog_futex_f_p_stderr.log", set()),          # strace -f -p: every thread
    ("feeder_blocked_f_p.log", set()),
])
def test_field_logs_say_what_their_view_lacks(log, lacks, tmp_path):
    out = str(tmp_path / "t.htrace")
    import_strace(str(FIELD / log), out)
    notes = " ".join(str(n) for n in analyze_trace(out).notes)
    assert {k for k in ("one_session", "all_threads")
            if view_lacks({k: False})[0] in notes} == lacks
