"""One-shot look at process trees: what every thread is doing right now (hangtrace snapshot).

Contract:
- ``take_snapshot(pids, root)`` reads /proc once for each pid and all of its descendants: every
  thread (state, CPU time, wchan, current system call decoded with what it waits on), every fd
  and what it points to, and the listening sockets. It never stops or signals anything.
- It never raises for processes that vanish or cannot be read: those become ``errors`` lines
  (a pid that does not exist) or empty fields (fds of another user's process).
- ``Snapshot.to_json()`` is the stable machine form: {"format": "hangtrace.snapshot/1", ...}.
  render/snapshot.py draws it; renderers never read /proc.
"""
from __future__ import annotations

import platform
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..linux import procfs
from ..events import FdInfo
from ..linux.procfs_fds import read_fds_checked
from ..linux.syscall_table import describe_blocking, parse_proc_syscall

__all__ = ["ThreadSnapshot", "ProcessSnapshot", "Snapshot", "take_snapshot", "STATE_NAMES",
           "FORMAT"]

FORMAT = "hangtrace.snapshot/1"

# /proc/PID/stat state letters (fs/proc/array.c task_state_array).
STATE_NAMES = {"R": "running", "S": "sleeping", "D": "disk sleep", "T": "stopped",
               "t": "tracing stop", "X": "dead", "Z": "zombie", "P": "parked", "I": "idle"}


@dataclass
class ThreadSnapshot:
    """One thread. ``syscall`` is the call name, "running" or "" (blocked outside a call or
    unreadable); ``blocking`` is describe_blocking's text ("futex(0x7f.., WAIT_BITSET) no
    timeout"); ``has_timeout`` False marks a wait that only another thread or process can end.
    """
    tid: int
    comm: str
    state: str
    utime: float
    stime: float
    wchan: str = ""
    syscall: str = ""
    syscall_raw: str = ""
    blocking: str = ""
    waits_on: str = ""
    has_timeout: Optional[bool] = None
    stack: List[str] = field(default_factory=list)   # Python frames (--stacks), innermost first


@dataclass
class ProcessSnapshot:
    pid: int
    ppid: int
    comm: str
    cmdline: List[str]
    state: str
    exit_code: Optional[int] = None
    start_time: Optional[float] = None
    environ_rank: Optional[str] = None
    threads: List[ThreadSnapshot] = field(default_factory=list)
    fds: List[FdInfo] = field(default_factory=list)
    fds_readable: bool = True
    listening: List[str] = field(default_factory=list)


@dataclass
class Snapshot:
    ts: float
    host: str
    roots: List[int]
    processes: List[ProcessSnapshot] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)

    def listening(self) -> List[Tuple[int, str]]:
        """(pid, "tcp 127.0.0.1:8000") for every listening socket in the trees."""
        return [(p.pid, s) for p in self.processes for s in p.listening]

    def to_json(self) -> Dict[str, Any]:
        return {"format": FORMAT, "ts": self.ts, "host": self.host, "roots": self.roots,
                "processes": [asdict(p) for p in self.processes], "errors": self.errors}


def _thread_snapshot(pid: int, tid: int, fds: Dict[int, FdInfo], root: str,
                     ticks_hz: int) -> Optional[ThreadSnapshot]:
    sample = procfs.read_thread_sample(pid, tid, root)
    if sample is None:
        return None  # exited while we looked
    cs = parse_proc_syscall(sample.syscall)
    block = describe_blocking(cs, fds)
    if cs is None:
        name = ""
    elif cs.kind == "running":
        name = "running"
    else:
        name = cs.name or ""
    return ThreadSnapshot(
        tid=tid, comm=sample.comm, state=sample.state, utime=sample.utime / ticks_hz,
        stime=sample.stime / ticks_hz, wchan="" if sample.wchan == "0" else sample.wchan,
        syscall=name, syscall_raw=sample.syscall,
        blocking=str(block) if block else "", waits_on=block.waits_on if block else "",
        has_timeout=block.has_timeout if block else None)


def _process_snapshot(pid: int, root: str) -> Optional[ProcessSnapshot]:
    st = procfs.read_stat(pid, root=root)
    if st is None:
        return None
    fds_checked = read_fds_checked(pid, root)
    fds = fds_checked or []
    by_fd = {f.fd: f for f in fds}
    bt = procfs.boot_time(root)
    snap = ProcessSnapshot(
        pid=pid, ppid=st.ppid, comm=st.comm, cmdline=procfs.read_cmdline(pid, root),
        state=st.state, exit_code=st.exit_code if st.state in ("Z", "X") else None,
        start_time=None if bt is None else bt + st.starttime / procfs.TICKS_HZ,
        environ_rank=procfs.read_environ_rank(pid, root), fds=fds,
        fds_readable=fds_checked is not None,
        listening=procfs.listening_sockets(pid, root, fds=fds))
    for tid in procfs.list_tids(pid, root):
        t = _thread_snapshot(pid, tid, by_fd, root, procfs.TICKS_HZ)
        if t is not None:
            snap.threads.append(t)
    return snap


def take_snapshot(pids: Iterable[int], root: str = "/proc", *, stacks: bool = False) -> Snapshot:
    """Snapshot of every process of the trees rooted at ``pids``, each parent before its children.

    ``stacks``: also each Python process's stacks through py-spy (pystacks.py); a stack that
    could not be taken is an ``errors`` line."""
    roots = list(dict.fromkeys(pids))
    snap = Snapshot(ts=time.time(), host=platform.node(), roots=roots)
    tree = procfs.children_map(root)
    # Depth-first, so that every parent comes before its children (pids wrap: a child may
    # have a smaller pid than its parent).
    order: List[int] = []
    stack = list(reversed(roots))
    while stack:
        pid = stack.pop()
        if pid in order:
            continue
        order.append(pid)
        stack.extend(sorted(tree.get(pid, ()), reverse=True))
    for pid in order:
        ps = _process_snapshot(pid, root)
        if ps is None:
            if pid in roots:
                snap.errors.append(f"pid {pid}: no such process")
            continue  # a descendant that exited while we looked
        snap.processes.append(ps)
        if not ps.fds_readable:
            snap.errors.append(f"pid {pid}: fds not readable (another user's process: run as "
                               "root or as its owner)")
    if stacks:
        _add_stacks(snap)
    return snap


def _add_stacks(snap: Snapshot) -> None:
    from .pystacks import failure_notes, find_py_spy, is_python_process, take_stacks
    exe = find_py_spy()
    failures = []
    for p in snap.processes:
        if p.state in ("Z", "X") or not is_python_process(p.pid):
            continue
        by_tid = {t.tid: t for t in p.threads}
        for s in take_stacks(p.pid, exe):
            if s.error:
                failures.append(s)
            elif s.tid in by_tid:
                by_tid[s.tid].stack = list(s.frames)
    snap.errors.extend(failure_notes(failures))
