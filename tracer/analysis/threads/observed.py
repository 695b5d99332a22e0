"""What the recording could not observe, and the thread verdict that forbids (the process and
tree verdicts it forbids: verdicts/observed.py).

Contract (pure functions):
- ``rule_not_observed(ctx)`` is a thread rule: a thread whose calls were never observed (a
  syscall backend could not attach to it, or, with /proc samples alone, its current syscall
  could not be read) is ``unknown``, with what failed and what was seen as evidence.
- ``unobserved_lines(rec)``: one line per kind of trouble ("strace could not attach to 3
  threads of pid 2: ptrace(PTRACE_SEIZE): Operation not permitted"), for the report's verdict
  line (Report.unobserved). Where the troubles come from: ``_thread_error``.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ... import events as ev
from ..accumulate.accumulator import Recording
from ..vocab.nodes import real_id
from ..vocab.verdict import IDLE, PROGRESSING, UNKNOWN, ThreadVerdict
from .context import ThreadContext

RULE = "not-observed"
PROCESS_RULE = "thread-" + RULE      # as process rules that a thread's verdict decides
_FILES = {"syscall": "/proc/{pid}/task/*/syscall", "io": "/proc/{pid}/io",
          "fd": "/proc/{pid}/fd", "stat": "/proc/{pid}/stat"}


def _thread_error(rec: Recording, pid: int, tid: int) -> Optional[ev.ObserveError]:
    """The ObserveError that leaves this thread's calls unobserved, if any.
    A backend that could not look at a target says so with an ``ObserveError`` event
    (events/__init__.py), saved in the trace like every other event: strace could not attach to a
    thread (ptrace refused, the thread was gone), /proc files of a process could not be read
    (another user's process without root). The accumulator keeps them by (pid, tid, what) in
    ``Recording.observe_errors``."""
    errs = rec.observe_errors
    if not errs:
        return None
    if rec.has_syscalls:
        return errs.get((pid, tid, "attach")) or errs.get((pid, None, "attach"))
    if rec.has_samples:
        return errs.get((pid, None, "syscall"))
    return None


def _describe(e: ev.ObserveError) -> str:
    if e.what == "attach":
        return f"{e.source} could not attach to it: {e.why}"
    where = _FILES.get(e.what, "/proc/{pid}/" + e.what).format(pid=e.pid)
    return f"{where} could not be read: {e.why}"


def rule_not_observed(c: ThreadContext) -> Optional[ThreadVerdict]:
    """A thread whose calls were never observed is ``unknown`` (module doc), with what failed and
    what was seen (its CPU from /proc, its states) as evidence. Silence from a thread nobody
    watched is no evidence: without this rule it would look idle (no calls) or busy (strace timing
    counts a thread with no calls as 100% outside syscalls)."""
    t = c.t
    if t.total_syscalls or t.ongoing is not None:
        return None
    err = _thread_error(c.rec, t.pid, t.tid)
    if err is None:
        return None
    evidence = [_describe(err)]
    if c.cpu is not None and c.cpu.source == "samples":
        evidence.append(c.cpu.describe(c.rec.window) + " (/proc)")
    if t.samples:
        states = ", ".join(f"{s} {n}/{t.samples}" for s, n in t.states.most_common(3))
        evidence.append(f"states in /proc samples: {states}")
    evidence.append("its calls were never seen, so it cannot be judged")
    return ThreadVerdict(UNKNOWN, RULE, evidence,
                         cpu=c.cpu if c.cpu is not None and c.cpu.source == "samples" else None)


def unobserved_lines(rec: Recording) -> List[str]:
    """One line per (source, what, why) with the pids and thread counts it concerns."""
    groups: Dict[Tuple[str, str, str], List[ev.ObserveError]] = {}
    for e in rec.observe_errors.values():
        groups.setdefault((e.source, e.what, e.why), []).append(e)
    out = []
    for (source, what, why), errs in sorted(groups.items()):
        pids = sorted({e.pid for e in errs if e.pid is not None})
        who = ", ".join(str(real_id(p)) for p in pids[:6]) + (
            f" and {len(pids) - 6} more" if len(pids) > 6 else "")
        if what == "attach":
            n = len(errs)
            out.append(f"{source} could not attach to {n} thread{'s' if n > 1 else ''} of pid "
                       f"{who}: {why}")
        elif what == "backend":
            out.append(f"{source}: {why}")
        elif what == "excluded":
            out.append(f"pid {who} not traced: {why}")
        elif what == "reused":          # the line names the pid and both processes
            out.append(why)
        else:
            files = _FILES.get(what, "/proc/PID/" + what).replace("{pid}", "PID")
            out.append(f"could not read {files} of pid {who}: {why}")
    return out
