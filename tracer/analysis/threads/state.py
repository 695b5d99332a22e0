"""What a thread is blocked in at the end of the recording, and how much it was on CPU: the
facts every thread rule is given (context.ThreadContext). Pure functions over one
``ThreadStats`` (plus its process's fd table):
- ``blocking_wait``: the call the thread sits in at the end, as a typed ``Wait`` (vocab/waits.py),
  from an strace or eBPF call still unfinished, or from /proc samples that show the same call
  throughout without the thread running (not a cut call that cannot block, ``running_at_cut``,
  nor one begun after the window closed, ``began_after_window``);
- ``cpu_use``: the fraction of the window the thread was on CPU, measured (sched_switch, /proc
  ticks: samples or the window's ends, ``ran_between_ends``), else inferred from strace timing;
- ``timed_wakeups``: its timed waits that ran out (calls); ``sampled_timer``: from /proc samples,
  the timed wait it was mostly in and how often it woke (schedstat's third field, the times the
  thread was scheduled in: unchanged between two samples, it never woke).
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from ... import events as ev
from ...linux.blocking import cannot_block
from ...linux.restart import TIMED_RESTARTS, resumed_call
from ..accumulate.stats import Recording, ThreadStats
from ..vocab.waits import CpuUse, Wait, wait_from_call, wait_from_proc

__all__ = ["blocking_wait", "restarted_wait", "cpu_use", "ran_between_ends", "timed_wakeups",
           "sampled_timer", "running_at_cut", "began_after_window"]

MIN_ENDS_SPAN_S = 1.0       # the ends' readings this far apart or more: a tick is 1% of a second


def _returned_nothing(e: ev.Syscall) -> bool:
    return e.err in ("EAGAIN", "EWOULDBLOCK") or (isinstance(e, ev.ReadCall) and e.ret == 0
                                                  and not e.name.startswith("accept"))


_REPLY_READS = frozenset({"read", "readv", "recvfrom", "recvmsg", "recvmmsg"})


def _awaits_reply(t: ThreadStats) -> bool:
    """The thread waits to read the fd its last call sent on (a request, then its reply): a
    reply owed by the peer, never input that may or may not come (issue 44 item 6)."""
    c, last = t.ongoing, t.last_call
    return c is not None and last is not None and c.name in _REPLY_READS \
        and isinstance(last, ev.WriteCall) and last.err is None and last.fd == c.fd \
        and c.fd is not None and (c.fd_kind or last.fd_kind or "socket") in ("socket", "tcp",
                                                                            "unix", "?")


def running_at_cut(t: ThreadStats) -> bool:
    """The end of the recording cut ``t`` inside a call that cannot block
    (linux/blocking.cannot_block: the clock, sched_yield, a query ioctl, a poll with a zero
    timeout, a receive with MSG_DONTWAIT), or inside the same call on the same fd as its last
    one, which returned nothing at once (EAGAIN, 0 bytes): the thread was running, not waiting
    (issue 44 item 2). Only a call that can block is the thread's state at the cut."""
    c = t.ongoing
    if c is None:
        return False
    if cannot_block(c.name, c.args or "", c.timeout if isinstance(c, ev.PollCall) else None,
                    c.request_name if isinstance(c, ev.IoctlCall) else None):
        return True
    last = t.last_call
    return last is not None and last.name == c.name and last.fd == c.fd \
        and c.fd is not None and _returned_nothing(last)


def began_after_window(t: ThreadStats, rec: Recording) -> bool:
    """The call ``t`` is cut in began after the window closed (a tracer that still ran while
    the backends stopped: strace's detach): at the window's end the thread was between calls,
    running, so that call is not its state (a busy poller cut 0.4 ms after the window's end in
    a recv whose MSG_DONTWAIT strace had not printed yet was called blocked)."""
    return t.ongoing is not None and t.ongoing.ts > rec.end


MIN_RESTARTS = 2          # cuts of the same wait in a row, each re-entered after the handler
MAX_HANDLER_CALLS = 32    # calls a signal handler makes between two cuts, at most


def restarted_wait(t: ThreadStats, fds: List[ev.FdInfo]) -> Optional[Wait]:
    """The wait without a time limit a signal keeps cutting (accumulate/calls._note_restart),
    when the recording ends inside the handler's work after the last cut: no more calls since
    than between two cuts. The thread sits in that wait; the signal's ticks are no work."""
    r = t.restarted
    if r is None or t.restarts < MIN_RESTARTS:
        return None
    since = t.ncalls - t.calls_at_restart
    if since > min(MAX_HANDLER_CALLS, max(t.restart_gap, 2)):
        return None
    w = wait_from_call(r, fds)
    w.interrupted = t.restarts
    w.whole_window = False
    return w


def _resume(w: Wait, strace_args: str, wchan: str) -> None:
    """A wait seen as restart_syscall becomes the call it resumes (linux/restart.py); a sleep or
    futex resumed this way had a time limit, whose length is not known."""
    call = resumed_call(strace_args, wchan)
    if not call:
        return
    w.call, w.resumed = call, True
    if call in TIMED_RESTARTS:
        w.timeout = -1.0


