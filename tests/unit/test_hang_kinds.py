"""Issue 44: hang kinds judged by their shape.

Item 1, busy loops without a wait: calls that return at once with nothing (FIONREAD = 0, a
receive of 0 bytes or EAGAIN, a zero-timeout poll, sched_yield), back to back, with no timeout,
no clock read and no output, are a spin (threads/empty_polls.py); a loop that sleeps between its
looks is not. Item 2: a call cut by the end of the log that cannot block is no wait
(linux/blocking.cannot_block, threads/state.running_at_cut); one that can block still is.
The events come from real strace lines (tests/data/strace/field's logs) through the converter.
"""
from __future__ import annotations

from typing import List

import pytest

from tracer import events as ev
from tracer.analysis.accumulate.accumulator import Accumulator
from tracer.analysis.threads.empty_polls import is_empty_call
from tracer.analysis.threads.state import began_after_window, blocking_wait, running_at_cut
from tracer.analysis.threads.thread import judge_thread
from tracer.linux.blocking import cannot_block
from tracer.strace.convert import StraceConverter
from strace_events import events_of


_events = events_of                 # (tests/strace_events.py)


def _judge(lines: List[str], timed: bool = False):
    """(verdict, rule) of each thread of a little log (without times unless ``timed``), with
    the accumulator and the thread rules."""
    acc = Accumulator(backends=["strace"], capabilities={"timestamps": timed,
                                                         "durations": timed})
    for e in _events(lines):
        acc.feed(e)
    rec = acc.finish()
    out = {}
    for (pid, tid), t in rec.threads.items():
        v = judge_thread(t, rec, rec.processes[pid])
        out[tid] = (v.verdict, v.rule)
    return out, rec


@pytest.mark.parametrize("name, args, timeout, req, expected", [
    ("sched_yield", "", None, None, True),
    ("clock_gettime", "CLOCK_MONOTONIC, ", None, None, True),
    ("getpid", "", None, None, True),
    ("ioctl", "3, FIONREAD, ", None, "FIONREAD", True),
    ("ioctl", "3, VT_WAITACTIVE, 7", None, "VT_WAITACTIVE", False),     # a device may block
    ("poll", "[{fd=4, events=POLLIN}], 1, 0", 0.0, None, True),
    ("poll", "[{fd=4, events=POLLIN}], 1, 200", 0.2, None, False),
    ("recvfrom", "3, \"\", 256, MSG_DONTWAIT, NULL, NULL", None, None, True),
    ("recvfrom", "3, ", None, None, False),                  # may block: it cannot tell
    ("read", "5, ", None, None, False),
    ("futex", "0x55ab, FUTEX_WAIT_PRIVATE, 2, NULL", None, None, False),
])
def test_which_calls_cannot_block(name, args, timeout, req, expected) -> None:
    assert cannot_block(name, args, timeout, req) is expected


KILLED_IN_YIELD = [                      # yield_join_f_p_killed.log's first and last lines
    "8194  futex(0x7f3512313990, FUTEX_WAIT_BITSET|FUTEX_CLOCK_REALTIME, 8196, NULL, "
    "FUTEX_BITSET_MATCH_ANY <unfinished ...>",
    *["8196  sched_yield()                     = 0"] * 3,
    "8196  sched_yield(",
]


def test_a_yield_cut_by_the_end_is_no_wait_but_a_futex_is() -> None:
    """Fails on main: the cut sched_yield was the worker's wait (blocked in sched_yield)."""
    _, rec = _judge(KILLED_IN_YIELD)
    worker, main = rec.threads[(8194, 8196)], rec.threads[(8194, 8194)]
    assert worker.ongoing is not None and worker.ongoing.name == "sched_yield"
    assert running_at_cut(worker) and blocking_wait(worker, rec, []) is None
    assert not running_at_cut(main)
    w = blocking_wait(main, rec, [])
    assert w is not None and w.call == "futex"


def test_a_receive_cut_after_one_that_returned_nothing_is_no_wait() -> None:
    lines = ["7  recvfrom(3, \"\", 256, MSG_DONTWAIT, NULL, NULL) = 0",
             "7  read(4, 0x7ffd, 16) = -1 EAGAIN (Resource temporarily unavailable)",
             "7  read(4, "]
    _, rec = _judge(lines)
    t = rec.threads[(7, 7)]
    assert running_at_cut(t) and blocking_wait(t, rec, []) is None
    # a read on another fd cut the same way may block
    _, rec = _judge(lines[:2] + ["7  read(5, "])
    assert not running_at_cut(rec.threads[(7, 7)])


