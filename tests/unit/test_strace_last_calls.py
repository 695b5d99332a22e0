"""Issue 32 item 1: the last call of each thread of a log taken at a hang is its state.

A call's entry alone (the log ends in its line), a call cut by Ctrl-C and strace's detach message
(new and old format), and a call a signal interrupted (``= ? ERESTARTSYS``) with nothing of its
thread after it: the thread was in that call to the end (or to the signal), an ``ongoing``
event, and the trace's notes say so. Lines that only look like a call's entry but are followed
by more of their thread were not strace's and stay unparsed. Both parser paths agree.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List

import pytest

from tracer import events as ev
from tracer.load.trace import analyze_trace
from tracer.strace.convert import StraceConverter
from tracer.strace.importer import import_strace
from tracer.strace.lines import py_split_line, split_line
from tracer.strace.parallel import may_hold_last_call
from tracer.tracefile.format import TraceReader
from strace_events import events_of

FIELD = Path(__file__).resolve().parent.parent / "data" / "strace" / "field"


_events = events_of                 # (tests/strace_events.py)


def _calls(events: List[ev.Event]) -> List[ev.Syscall]:
    return [e for e in events if isinstance(e, ev.Syscall)]


@pytest.mark.parametrize("text, name, args", [
    ("futex(0x55ab, FUTEX_WAIT_PRIVATE, 2, NULL", "futex", "0x55ab, FUTEX_WAIT_PRIVATE, 2, NULL"),
    ("[pid  12] read(3, ", "read", "3, "),
    ("1795950378.012864 poll([{fd=4, events=POLLIN}], 1, 200^C", "poll",
     "[{fd=4, events=POLLIN}], 1, 200"),
])
def test_a_calls_entry_alone_is_a_cut_line(text: str, name: str, args: str) -> None:
    t = py_split_line(text)
    assert t is not None and t[2] == "cut" and t[3] == name and t[4] == args
    assert repr(split_line(text)) == repr(t)


@pytest.mark.parametrize("text", [
    "print(x)",                                          # closes the call: not an entry
    "futex(0x1, FUTEX_WAIT, 2, NULL^CProcess 5 detached",  # a message glued: the converter's
    "Loading (data",                                     # not a syscall name
    "Read(3, ",
])
def test_other_lines_without_a_result_are_not_cut_lines(text: str) -> None:
    assert py_split_line(text) is None and split_line(text) is None
    assert may_hold_last_call(text) or "(" not in text


def test_stack_frames_of_k_are_strace_info() -> None:
    t = py_split_line(" > /usr/lib/x86_64-linux-gnu/libc.so.6(poll+0x4f) [0xfc26f]")
    assert t is not None and t[2] == "info" and t[0] is None
    assert repr(split_line(" > /lib/libc.so.6(poll+0x4f) [0xfc26f]")) == \
        repr(py_split_line(" > /lib/libc.so.6(poll+0x4f) [0xfc26f]"))


def test_the_unterminated_last_line_is_the_threads_ongoing_call() -> None:
    conv = StraceConverter()
    for line in ["5 poll([{fd=3, events=POLLIN}], 1, 200) = 0 (Timeout)",
                 "6 write(1, \"hello world\\n\", 12) = 12",
                 "6 futex(0x55ab, FUTEX_WAIT_PRIVATE, 2, NULL"]:
        conv.feed_text(line)
    tail = conv.finish()
    (last,) = _calls(tail)
    assert last.tid == 6 and last.name == "futex" and last.ongoing and last.ret is None
    assert conv.cut_calls == [(6, "futex", "cut")] and conv.unparsed == 0


def test_an_entry_followed_by_more_of_its_thread_was_not_strace_output() -> None:
    conv = StraceConverter()
    events = []
    for line in ["7 read(3, ", "7 close(3) = 0"]:
        events += conv.feed_text(line)
    events += conv.finish()
    assert [c.name for c in _calls(events)] == ["close"]
    assert not any(c.ongoing for c in _calls(events)) and conv.unparsed == 1


def test_old_strace_ctrl_c_glued_detach_keeps_the_call_and_the_next_session() -> None:
    events = _events(["Process 41 attached",
                      "futex(0x55ab, FUTEX_WAIT_PRIVATE, 2, NULL^CProcess 41 detached",
                      "Process 42 attached",
                      "poll([{fd=4, events=POLLIN}], 1, 200) = 0 (Timeout)",
                      "poll([{fd=4, events=POLLIN}], 1, 200^CProcess 42 detached"])
    ongoing = {c.tid: c.name for c in _calls(events) if c.ongoing}
    assert ongoing == {41: "futex", 42: "poll"}
    assert not any(isinstance(e, ev.Lost) for e in events)


def test_a_call_a_signal_interrupted_is_the_threads_state_when_nothing_follows() -> None:
    events = _events([
        "9 00:00:01.000000 futex(0x55ab, FUTEX_WAIT_PRIVATE, 2, NULL <unfinished ...>",
        "8 00:00:02.000000 poll([{fd=4, events=POLLIN}], 1, 200) = 0 (Timeout)",
        "9 00:00:05.500000 <... futex resumed>) = ? ERESTARTSYS (To be restarted if SA_RESTART"
        " is set)",
        "9 00:00:05.500100 --- SIGTERM {si_signo=SIGTERM, si_code=SI_USER, si_pid=1} ---",
        "8 00:00:06.000000 poll([{fd=4, events=POLLIN}], 1, 200) = 0 (Timeout)"])
    (futex,) = [c for c in _calls(events) if c.tid == 9]
    assert futex.ongoing and futex.ret is None and futex.dur == pytest.approx(4.5)
    assert any(isinstance(e, ev.SignalDelivered) and e.tid == 9 for e in events)


def test_a_call_a_signal_interrupted_is_a_finished_call_when_the_thread_goes_on() -> None:
    events = _events([
        "9 read(3, 0x7ffd, 64) = ? ERESTARTSYS (To be restarted if SA_RESTART is set)",
        "9 --- SIGALRM {si_signo=SIGALRM, si_code=SI_KERNEL} ---",
        "9 rt_sigreturn({mask=[]}) = -1 EINTR (Interrupted system call)",
        "9 write(2, \"timeout\\n\", 8) = 8"])
    calls = _calls(events)
    assert [c.name for c in calls] == ["read", "rt_sigreturn", "write"]
    assert not any(c.ongoing for c in calls) and calls[0].err == "ERESTARTSYS"


def test_the_batch_path_gives_the_same_events() -> None:
    lines = (FIELD / "futex_self_f_k_p_term_killed.log").read_text().splitlines()
    one, two = StraceConverter(), StraceConverter()
    a = [e for line in lines for e in one.feed_text(line)] + one.finish()
    b = two.events_batch(lines) + two.finish()
    assert a == b and one.cut_calls == two.cut_calls


@pytest.mark.parametrize("log, ongoing, how", [
    ("futex_self_ff_p_killed", {14967: "futex", 14969: "poll"}, "in a call whose end"),
    ("futex_self_f_k_p_term_killed.log", {14967: "futex"}, "a signal interrupted"),
    ("pasted_p_sessions_old_format.log", {15176: "futex", 15178: "poll"}, "in a call whose end"),
    ("pasted_p_sessions_strace6.log", {15176: "futex", 15178: "poll"}, "in a call whose end"),
])
def test_field_logs_keep_each_threads_last_call(log: str, ongoing: dict, how: str,
                                                tmp_path: Path) -> None:
    out = str(tmp_path / "t.htrace")
    res = import_strace(str(FIELD / log), out)
    reader = TraceReader(out)
    got = {e.tid: e.name for e in reader.events() if isinstance(e, ev.Syscall) and e.ongoing}
    assert ongoing.items() <= got.items()
    assert res.unparsed == 0
    assert any(how in n for n in res.notes), res.notes
    report = json.dumps(analyze_trace(out).notes)
    assert how in report                    # the report says the call was cut


# ------------------------------------------------------------ strace -k stacks (issue 32 item 4)
K_FRAMES = [   # real lines of futex_self_f_k_p_term_killed.log and of strace's man page
    (" > /usr/lib/x86_64-linux-gnu/libc.so.6(__lll_lock_wait_private+0x7b) [0x8612b]",
     ("__lll_lock_wait_private (libc.so.6)", "/usr/lib/x86_64-linux-gnu/libc.so.6")),
    (" > /tmp/hl/futex_self(main+0xd1) [0x12d0]", ("main (futex_self)", "/tmp/hl/futex_self")),
    (" > /tmp/hl/futex_self() [0x12d0]", ("0x12d0 (futex_self)", "/tmp/hl/futex_self")),
    (" > unexpected_backtracing_error [0x7f3a1c2b]", None),
]


@pytest.mark.parametrize("text, frame", K_FRAMES)
def test_k_frame_lines(text, frame):
    from tracer.strace.kstacks import parse_frame
    from tracer.strace.lines import split_line
    t = split_line(text)
    assert t is not None and t[2] == "info"
    assert parse_frame(t[4]) == frame


def test_k_stack_of_the_call_a_log_ends_in_is_the_thread_s_native_stack():
    from tracer.events.stacks import NativeStack
    log = FIELD / "futex_self_f_k_p_term_killed.log"
    conv = StraceConverter()
    evs = [e for text in log.read_text().splitlines() for e in conv.feed_text(text)]
    evs += conv.finish()
    stacks = [e for e in evs if isinstance(e, NativeStack)]
    # the main thread's interrupted futex (its frames, not the SIGTERM line's copy); the
    # poller's last poll is unfinished: strace prints no stack for it
    assert [(s.tid, s.source) for s in stacks] == [(14967, "strace -k")]
    assert stacks[0].frames[:2] == ["__lll_lock_wait_private (libc.so.6)",
                                    "pthread_mutex_lock (libc.so.6)"]
    assert len(stacks[0].frames) == len(stacks[0].libs) == 6


def test_k_stack_makes_the_futex_wait_a_lock_wait(tmp_path):
    from tracer.load.trace import analyze_trace
    from tracer.strace.importer import import_strace
    out = str(tmp_path / "t.htrace")
    import_strace(str(FIELD / "futex_self_f_k_p_term_killed.log"), out)
    r = analyze_trace(out)
    assert (r.root_cause["pid"], r.root_cause["tid"]) == (14967, 14967)
    assert "a lock wait (pthread_mutex_lock <- __lll_lock_wait_private)" in r.root_cause["summary"]