def blocking_wait(t: ThreadStats, rec: Recording, fds: List[ev.FdInfo]) -> Optional[Wait]:
    """The call ``t`` is blocked in at the end of the recording, if any (module doc)."""
    if t.exited_at is not None:
        return None
    if t.ongoing is not None:
        if running_at_cut(t) or began_after_window(t, rec):
            return None
        w = wait_from_call(t.ongoing, fds)
        w.awaits_reply = _awaits_reply(t)
        if w.call == "restart_syscall":
            _resume(w, t.ongoing.args or "", t.last_sample.wchan if t.last_sample else "")
        # Blocked "throughout" when the call began near the start of what we saw of it.
        w.whole_window = (t.ongoing.ts - rec.start) <= 0.25 * rec.window \
            and t.total_syscalls <= 2
        return w
    w = restarted_wait(t, fds)
    if w is not None:
        return w
    s = t.last_sample
    if s is None or s.state not in ("S", "D", "I"):
        return None
    w = wait_from_proc(s.syscall, fds, s.wchan)
    if w is None:
        return None
    first = t.first_sample
    same_call = len(t.sample_calls) == 1
    never_ran = (first is not None and first.run_count is not None and s.run_count is not None
                 and s.run_count == first.run_count)
    w.whole_window = same_call and (never_ran or first is None or first.run_count is None)
    if rec.has_syscalls and t.total_syscalls > 0 and not w.whole_window:
        # strace saw the thread complete calls: a single sample is no proof of a long block.
        return None
    return w


def _runnable(t: ThreadStats) -> Optional[float]:
    """From /proc samples: the fraction of the time between the first and last sample that the
    thread was on a CPU or waiting in a run queue for one (schedstat run + wait)."""
    a, b = t.first_sample, t.last_sample
    if a is None or b is None or b.ts <= a.ts or None in (a.run_ns, a.wait_ns, b.run_ns,
                                                         b.wait_ns):
        return None
    wanted = (b.run_ns + b.wait_ns) - (a.run_ns + a.wait_ns)  # type: ignore[operator]
    return min(1.0, max(0.0, wanted / 1e9 / (b.ts - a.ts)))


def cpu_use(t: ThreadStats, rec: Recording) -> Optional[CpuUse]:
    if t.cpu is not None and t.cpu.ts > t.cpu.since:
        secs = t.cpu.on_cpu_ns / 1e9
        return CpuUse(min(1.0, secs / (t.cpu.ts - t.cpu.since)), secs, "samples", _runnable(t))
    a, b = t.first_sample, t.last_sample
    if a is not None and b is not None and b.ts > a.ts:
        secs = ((b.utime + b.stime) - (a.utime + a.stime)) / float(b.ticks_hz or 100)
        span = b.ts - a.ts
        return CpuUse(min(1.0, max(0.0, secs / span)), secs, "samples", _runnable(t))
    if not rec.has_syscalls or not rec.capabilities.get("durations", True) \
            or not rec.capabilities.get("timestamps", True) or not t.durations_known:
        return None
    begin = max(rec.start, t.started_at or rec.start)
    end = t.exited_at if t.exited_at is not None else rec.end
    span = end - begin
    if span <= 0.5:
        return None
    blocked = 0.0
    if t.ongoing is not None and not running_at_cut(t) and not began_after_window(t, rec):
        blocked = max(0.0, end - max(t.ongoing.ts, begin))
    outside = max(0.0, span - min(span, t.syscall_time + blocked))
    ran = ran_between_ends(t, rec)
    if ran is None:
        return CpuUse(outside / span, outside, "strace")
    # strace's time outside syscalls is on CPU, runnable or the tracer's own stops (two a call,
    # longer on a busy machine): what the thread wanted at most; the ends' ticks what it ran
    return CpuUse(ran[0] / ran[1], ran[0], "strace", runnable=outside / span)


def ran_between_ends(t: ThreadStats, rec: Recording) -> Optional[Tuple[float, float]]:
    """(CPU seconds, span) of ``t`` between its process's start and end memory readings
    (``MemoryProgress.cpu``: /proc task stat at the window's ends), when both have it and they
    lie ``MIN_ENDS_SPAN_S`` or more apart; else None."""
    p = rec.processes.get(t.pid)
    a = p.memory.get("start") if p is not None else None
    b = p.memory.get("end") if p is not None else None
    if a is None or b is None or t.tid not in a.cpu or t.tid not in b.cpu \
            or b.ts - a.ts < MIN_ENDS_SPAN_S:
        return None
    return max(0.0, b.cpu[t.tid] - a.cpu[t.tid]), b.ts - a.ts


def timed_wakeups(t: ThreadStats) -> int:
    """Timed waits of ``t`` that ran out: poll and futex timeouts, sleeps (traced calls)."""
    return t.poll_timeouts + t.futex_timeouts + t.sleeps


def sampled_timer(t: ThreadStats, fds: List[ev.FdInfo]) -> Optional[Tuple[Wait, int, int]]:
    """(the timed wait, times it woke (schedstat), samples in it) when /proc samples show ``t``
    in one timed wait in at least 60% of at least 3 samples, else None."""
    a, b = t.first_sample, t.last_sample
    if t.samples < 3 or a is None or b is None or a.run_count is None or b.run_count is None:
        return None
    text, n = t.sample_calls.most_common(1)[0]
    w = wait_from_proc(text, fds)
    if w is None or w.timeout is None or n < 0.6 * t.samples:
        return None
    return w, b.run_count - a.run_count, n
