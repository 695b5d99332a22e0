"""Finding processes: enumeration and ``--name`` matching through psutil, and psutil's errors
mapped to gone / denied in one place.

Contract:
- ``name_matches(pattern, comm, argv)``: the one matching rule of ``--name``.
- ``find_by_name(pattern, root="/proc")``: the pids that match, sorted, never the caller.
- ``select_by_name(pattern, force=False, root="/proc")``: (the pids ``--name`` selects, what
  was left out and why, one phrase each: ``keep_selectable``, for every selection).
- ``ancestors_of_me()``: this process's parent chain (psutil), nearest first; ``listing()``:
  (pid, name) of every process psutil sees, for shell completion of pids.
- ``access_of(exc)``: GONE, DENIED or UNREADABLE for a psutil error; ``pid_access(pid)``: None
  when the process's /proc/PID/stat reads, else those words (procfs.read_checked).
"""
from __future__ import annotations

import fnmatch
import os
from types import ModuleType
from typing import List, Optional, Sequence, Tuple

from .access import is_kernel_thread
from .procfs import DENIED, GONE, UNREADABLE, list_pids, read_checked, read_cmdline, read_comm

__all__ = ["name_matches", "find_by_name", "select_by_name", "keep_selectable",
           "ancestors_of_me", "access_of",
           "pid_access", "listing"]


def _psutil() -> ModuleType:
    """psutil, imported where it is used: 10 ms that attach's start does without."""
    import psutil
    return psutil


_GLOB_CHARS = frozenset("*?[")


def name_matches(pattern: str, comm: str, argv: Sequence[str]) -> bool:
    """Whether a process of this comm and argv matches ``--name pattern`` (module doc).
    A substring of, or (with ``*?[``) an fnmatch glob over the comm, the whole command line,
    argv[0] and its base name. Both are needed: comm is cut at 15 bytes, and a title set with
    setproctitle ("sglang::scheduler_TP1") appears only in the command line. The per-sample readers
    (per-thread syscall, wchan, schedstat, fdinfo, fd links, environ and cmdline in ProcessInfo
    records) stay hand-written in procfs.py: docs/ARCHITECTURE.md says why."""
    texts = [comm, " ".join(argv), argv[0], os.path.basename(argv[0])] if argv else [comm]
    if _GLOB_CHARS & set(pattern):
        return any(fnmatch.fnmatchcase(t, pattern) for t in texts)
    return any(pattern in t for t in texts)


def access_of(exc: BaseException) -> str:
    """GONE, DENIED or UNREADABLE for an error psutil raised (module doc).
    GONE for psutil.NoSuchProcess (a zombie too), DENIED for psutil.AccessDenied, else UNREADABLE:
    the same words as linux/access.py's readers."""
    psutil = _psutil()
    if isinstance(exc, psutil.NoSuchProcess):      # ZombieProcess is one
        return GONE
    if isinstance(exc, psutil.AccessDenied):
        return DENIED
    return UNREADABLE


def pid_access(pid: int) -> Optional[str]:
    """None when the process exists and its status reads, else GONE or DENIED (module doc)."""
    if pid <= 0:
        return GONE
    _, why = read_checked(f"/proc/{pid}/stat")    # what psutil's status() reads
    return None if why is None else why if why != UNREADABLE else DENIED


def find_by_name(pattern: str, root: str = "/proc") -> List[int]:
    """Pids whose comm or command line matches ``pattern`` (module doc).
    Never the calling process (whose own command line holds the pattern). On the live /proc the
    processes and their names and command lines come from psutil (``process_iter``, which skips
    processes that exit meanwhile); under another ``root`` (a recorded /proc tree in the tests)
    from procfs's readers."""
    if os.path.realpath(root) != "/proc":
        return sorted(pid for pid in list_pids(root)
                      if name_matches(pattern, read_comm(pid, root=root) or "",
                                      read_cmdline(pid, root)))
    me = os.getpid()
    found = []
    for proc in _psutil().process_iter(["name", "cmdline"]):
        info = proc.info                  # values psutil could not read are None
        if proc.pid == me:
            continue
        if name_matches(pattern, info.get("name") or "", info.get("cmdline") or []):
            found.append(proc.pid)
    return sorted(found)


def select_by_name(pattern: str, *, force: bool = False,
                   root: str = "/proc") -> Tuple[List[int], List[str]]:
    """What ``--name pattern`` records, and what it leaves out (module doc)."""
    return keep_selectable(find_by_name(pattern, root), force=force, root=root)


def keep_selectable(pids: List[int], *, force: bool = False,
                    root: str = "/proc") -> Tuple[List[int], List[str]]:
    """(the ``pids`` a selection by name, cgroup or container records, what it leaves out).
    Hangtrace's own ancestors never (a shell wrapper's command line holds the pattern too), pid 1
    and kernel threads only with ``force`` (as a pid given by number)."""
    mine = set(ancestors_of_me()) if os.path.realpath(root) == "/proc" else set()
    found: List[int] = []
    ancestors: List[int] = []
    kernel, init = 0, False
    for pid in pids:
        if pid == 1:                     # everyone's ancestor: refused as init, not as that
            if force:
                found.append(pid)
            else:
                init = True
        elif pid in mine:
            ancestors.append(pid)
        elif not force and is_kernel_thread(pid, root):
            kernel += 1
        else:
            found.append(pid)
    left_out = []
    if ancestors:
        left_out.append(f"hangtrace's own ancestor{'s' if len(ancestors) > 1 else ''} "
                        + ", ".join(map(str, ancestors)))
    if init:
        left_out.append("pid 1 (init: --force records it)")
    if kernel:
        left_out.append(f"{kernel} kernel thread{'s' if kernel > 1 else ''} (--force tries them)")
    return found, left_out


def listing() -> List[Tuple[int, str]]:
    """(pid, comm) of every process, sorted by pid (module doc)."""
    return sorted((p.pid, p.info.get("name") or "") for p in _psutil().process_iter(["name"]))


def ancestors_of_me() -> List[int]:
    """This process's parents up to pid 1, nearest first (psutil.Process.parents)."""
    psutil = _psutil()
    try:
        return [p.pid for p in psutil.Process().parents()]
    except psutil.Error:
        return []
