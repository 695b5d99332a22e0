"""Pid namespaces: whose pid numbers hangtrace sees (its /proc's: what its user types and
ptrace takes; a container's inside one), and a process's pids in the namespaces below that.

Contract:
- ``PidView``: the pid namespace /proc numbers processes in (``dev``, ``ino``, ``host``), with
  hangtrace's own (``own_ino``, ``proc_is_own``); ``bpf_settings()``: pidns_dev/pidns_ino of
  bpf/ht_pidns.bpf.h (0, 0 on the host). ``pid_view(root)``: cached, never raises.
- ``parse_nspid(text)``: the NSpid numbers of a /proc/PID/status text, outermost first; () when
  absent (kernels before 4.1) or malformed. ``read_nspid(pid, root)``; ``inner_pids(pid,
  root)``: its pids below /proc's namespace ("pid 4123 (pid 7 in its namespace)"), [] when
  none; ``inner_tids(pid, root)``: {its threads' tids there: /proc's tids}.
- ``INIT_PID_NS_INO``: the init pid namespace's inode; ``kernel_dev``: MKDEV of a stat st_dev.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

__all__ = ["INIT_PID_NS_INO", "PidView", "pid_view", "parse_nspid", "read_nspid",
           "inner_pids", "inner_tids", "kernel_dev"]

INIT_PID_NS_INO = 0xEFFFFFFC


def kernel_dev(st_dev: int) -> int:
    """A device number as the kernel keeps it (MKDEV: major << 20 | minor), from stat's."""
    return os.major(st_dev) << 20 | os.minor(st_dev)


@dataclass(frozen=True)
class PidView:
    """The pid namespace whose numbers /proc shows (module doc)."""
    dev: int = 0            # st_dev of its nsfs inode, as stat gives it
    ino: int = INIT_PID_NS_INO
    own_ino: int = INIT_PID_NS_INO
    proc_is_own: bool = True
    known: bool = True

    @property
    def host(self) -> bool:
        """/proc numbers processes as the host (the init pid namespace) does."""
        return self.ino == INIT_PID_NS_INO

    @property
    def own_host(self) -> bool:
        """hangtrace itself runs in the init pid namespace."""
        return self.own_ino == INIT_PID_NS_INO

    def bpf_settings(self) -> Dict[str, int]:
        """pidns_dev / pidns_ino of bpf/ht_pidns.bpf.h: 0, 0 for host pids."""
        if self.host:
            return {"pidns_dev": 0, "pidns_ino": 0}
        return {"pidns_dev": kernel_dev(self.dev), "pidns_ino": self.ino}


def _ns_of(path: str) -> Optional[Tuple[int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


_views: Dict[str, PidView] = {}


def pid_view(root: str = "/proc") -> PidView:
    """The namespace /proc numbers processes in: that of its pid 1 (the namespace's init lives
    in it), else, where pid 1's is unreadable, hangtrace's own when /proc/self is this process.
    Cached per ``root``."""
    got = _views.get(root)
    if got is not None:
        return got
    own = _ns_of(f"{root}/self/ns/pid")
    try:
        proc_is_own = os.readlink(f"{root}/self") == str(os.getpid())
    except OSError:
        proc_is_own = False
    seen = _ns_of(f"{root}/1/ns/pid") or (own if proc_is_own else None)
    if seen is None:
        view = PidView(own_ino=own[1] if own else INIT_PID_NS_INO, proc_is_own=proc_is_own,
                       known=False)
    else:
        view = PidView(dev=seen[0], ino=seen[1], own_ino=own[1] if own else seen[1],
                       proc_is_own=proc_is_own)
    _views[root] = view
    return view


def parse_nspid(text: str) -> Tuple[int, ...]:
    """The numbers of the ``NSpid:`` line of a /proc/PID/status text (module doc)."""
    for line in text.splitlines():
        if line.startswith("NSpid:"):
            fields = line[len("NSpid:"):].split()
            if not fields or not all(f.isascii() and f.isdigit() and len(f) <= 10
                                     for f in fields):
                return ()
            return tuple(int(f) for f in fields)
    return ()


def read_nspid(pid: object, root: str = "/proc") -> Tuple[int, ...]:
    """NSpid of ``pid`` (or "PID/task/TID") as ``root`` shows it; () when unreadable."""
    try:
        with open(f"{root}/{pid}/status", encoding="utf-8", errors="replace") as f:
            return parse_nspid(f.read(4096))
    except OSError:
        return ()


def inner_pids(pid: int, root: str = "/proc") -> List[int]:
    """The pids of ``pid`` in the namespaces below /proc's, outermost first (module doc)."""
    return list(read_nspid(pid, root)[1:])


def inner_tids(pid: int, root: str = "/proc") -> Dict[int, int]:
    """{its tid in its own namespace: the tid /proc gives} for each thread of ``pid`` when the
    process lives below /proc's namespace (what a tool run in it, or py-spy reading CPython's
    thread states, calls its threads); {} when it lives in /proc's."""
    if len(read_nspid(pid, root)) < 2:
        return {}
    out = {}
    try:
        tids = [int(t) for t in os.listdir(f"{root}/{pid}/task") if t.isdigit()]
    except OSError:
        return {}
    for tid in tids:
        ns = read_nspid(f"{pid}/task/{tid}", root)
        if len(ns) >= 2:
            out[ns[-1]] = tid
    return out