# The poller's last lines under strace (-f -tt -T -yy) in a whole parallel run: the window
# closed at .675742; strace, still detaching, printed a recv begun 0.4 ms later without its flags.
POLLER_CUT_AFTER_THE_WINDOW = [
    "12259 06:26:55.674219 ioctl(4<TCP:[127.0.0.1:33338->127.0.0.1:34147]>, FIONREAD, [0]) = 0 "
    "<0.000002>",
    "12259 06:26:55.674230 recvfrom(4<TCP:[127.0.0.1:33338->127.0.0.1:34147]>, \"\", 256, "
    "MSG_DONTWAIT, NULL, NULL) = 0 <0.000002>",
    "12259 06:26:55.674241 ioctl(5<TCP:[127.0.0.1:33340->127.0.0.1:34147]>, FIONREAD, [0]) = 0 "
    "<0.000070>",
    "12259 06:26:55.675144 recvfrom(5<TCP:[127.0.0.1:33340->127.0.0.1:34147]>, ",
]


@pytest.mark.parametrize("after_s, blocked", [(0.0004, False), (-1.0, True)])
def test_a_call_begun_after_the_window_closed_is_no_wait(after_s: float, blocked: bool) -> None:
    """Fails without began_after_window since the window ends before the backends' stop: the
    poller was blocked in recvfrom "since 4.0 s into it", the tree idle. A call begun before
    the window's end that it cannot tell about is still the thread's wait."""
    acc = Accumulator(backends=["strace"], capabilities={"timestamps": True, "durations": True})
    evs = _events(POLLER_CUT_AFTER_THE_WINDOW)
    for e in evs:
        acc.feed(e)
    cut = [e for e in evs if isinstance(e, ev.Syscall)][-1]
    rec = acc.finish(end=cut.ts - after_s)
    t = rec.threads[(12259, 12259)]
    assert t.ongoing is not None and t.ongoing.name == "recvfrom" and not running_at_cut(t)
    assert began_after_window(t, rec) is not blocked
    w = blocking_wait(t, rec, [])
    assert (w is not None and w.call == "recvfrom") if blocked else w is None


def test_empty_calls_are_told_from_real_lines() -> None:
    calls = [e for e in _events([
        "22250 06:21:57.275157 ioctl(5<socket:[507279]>, FIONREAD, [0]) = 0 <0.000008>",
        "22250 06:21:57.275293 recvfrom(5<socket:[507279]>, \"\", 256, MSG_DONTWAIT, NULL, "
        "NULL) = 0 <0.000008>",
        "22250 06:21:57.275331 poll([{fd=4, events=POLLIN}], 1, 0) = 0 (Timeout) <0.000004>",
        "22250 06:21:57.275354 recvfrom(6<socket:[507281]>, \"abc\", 256, MSG_DONTWAIT, NULL, "
        "NULL) = 3 <0.000003>",
        "22250 06:21:57.275360 poll([{fd=4, events=POLLIN}], 1, 100) = 0 (Timeout) <0.1>",
    ]) if isinstance(e, ev.Syscall)]
    assert [is_empty_call(c) for c in calls] == [True, True, True, False, False]


def _poll_loop(sleep_every: int) -> List[str]:
    """A thread polling six sockets whose peers are gone (FIONREAD, then recv), ``sleep_every``
    rounds a 10 ms sleep (0: never), 60 rounds, no times (strace -p)."""
    out = []
    for r in range(60):
        for fd in range(3, 9):
            out += [f"77  ioctl({fd}, FIONREAD, [0])                 = 0",
                    f"77  recvfrom({fd}, \"\", 256, MSG_DONTWAIT, NULL, NULL) = 0"]
        if sleep_every and r % sleep_every == 0:
            out.append("77  clock_nanosleep(CLOCK_MONOTONIC, 0, {tv_sec=0, tv_nsec=10000000}, "
                       "NULL) = 0")
    return out


def test_polling_closed_sockets_without_a_wait_is_a_spin() -> None:
    """Fails on main: 'idle, no spin'."""
    verdicts, _ = _judge(_poll_loop(0))
    assert verdicts[77] == ("busy-waiting", "empty-polls")


def test_polling_with_a_sleep_between_rounds_is_no_empty_poll_spin() -> None:
    verdicts, _ = _judge(_poll_loop(1))
    assert verdicts[77][1] != "empty-polls"


