"""Thread rules for a thread that runs nothing: gone (exited, or killed inside a call that never
returned: issue 44 item 7, no invented exit) or stopped by a signal.

Contract: as threads/thread.py (pure functions of a ``ThreadContext``, each verdict naming its
rule and evidence; THREAD_RULES there puts them first).
"""
from __future__ import annotations

from typing import Optional

from ..vocab.verdict import BLOCKED, EXITED, ThreadVerdict
from ..vocab.waits import wait_from_call
from .context import ThreadContext
from .device_calls import lower_bound, on_a_device

__all__ = ["rule_exited", "rule_stopped"]


def rule_exited(c: ThreadContext) -> Optional[ThreadVerdict]:
    """Gone; a thread of a process a signal killed while it was in a call that never returned
    did not exit: it was killed inside the call (issue 44 item 7: no invented exit)."""
    if c.t.exited_at is None:
        return None
    when = f"{c.t.exited_at - c.rec.start:.1f} s into the recording" if c.timed else \
        "(the log has no times: when is unknown)"
    end, call = c.proc.exited, c.t.never_returned
    if end is not None and end.signal and call is not None:
        w = wait_from_call(call, c.proc.info.fds if c.proc.info else [])
        bound = lower_bound(c, call) if on_a_device(w) else None
        return ThreadVerdict(EXITED, "killed-in-call", [
            f"killed by {end.signal} {when} inside {w.describe()}, which never returned"]
            + ([bound] if bound else []), wait=w)
    return ThreadVerdict(EXITED, "thread-exited", [f"exited {when}"])


def rule_stopped(c: ThreadContext) -> Optional[ThreadVerdict]:
    """Stopped by a signal (state T: SIGSTOP, or job control): it runs no code and makes no call
    until SIGCONT, whatever its counters say, so it is neither spinning nor idle. From /proc
    samples (state T at the end) or strace's "--- stopped by SIGSTOP ---" with no call since."""
    t = c.t
    s = t.last_sample
    if s is not None and s.state == "T":
        n = t.states.get("T", 0)
        why = f"state T in {n}/{t.samples} /proc samples: SIGSTOP or job control"
    elif t.stopped_by is not None and t.ncalls == t.stopped_calls and \
            (s is None or s.state in ("T", "t")):
        why = f"stopped by {t.stopped_by} (strace), no call since"
    else:
        return None
    return ThreadVerdict(BLOCKED, "stopped",
                         [f"stopped ({why}); it runs nothing until it gets SIGCONT"],
                         stopped=True)
