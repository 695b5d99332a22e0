"""Why a /proc file could not be read, and hangtrace's own place in the process tree.

Contract (every function takes ``root``, default "/proc", like procfs):
- ``read_checked(path)`` (procfs's, re-exported): ``(data, None)`` or ``(None, GONE | DENIED |
  UNREADABLE)``, so a message never says "permission denied" for a process that simply exited.
- Whether a pid given on the command line exists and is readable: linux/processes.py's
  ``pid_access``, with these words.
- ``may_trace(pid)``: whether this user may ptrace ``pid``, asked without attaching.
- ``is_kernel_thread(pid)``: PF_KTHREAD in /proc/PID/stat (kthreadd, kworkers).
- ``ancestors(pid)``: the parent chain up to (and including) pid 1, nearest first;
  ``descends_from(pid, ancestor)``: whether ``ancestor`` is on ``pid``'s parent chain.
"""
from __future__ import annotations

import os
from typing import List, Optional

from .procfs import DENIED, GONE, UNREADABLE, read_checked, read_stat

__all__ = ["GONE", "DENIED", "UNREADABLE", "read_checked", "may_trace",
           "is_kernel_thread", "ancestors", "descends_from", "PF_KTHREAD"]

PF_KTHREAD = 0x00200000      # include/linux/sched.h
def may_trace(pid: int, root: str = "/proc") -> bool:
    """Whether ptrace access to ``pid`` is allowed (what strace and the /proc backend's syscall and
    stack files need), checked without attaching: opening /proc/PID/mem makes the kernel's
    ptrace-attach access check and nothing else; True when it cannot tell (the process went away:
    the recording says so itself). In ``read_checked``'s words: GONE is a process or thread that no
    longer exists (ENOENT, ESRCH); DENIED one that exists while this user may not read the file
    (EACCES, EPERM: another user's process, ptrace access rules); UNREADABLE anything else
    (EIO...)."""
    try:
        os.close(os.open(f"{root}/{pid}/mem", os.O_RDONLY))
    except PermissionError:
        return False
    except OSError:
        return True
    return True


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