def test_a_thread_that_only_yields_spins_however_few_the_yields() -> None:
    """backoff_spin_f_p_stderr.log's shape (fails on main: the worker was not a spinner)."""
    lines = ["strace: Process 27229 attached with 2 threads",
             "[pid 27229] futex(0x7f187f599990, FUTEX_WAIT_BITSET|FUTEX_CLOCK_REALTIME, 27230, "
             "NULL, FUTEX_BITSET_MATCH_ANY <unfinished ...>",
             *["[pid 27230] sched_yield()               = 0"] * 5]
    verdicts, _ = _judge(lines)
    assert verdicts[27230] == ("busy-waiting", "yield-loop")


# ---------------------------------------------------------------- item 4: redraws
def _shapes(lines: List[str]):
    from tracer.record.probes.log_lines import line_template
    return [line_template(x) for x in lines]


def test_a_stuck_redraw_is_one_shape_with_the_same_count() -> None:
    """Fails on main: each spinner glyph made its own shape (a 'new line': news)."""
    got = _shapes(["⠼ loading shards 450/1000 elapsed 0:00:12",
                   "⠴ loading shards 450/1000 elapsed 0:00:13",
                   "⠦ loading shards 450/1000 elapsed 0:01:02"])
    assert len({t for t, _ in got}) == 1 and {tuple(v) for _, v in got} == {(450.0, 1000.0)}


def test_a_tqdm_bar_keeps_only_its_count_as_slots() -> None:
    """Fails on main: the elapsed and left clocks and the rate were slots that moved."""
    a, b = _shapes([" 45%|████▌     | 450/1000 [00:12<00:15, 36.1it/s]",
                    " 45%|████▌     | 450/1000 [00:14<00:18, 30.2it/s]"])
    assert a == b == ("<N>%|<B>| <N>/<N> [<T><<T>, <R>]", [45.0, 450.0, 1000.0])
    c, = _shapes([" 46%|████▋     | 460/1000 [00:13<00:15, 36.0it/s]"])
    assert c[0] == a[0] and c[1][1] == 460.0          # an advancing count stays a slot


# ---------------------------------------------------------------- item 3: split calls
SPLIT_BY_ENTER = [                 # py_lock_terminal_ctrl_c.log (a terminal's text), in order
    "write(1, \"taking the lock twice\\n\", 22taking the lock twice",
    ") = 22",
    "futex(0x201b0ce0, FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME, 0, NULL, "
    "FUTEX_BITSET_MATCH_ANY",
    "",
    "^C) = ? ERESTARTSYS (To be restarted if SA_RESTART is set)",
    "--- SIGINT {si_signo=SIGINT, si_code=SI_KERNEL} ---",
    "rt_sigreturn({mask=[]})                 = -1 EINTR (Interrupted system call)",
]


def test_a_call_split_by_the_terminal_is_still_the_call() -> None:
    """Fails on main: the futex line was dropped as not understood, the write too."""
    conv = StraceConverter()
    out: List[ev.Event] = []
    for line in SPLIT_BY_ENTER:
        out += conv.feed_text(line)
    out += conv.finish()
    calls = [e for e in out if isinstance(e, ev.Syscall)]
    assert [c.name for c in calls] == ["write", "futex", "rt_sigreturn"]
    w, f = calls[0], calls[1]
    assert isinstance(w, ev.WriteCall) and w.ret == 22
    assert isinstance(f, ev.FutexCall) and f.timeout is None and f.err == "ERESTARTSYS"
    assert conv.unparsed == 0


def test_a_lone_result_line_without_a_call_before_it_stays_unparsed() -> None:
    conv = StraceConverter()
    out = conv.feed_text("getpid()                                = 7") + conv.feed_text(") = 3")
    assert [e.name for e in out if isinstance(e, ev.Syscall)] == ["getpid"]
    assert conv.unparsed == 1


# ---------------------------------------------------------------- item 5b: polling the driver
RM_CONTROL = "ioctl(8, _IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2a, 0x20), 0x7fff56739ea0) = 0"


@pytest.mark.parametrize("lines, busy", [
    ([f"444  {RM_CONTROL}"] * 5, True),                    # h200_rm_control_p_excerpt's shape
    ([f"444  {RM_CONTROL}"] * 4, False),
    ([f"444  {RM_CONTROL}"] * 3 + ["444  getpid() = 444"] + [f"444  {RM_CONTROL}"] * 2, False),
])
def test_the_same_rm_control_back_to_back_polls_the_driver(lines, busy) -> None:
    """Fails on main for five: 'idle, no spin'."""
    verdicts, _ = _judge(lines)
    assert (verdicts[444] == ("busy-waiting", "gpu-spin-wait")) is busy
