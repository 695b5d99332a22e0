"""A call on a device that never returns while the other threads go on (issue 44 item 7: an
``ioctl`` on /dev/nvidia-uvm left unfinished at the log's end; VT_WAITACTIVE on a console).

Contract (pure):
- ``on_a_device(w)``: the wait is a call on a device (an NVIDIA fd, a driver's character
  device, a terminal's ioctl), whose calls return in milliseconds when the device answers.
- ``others_went_on(c)``: another thread of its process made a call after it began (times), or
  the log has no times and another thread ends the log in a run of timed waits.
- ``lower_bound(c)``: the evidence of how long it lasted at least, from the other threads'
  runs of timed waits that end the log (their timeouts add up; with times, only runs begun
  after the call did), or None.
"""
from __future__ import annotations

from typing import List, Optional

from ... import events as ev
from ...linux.fdtarget import GPU_KINDS
from ..vocab.waits import Wait
from .context import ThreadContext

__all__ = ["on_a_device", "others_went_on", "lower_bound", "DEVICE_WAIT_MIN_S"]

# With times, a device call in flight at the end this long, while others go on, is the
# thread's state (the longest NVIDIA ioctl of the H200 start-up took 0.18 s)
DEVICE_WAIT_MIN_S = 0.5
_TIMED_WAITS = frozenset({"poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait",
                          "epoll_pwait2"})


def on_a_device(w: Optional[Wait]) -> bool:
    return w is not None and w.timeout is None and (
        bool(w.gpu_ioctl) or w.fd_kind in GPU_KINDS or w.fd_kind == "dev"
        or (w.call == "ioctl" and w.fd_kind == "tty"))


def _runs(c: ThreadContext, call: Optional[ev.Syscall] = None) -> List[tuple]:
    """(tid, timeouts, each) of the other threads' timed waits that timed out: with times, the
    run of them their completed calls end in, begun after this thread's call (``call``, default
    the one it is in); without, all of them (the log cannot say which came after it began)."""
    call = call or c.t.ongoing
    start = call.ts if call is not None else None
    out = []
    for t in c.rec.threads_of(c.proc.pid):
        if t.tid == c.t.tid or not t.poll_timeout_values:
            continue
        each = t.poll_timeout_values.most_common(1)[0][0]
        if not c.timed:
            out.append((t.tid, t.poll_timeouts, each))
        elif t.tail_name in _TIMED_WAITS and t.tail_ret == 0 and t.tail_run >= 2 \
                and start is not None and t.tail_since >= start:   # (a poll's 0: its timeout)
            out.append((t.tid, t.tail_run, each))
    return out


def others_went_on(c: ThreadContext) -> bool:
    start = c.t.ongoing.ts if c.t.ongoing is not None else None
    if c.timed and start is not None:
        return any(t.tid != c.t.tid and t.last_ts is not None and t.last_ts > start
                   for t in c.rec.threads_of(c.proc.pid))
    return bool(_runs(c))


def lower_bound(c: ThreadContext, call: Optional[ev.Syscall] = None) -> Optional[str]:
    runs = _runs(c, call)
    if not runs:
        return None
    tid, n, each = max(runs, key=lambda r: r[1] * r[2])
    if not c.timed:
        return (f"the other threads went on: thread {tid} made {n} timed waits of "
                f"{each * 1000:.0f} ms in the log, which has no times: those made after it "
                "began bound from below how long it lasted")
    return (f"it never returned while the other threads went on: thread {tid} made {n} timed "
            f"waits of {each * 1000:.0f} ms after it began: it lasted at least "
            f"{(n - 1) * each:.1f} s")                   # (the run's first: partly before)
