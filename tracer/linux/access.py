"""Why a /proc file could not be read, and hangtrace's own place in the process tree.

Contract:
- ``read_checked(path)`` (procfs's, re-exported): ``(data, None)`` or ``(None, GONE | DENIED |
  UNREADABLE)``. GONE: the process or thread no longer exists (ENOENT, ESRCH); DENIED: it exists
  and this user may not read the file (EACCES, EPERM: another user's process, ptrace access
  rules); UNREADABLE: anything else (EIO...). So a message never says "permission denied" for a
  process that simply exited.
- ``process_access(pid)``: None when /proc/PID/stat reads (the process exists and is
  visible), else GONE or DENIED (hidepid).
- ``is_kernel_thread(pid)``: PF_KTHREAD in /proc/PID/stat (kthreadd, kworkers).
- ``ancestors(pid)``: the parent chain up to (and including) pid 1, nearest first;
  ``descends_from(pid, ancestor)``: whether ``ancestor`` is on ``pid``'s parent chain.
- Every function takes ``root`` (default "/proc"), like procfs.
"""
from __future__ import annotations

from typing import List, Optional

from .procfs import DENIED, GONE, UNREADABLE, read_checked, read_stat

__all__ = ["GONE", "DENIED", "UNREADABLE", "read_checked", "process_access",
           "is_kernel_thread", "ancestors", "descends_from", "PF_KTHREAD"]

PF_KTHREAD = 0x00200000      # include/linux/sched.h
def process_access(pid: int, root: str = "/proc") -> Optional[str]:
    """None when the process exists and its stat reads, else GONE or DENIED (module doc)."""
    if pid <= 0:
        return GONE
    data, why = read_checked(f"{root}/{pid}/stat")
    if data is not None:
        return None
    return why if why != UNREADABLE else DENIED


def is_kernel_thread(pid: int, root: str = "/proc") -> bool:
    st = read_stat(pid, root=root)
    return st is not None and bool(st.flags & PF_KTHREAD)


def ancestors(pid: int, root: str = "/proc") -> List[int]:
    """Parent, grandparent, ... up to pid 1 (nearest first); stops where /proc cannot say."""
    out: List[int] = []
    seen = {pid}
    while True:
        st = read_stat(pid, root=root)
        if st is None or st.ppid <= 0 or st.ppid in seen:
            return out
        pid = st.ppid
        seen.add(pid)
        out.append(pid)


def descends_from(pid: int, ancestor: int, root: str = "/proc") -> bool:
    """True when ``ancestor`` is on the parent chain of ``pid`` (not ``pid`` itself)."""
    return ancestor in ancestors(pid, root)
