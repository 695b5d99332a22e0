"""Kernel stacks of the threads that are stuck in the kernel, at the end of a recording.

Contract:
- ``stack_reason(state, wait)`` is pure: why a thread's kernel stack is worth reading, or
  None (which threads are: its docstring).
- ``kernel_stack_probe(pids, analyzer)`` is an ``EndProbe``: D-state threads as /proc shows
  them now, plus the analyzer's ``stuck_waits``; one ``KernelStack`` per thread read (at most
  ``MAX_THREADS``; D state first, then device calls, then futex waits, none read after the
  probe's deadline: probe_run.probe_deadline), and, where the kernel refuses (not root), one event with ``tid`` 0 per
  process instead of one refusal per thread. It only reads /proc (linux/kstack.py); it runs
  before anything that pauses the target (py-spy --native), so the stacks are the recorded
  state's.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from ...events.stacks import KernelStack
from ...linux import cancel, procfs
from ...linux.kstack import NOT_ROOT, read_stack
from ..probe_run import probe_deadline

if TYPE_CHECKING:  # pragma: no cover
    from ...analysis.analyzer import Analyzer
    from ...analysis.vocab.waits import Wait

__all__ = ["stack_reason", "kernel_stack_probe", "read_thread_stacks", "MAX_THREADS"]

MAX_THREADS = 2048
DEVICE_KINDS = frozenset({"nvidia", "nvidia-uvm", "nvidiactl", "fuse", "dev", "tty"})
_RW_CALLS = frozenset({"read", "write", "pread64", "pwrite64", "readv", "writev", "preadv",
                       "pwritev"})


def stack_reason(state: str, wait: Optional["Wait"], whole_window: bool = True) -> Optional[str]:
    """Why the kernel stack of a thread in ``state`` waiting in ``wait`` is read.
    Worth it: a thread in D state (uninterruptible sleep: the vfork parent, a driver call, a stuck
    filesystem), and a thread blocked for the whole window in an ioctl, a read or write of a device
    (/dev/nvidia*, other devices, a tty), or a futex wait without timeout (mutexes, conditions,
    collectives that wait on one). Other waits (sockets, pipes, polls) say what they wait for from
    user space already."""
    if state == "D":
        return "D state (uninterruptible sleep)"
    if wait is None or not whole_window:
        return None
    how = "blocked all window in"
    target = f"({wait.fd_target})" if wait.fd_target else ""
    if wait.call == "ioctl":
        return f"{how} ioctl{target}"
    if wait.call in _RW_CALLS and wait.fd_kind in DEVICE_KINDS:
        return f"{how} {wait.call}{target}"
    if wait.call == "futex" and wait.timeout is None:
        return f"{how} a futex wait without timeout"
    return None


def _d_state(pids: List[int]) -> Dict[Tuple[int, int], str]:
    """The threads of ``pids`` in D state now. A process of one thread is told by its own stat
    (its state is its only thread's: no listing of its tasks)."""
    out: Dict[Tuple[int, int], str] = {}
    for pid in pids:
        st = procfs.read_stat(pid)
        if st is None:
            continue
        one = st.num_threads == 1
        for tid in [pid] if one else procfs.list_tids(pid):
            if not one:
                st = procfs.read_stat(pid, tid)
            if st is not None and st.state == "D":
                out[(pid, tid)] = stack_reason("D", None) or ""
    return out


def _state_wchan(pid: int, tid: int) -> Tuple[str, str]:
    """(state, wchan) of a thread, "" each where unreadable (two files: read for hundreds
    of parked threads at the end, the other two of a full sample are not needed here)."""
    base = f"/proc/{pid}/task/{tid}"
    data = procfs.read_bytes(base + "/stat")
    st = None if data is None else procfs.parse_stat(data)
    if st is None:
        return "", ""
    wchan = (procfs.read_bytes(base + "/wchan") or b"").decode("ascii", "replace").strip()
    return st.state, "" if wchan == "0" else wchan


def _first(item: Tuple[Tuple[int, int], str]) -> Tuple[int, int, int]:
    """Which stack is read first: a thread in D state, then one in a device call, then the
    futex waits (the many parked threads of a pool), each by pid and tid."""
    (pid, tid), reason = item
    kind = 0 if reason.startswith("D state") else 2 if "futex" in reason else 1
    return kind, pid, tid


def read_thread_stacks(wanted: Dict[Tuple[int, int], str],
                       now: Optional[float] = None) -> List[KernelStack]:
    """One KernelStack per (pid, tid) of ``wanted`` (-> reason), a refusal once per process."""
    ts = time.time() if now is None else now
    out: List[KernelStack] = []
    refused: set = set()
    deadline = probe_deadline()
    order = sorted(wanted.items(), key=_first)[:MAX_THREADS]
    for n, ((pid, tid), reason) in enumerate(order):
        if pid in refused:
            continue
        stop = cancel.stopping() if n & 63 == 63 else None
        if stop is not None or (deadline is not None and n & 63 == 63
                                and time.monotonic() > deadline):
            out.append(KernelStack(ts=ts, pid=0, tid=0, reason="bound", error=(
                f"{len(order) - n} more stuck threads: "
                + (f"{stop} ended the recording" if stop else "the end probes' budget was spent")
                + " (the deciding ones were read first)")))
            break
        state, wchan = _state_wchan(pid, tid)
        frames, why = read_stack(pid, tid)
        if why == NOT_ROOT:
            refused.add(pid)
            out.append(KernelStack(ts=ts, pid=pid, tid=0, reason=reason, error=why))
            continue
        out.append(KernelStack(ts=ts, pid=pid, tid=tid, state=state, wchan=wchan,
                               reason=reason, frames=frames, error=why))
    if len(wanted) > MAX_THREADS:
        out.append(KernelStack(ts=ts, pid=0, tid=0, reason="bound", error=(
            f"{len(wanted) - MAX_THREADS} more stuck threads: only the first {MAX_THREADS} "
            "kernel stacks were read")))
    return out


def kernel_stack_probe(pids: List[int], analyzer: Optional["Analyzer"]) -> List[KernelStack]:
    """EndProbe (session.py): kernel stacks of the stuck threads of ``pids`` (module doc)."""
    wanted = _d_state(pids)
    if analyzer is not None:
        for pid, tid, w in analyzer.stuck_waits(pids):
            reason = stack_reason("S", w, w.whole_window)
            if reason is not None:
                wanted.setdefault((pid, tid), reason)
    return read_thread_stacks(wanted)


kernel_stack_probe.__name__ = "kernel stacks"
