"""The processes a recording follows, found once and shared by every backend, and the
/proc services every backend needs (no backend borrows them from another).

Contract:
- ``TargetSet(roots, exclude)``: the pids recorded (thread-safe). ``discover()`` walks the roots'
  trees once and reads each process's ``ProcessInfo`` (after its threads' ``run_counts``): the
  trace header's processes, every backend's start; idempotent. ``add``/``discard`` follow births
  and deaths. A pid names its process only while it lives: ``reused``, ``drop_reused`` and
  ``alive`` tell a pid another process took since (its start time differs: issue 46 item 4).
- ``initial_process_infos(pids)``: ProcessInfo of ``pids`` and all their descendants;
  ``decode_wait_status(code)``: (exit status, signal, core dumped) of a wait(2) status;
  ``ParentCache``: pid -> ppid kept from one /proc listing to the next; ``pid_reused_line``.
"""
from __future__ import annotations

import threading
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

from ..errors import shown
from ..events import ProcessInfo
from ..linux import procfs
from ..linux.wait_status import decode_wait_status
from .stillness import RunCounts

__all__ = ["TargetSet", "ParentCache", "initial_process_infos", "decode_wait_status",
           "pid_reused_line"]


def initial_process_infos(pids: Iterable[int], root: str = "/proc") -> List[ProcessInfo]:
    """ProcessInfo of every pid in ``pids`` and all of their descendants, sorted by pid."""
    return TargetSet(list(pids)).discover(root)


class TargetSet:
    """The pids being recorded (thread-safe); roots are what the user asked for.

    ``exclude(pid)`` (optional) names processes that must never be recorded, whoever finds
    them (hangtrace itself, its children and its ancestors: session.py): ``add`` refuses them
    and ``excluded`` says so; the answer is cached per pid. ``discover()`` (module doc) adds
    the roots' descendants and reads their ``ProcessInfo`` once: ``infos``.
    """

    def __init__(self, roots: Iterable[int],
                 exclude: Optional[Callable[[int], bool]] = None) -> None:
        self._exclude = exclude
        self._verdicts: Dict[int, bool] = {}
        self.roots: List[int] = list(roots)
        self._pids: Set[int] = {p for p in self.roots if not self.excluded(p)}
        self._lock = threading.Lock()
        self.infos: Dict[int, ProcessInfo] = {}
        self.run_counts = RunCounts()          # before each info: who ran since (stillness.py)
        self.discovered = False
        self._root = "/proc"
        self._started: Dict[int, int] = {}     # pid -> its process's start time (clock ticks)

    def discover(self, root: str = "/proc") -> List[ProcessInfo]:
        """Walk the roots' trees once (module doc): every descendant not excluded is added and
        its ProcessInfo read; the infos sorted by pid. A second call returns the first's."""
        with self._lock:
            if self.discovered:
                return self.initial_infos()
            self.discovered, self._root = True, root
            self.run_counts.root = root
        # an excluded root's tree is walked too: its other descendants are recorded
        tables = procfs.SocketTables(root)
        for pid in sorted(set(self.roots) | set(procfs.descendants(self.roots, root))):
            if self.excluded(pid):
                continue
            self.add(pid)
            self._note_start(pid)               # a root was in the set before: noted here
            self.run_counts.add(pid)
            info = procfs.read_process_info(pid, root, tables=tables)
            if info is not None:
                self.infos[pid] = info
        return self.initial_infos()

    def initial_infos(self) -> List[ProcessInfo]:
        """The ProcessInfo ``discover`` read, sorted by pid (the trace header's processes)."""
        return [self.infos[p] for p in sorted(self.infos)]

    def excluded(self, pid: int) -> bool:
        """True for a pid that must never be recorded (class doc)."""
        if self._exclude is None:
            return False
        known = self._verdicts.get(pid)
        if known is None:
            known = self._verdicts[pid] = bool(self._exclude(pid))
        return known

    def add(self, pid: int) -> bool:
        """Add a pid, with its process's start time; True when it was new (False too for an
        excluded pid)."""
        if self.excluded(pid):
            return False
        with self._lock:
            if pid in self._pids:
                return False
            self._pids.add(pid)
        self._note_start(pid)
        return True

    def _note_start(self, pid: int) -> None:
        st = procfs.read_stat(pid, root=self._root)
        if st is not None:
            with self._lock:
                self._started.setdefault(pid, st.starttime)

    def reused(self, pid: int) -> Optional[str]:
        """One line when ``pid`` is now another process than the one added under it (its start
        time, /proc/PID/stat's clock ticks since boot, differs: it exited and pids wrapped),
        else None (the same process, gone, or never known). The session drops such pids before
        the backends attach, each backend again just before it ptraces a pid or marks it in
        its BPF filter, and the end probes read only ``alive()``: a root process that took a
        dead target's pid is never traced as it (``strace -p`` has this race)."""
        with self._lock:
            was = self._started.get(pid)
        if was is None:
            return None
        st = procfs.read_stat(pid, root=self._root)
        if st is None or st.starttime == was:
            return None
        return pid_reused_line(pid, was, st.starttime, st.comm)

    def drop_reused(self, pids: Optional[Iterable[int]] = None) -> List[Tuple[int, str]]:
        """Discard every pid (of ``pids``, default all) that another process now holds;
        (pid, the line saying so: ``reused``) for each."""
        dropped = []
        for pid in list(self.pids() if pids is None else pids):
            line = self.reused(pid)
            if line is not None:
                self.discard(pid)
                dropped.append((pid, line))
        return dropped

    def alive(self) -> List[int]:
        """The pids whose process is still there as the one found (not gone, not reused): one
        read of /proc/PID/stat each."""
        with self._lock:
            started = dict(self._started)
        out = []
        for pid in self.pids():
            st = procfs.read_stat(pid, root=self._root)
            if st is not None and started.get(pid, st.starttime) == st.starttime:
                out.append(pid)
        return out

    def discard(self, pid: int) -> None:
        with self._lock:
            self._pids.discard(pid)

    def pids(self) -> List[int]:
        with self._lock:
            return sorted(self._pids)

    def __contains__(self, pid: int) -> bool:
        with self._lock:
            return pid in self._pids


def pid_reused_line(pid: int, was: int, now: int, comm: str) -> str:
    """The one line that says a pid changed hands (``TargetSet.reused``); start times in clock
    ticks since boot."""
    hz = procfs.TICKS_HZ
    return (f"pid {pid} is not the process found at discovery: that one (started "
            f"{was / hz:.2f} s after boot) exited and {shown(comm)} (started {now / hz:.2f} s "
            f"after boot) now holds its pid: not traced")


class ParentCache:
    """pid -> ppid, updated from the /proc listing: only new pids have their stat read (the
    proc backend follows births with it, hangtrace watch its trees).

    A pid that died and was reused between two ticks (100 ms) keeps a stale parent; a child whose
    parent died is re-parented by the kernel but keeps its old parent here, which is what
    descendant discovery wants (it stays in the tree it was born in).
    """

    def __init__(self) -> None:
        self.ppid: Dict[int, int] = {}

    def refresh(self, root: str) -> Dict[int, List[int]]:
        """parent pid -> its children's pids, from the listing of ``root`` now."""
        live = set(procfs.list_pids(root))
        for pid in list(self.ppid):
            if pid not in live:
                del self.ppid[pid]
        for pid in live - self.ppid.keys():
            st = procfs.read_stat(pid, root=root)
            if st is not None:
                self.ppid[pid] = st.ppid
        tree: Dict[int, List[int]] = {}
        for pid, ppid in self.ppid.items():
            tree.setdefault(ppid, []).append(pid)
        return tree
