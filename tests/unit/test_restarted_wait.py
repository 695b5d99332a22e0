"""A wait without a time limit that a signal keeps cutting is still the thread's wait (issue 44
survey: a master in wait4 that a timer signal interrupts, the log ending in the handler), and
a log's unnamed process (pid 0, ppid 0) is never its own child (its wait4 once made a cycle of
one: "deadlocked"). Lines are real strace 6.1 output of tests/data/strace/programs/timer_wait.c
and futex_self.c, the pids removed as ``strace -p`` prints them."""
from __future__ import annotations

from typing import List

import pytest

from tracer import events as ev
from tracer.analysis.accumulate.accumulator import Accumulator
from tracer.analysis.job.process_facts import process_facts
from tracer.analysis.threads.state import restarted_wait
from tracer.strace.convert import StraceConverter
from tracer.strace.lines import glued_message

CUT = "wait4(-1, 0x7ffc3aad2fbc, 0, NULL)      = ? ERESTARTSYS (To be restarted if SA_RESTART is set)"
TICK = ["--- SIGALRM {si_signo=SIGALRM, si_code=SI_KERNEL} ---",
        'write(4, "!", 1)                        = 1',
        "rt_sigreturn({mask=[]})                 = 61"]


def _rec(lines: List[str]):
    conv = StraceConverter()
    acc = Accumulator(backends=["strace"], capabilities={"timestamps": False,
                                                         "durations": False})
    for line in lines:
        for e in conv.feed_text(line):
            acc.feed(e)
    for e in conv.finish():
        acc.feed(e)
    return acc.finish()


def _only_thread(rec):
    """The traced thread (pid 0: the log names none); a child its wait4 reaped is a process
    of its own (issue 44 item 8)."""
    return rec.threads[(0, 0)]


@pytest.mark.parametrize("lines, call", [
    ([CUT] + TICK + [CUT] + TICK[:2], "wait4"),            # cut twice, the log ends in the handler
    ([CUT] + TICK + [CUT] + TICK + [CUT] + TICK, "wait4"),
    (["futex(0x55d1, FUTEX_WAIT_PRIVATE, 2, NULL) = ? ERESTARTSYS (To be restarted if SA_RESTART is set)"]
     + TICK + ["futex(0x55d1, FUTEX_WAIT_PRIVATE, 2, NULL) = ? ERESTARTSYS (To be restarted if SA_RESTART is set)"]
     + TICK[:2], "futex"),
    ([CUT] + TICK, None),                                    # cut once: no run of cuts
    ([CUT] + TICK + [CUT] + TICK + ['write(1, "step 1\\n", 7) = 7'] * 9, None),  # went on to work
    ([CUT] + TICK + [CUT] + TICK + ["wait4(-1, [{WIFEXITED(s) && WEXITSTATUS(s) == 0}], 0, NULL) = 42"],
     None),                                                  # the wait returned: the run ends
    (["wait4(-1, 0x7ffc3aad2fbc, WNOHANG, NULL) = ? ERESTARTSYS (To be restarted if SA_RESTART is set)"]
     + TICK + ["wait4(-1, 0x7ffc3aad2fbc, WNOHANG, NULL) = ? ERESTARTSYS (To be restarted if SA_RESTART is set)"]
     + TICK[:2], None),                                      # WNOHANG never waits
])
def test_a_wait_a_signal_keeps_cutting(lines, call) -> None:
    t = _only_thread(_rec(lines))
    w = restarted_wait(t, [])
    assert (w.call if w is not None else None) == call
    if w is not None:
        assert w.interrupted >= 2 and "a signal cut it" in w.describe()


def test_an_unnamed_process_is_not_its_own_child() -> None:
    rec = _rec([CUT] + TICK)
    (pid,) = rec.processes
    assert pid == 0
    facts = process_facts(rec)
    assert pid not in facts[pid].children


@pytest.mark.parametrize("line, at", [
    ("read(5, ^Ccleanup: looking at pid 7716", 10),          # strace 4 -d at Ctrl-C
    ("futex(0x6264ac, FUTEX_WAIT_PRIVATE, 96153, NULL^CProcess 57295 detached", 49),
    ('write(1, "^C", 2) = 2', -1),
])
def test_strace_messages_glued_after_ctrl_c(line, at) -> None:
    assert glued_message(line) == at
