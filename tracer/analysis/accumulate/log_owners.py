"""A fault a thread never came back from, and the futex owners a log alone shows (issue 44
item 9: a SIGSEGV inside malloc whose handler calls malloc; pthread_join).

Contract (pure functions of the accumulated ``ThreadStats``):
- ``in_fault_handler(t)``: the thread's last fault signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE
  raised by its own instruction) and the thread has made no rt_sigreturn since: it still runs
  its handler (or code the handler jumped to); None otherwise.
- ``log_owner(pid, t, w, tids, frames)``: the ``FutexOwner`` a log implies for the futex wait
  ``w`` of thread ``t`` where no probe read memory: a wait for the tid of another thread of
  its process is pthread_join of it (glibc waits on that tid's word); a lock wait in a fault
  handler whose fault's stack (``frames``, strace -k) is in the allocator or a lock is the lock
  the interrupted code held: the thread's own, a cycle of one.
"""
from __future__ import annotations

from typing import Collection, Optional, Sequence, Tuple

from ... import events as ev
from .stats import ThreadStats
from ..vocab.waits import Wait

__all__ = ["in_fault_handler", "log_owner", "LOCKED_CODE"]

# Functions that hold a lock of their own while they run: a fault inside one leaves it held.
LOCKED_CODE = ("malloc", "free", "calloc", "realloc", "memalign", "posix_memalign",
               "_int_malloc", "_int_free", "__libc_malloc", "__libc_free", "arena_get",
               "pthread_mutex_lock", "__lll_lock", "_IO_", "fprintf", "printf", "dl_iterate")


def in_fault_handler(t: ThreadStats) -> Optional[Tuple[str, str]]:
    """(signal, si_code) of the fault the thread has not returned from (module doc)."""
    if t.fault is None:
        return None
    sig, code, returns = t.fault
    return (sig, code) if t.syscalls.get("rt_sigreturn", 0) == returns else None


def fault_in_locked_code(frames: Sequence[str]) -> Optional[str]:
    """The innermost frame of ``frames`` ("FUNC (LIB)") in code that holds a lock, if any."""
    for f in frames[:8]:
        func = f.split(" (", 1)[0]
        if any(func.startswith(n) for n in LOCKED_CODE):
            return func
    return None


def log_owner(pid: int, t: ThreadStats, w: Wait, tids: Collection[int],
              frames: Sequence[str] = ()) -> Optional[ev.FutexOwner]:
    """The owner of the futex ``w`` waits on, as the log shows it (module doc), or None."""
    if w.call != "futex" or w.futex_addr is None or w.timeout is not None:
        return None
    val = w.futex_val
    if val is not None and val != t.tid and val in tids and w.futex_op.startswith("WAIT"):
        return ev.FutexOwner(0.0, pid, w.futex_addr, val, val, "join", pid,
                             why="the value it waits on is that thread's tid (pthread_join)")
    fault = in_fault_handler(t)
    where = fault_in_locked_code(frames) if fault is not None else None
    if where is not None and w.waits_for_a_lock:
        return ev.FutexOwner(0.0, pid, w.futex_addr, val, t.tid, "mutex", pid,
                             why=f"it took {fault[0]} inside {where}, which held the lock, and "
                             "waits for it in its handler: its own")
    return None
