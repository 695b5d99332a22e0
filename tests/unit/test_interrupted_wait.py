"""The tree rule ``interrupted-wait`` (verdicts/tree.py ``_interrupted_wait``): a futex wait
without timeout that SIGINT, SIGTERM, SIGQUIT or SIGHUP interrupted, after which the process
only writes its traceback and exits, is where the log shows it hung: blocked, that thread the
root cause. Not for a wait that means input (accept), a wait with a timeout, a signal a program
uses for itself (SIGALRM), or a process with another thread at work beside the wait."""
from __future__ import annotations

from typing import List

import pytest

from tracer.load.trace import analyze_trace
from tracer.strace.importer import import_strace

ATTACH = "strace: Process 1234 attached"
FUTEX_INT = ("futex(0x7f3a2c0b1d40, FUTEX_WAIT_PRIVATE, 0, NULL) = ? ERESTARTSYS (To be "
             "restarted if SA_RESTART is set)")
SIGINT = "--- SIGINT {si_signo=SIGINT, si_code=SI_KERNEL} ---"
SIGRETURN = "rt_sigreturn({mask=[]})                 = -1 EINTR (Interrupted system call)"
TRACEBACK = ['write(2, "Traceback (most recent call last"..., 35) = 35',
             'write(2, "KeyboardInterrupt\\n", 18) = 18']
EXIT = ["exit_group(1)                           = ?", "+++ exited with 1 +++"]


def _report(tmp_path, lines: List[str]):  # type: ignore[no-untyped-def]
    log = tmp_path / "hang.log"
    log.write_text("\n".join(lines) + "\n")
    out = str(tmp_path / "hang.htrace")
    import_strace(str(log), out)
    return analyze_trace(out)


@pytest.mark.parametrize("lines, then", [
    ([ATTACH, FUTEX_INT, SIGINT, SIGRETURN, *TRACEBACK, *EXIT], "then it exited with status 1"),
    ([ATTACH, FUTEX_INT, SIGINT, SIGRETURN, *TRACEBACK], "is its end, not progress"),
    ([ATTACH, FUTEX_INT, "--- SIGTERM {si_signo=SIGTERM, si_code=SI_USER, si_pid=1} ---",
      SIGRETURN, *EXIT], "then it exited"),
], ids=["sigint-then-exit", "sigint-log-ends-in-traceback", "sigterm-then-exit"])
def test_a_wait_a_users_signal_ended_is_the_hang(tmp_path, lines: List[str], then: str) -> None:
    r = _report(tmp_path, lines)
    assert (r.verdict, r.rule) == ("blocked", "interrupted-wait"), r.root_cause["summary"]
    assert (r.root_cause["pid"], r.root_cause["tid"]) == (1234, 1234)
    s = r.root_cause["summary"]
    assert "futex WAIT on 0x7f3a2c0b1d40, no timeout" in s and "interrupted it" in s and then in s


@pytest.mark.parametrize("lines", [
    # a server idle in accept, stopped by SIGTERM: input, not a hang
    [ATTACH, "accept4(3, NULL, NULL, SOCK_CLOEXEC) = ? ERESTARTSYS (To be restarted if "
     "SA_RESTART is set)", "--- SIGTERM {si_signo=SIGTERM, si_code=SI_USER, si_pid=1} ---",
     SIGRETURN, *EXIT],
    # a wait with a timeout
    [ATTACH, "futex(0x7f3a2c0b1d40, FUTEX_WAIT_PRIVATE, 0, {tv_sec=5, tv_nsec=0}) = ? "
     "ERESTARTSYS (To be restarted if SA_RESTART is set)", SIGINT, SIGRETURN, *EXIT],
    # SIGALRM: a program's own timer, after which it goes on
    [ATTACH, FUTEX_INT, "--- SIGALRM {si_signo=SIGALRM, si_code=SI_KERNEL} ---", SIGRETURN,
     *TRACEBACK],
    # another thread at work beside the interrupted main thread
    ["strace: Process 1234 attached with 2 threads", f"[pid  1234] {FUTEX_INT}",
     *[f'[pid  1235] write(1, "step {i}\\n", 7) = 7' for i in range(5)],
     f"[pid  1234] {SIGINT}", f"[pid  1234] {SIGRETURN}",
     *[f"[pid  1234] {w}" for w in TRACEBACK]],
], ids=["accept-sigterm", "futex-with-timeout", "sigalrm", "worker-at-work"])
def test_not_an_interrupted_hang(tmp_path, lines: List[str]) -> None:
    assert _report(tmp_path, lines).rule != "interrupted-wait"
