"""A process's own I/O counters from /proc/PID/io, without the I/O of the children it reaped.

The kernel (6.18: do_io_accounting, wait_task_zombie) adds a reaped child's final io counters
(its own and its reaped children's) to the reaper's /proc/PID/io, and its faults and CPU to the
reaper's stat cminflt/cmajflt/cutime/cstime (``Stat.children``). Per-thread io has no such sum
but costs a file per thread per sample. Contract of ``ReapedIO.own(io, st, is_gone)``:
- ``io`` is read just before ``st``; the result never decreases, grows no more than the raw
  counters, and lacks the last counters of the children found reaped when ``st.children`` moved
  (``ReapedIO`` says which and what is left over).
- Pure: no /proc access here; ``is_gone(pid)`` is the caller's (``procfs.reaped``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Set, Tuple

from ..events import ProcessIO
from .procfs import Stat

__all__ = ["ReapedIO"]

_ZERO = (0, 0, 0, 0, 0, 0)
Counters = Tuple[int, ...]


def _counters(io: ProcessIO) -> Counters:
    return (io.rchar, io.wchar, io.syscr, io.syscw, io.read_bytes, io.write_bytes)


def _add(a: Counters, b: Counters) -> Counters:
    return tuple(x + y for x, y in zip(a, b))


@dataclass
class _Process:
    """The last reading of one process, and what it absorbed from reaped children."""
    ppid: int
    children_mark: int            # Stat.children at the last reading
    raw: Counters                 # /proc/PID/io at the last reading (a zombie's: its final)
    absorbed: Counters = _ZERO    # reaped children's counters taken out of ``raw``
    carry: Counters = _ZERO       # found reaped but not yet in ``raw``: for the next reading
    gone: bool = False            # found gone (reaped)
    counted: bool = False         # its counters were taken out of its reaper's
    children: Set[int] = field(default_factory=set)   # pids whose last ppid is this one


class ReapedIO:
    """Own I/O per process, one reading at a time.

    Each process's last reading is kept; when a reader's ``Stat.children`` moved, its children
    by the last ``ppid`` seen that ``is_gone`` now, and their gone children in turn (a chain
    reaped inside one interval, a subreaper's orphans), are taken out of its counters, up to
    what the raw counters grew. Found reaped but not yet in the counters (reaped between the io
    read and the stat read): taken from the next reading only, so an orphan that went to init
    costs an ancestor that reaped something else at most two readings' growth.
    What a child did after its last reading (a zombie's io is its final: ``ended``) stays the
    reaper's; a child born and reaped between two readings is never known (its I/O is the
    reaper's, as before). An auto-reaped child (SIGCHLD ignored) adds nothing to anyone.
    """

    def __init__(self) -> None:
        self._procs: Dict[int, _Process] = {}
        self._unread_parent: Dict[int, Set[int]] = {}   # ppid not read yet -> its children

    def own(self, io: ProcessIO, st: Stat, is_gone: Callable[[int], bool]) -> ProcessIO:
        """The counters of ``io`` less what the process absorbed from the children it reaped.
        ``st`` is the process's stat read right after ``io``."""
        raw = _counters(io)
        p = self._procs.get(io.pid)
        if p is None or p.gone:                     # first reading (or a reused pid)
            p = self._procs[io.pid] = _Process(st.ppid, st.children, raw)
            p.children = self._unread_parent.pop(io.pid, set())
            self._adopt(io.pid, st.ppid)
            return io
        if st.ppid != p.ppid:                       # re-parented (its parent died)
            self._disown(io.pid, p.ppid)
            p.ppid = st.ppid
            self._adopt(io.pid, st.ppid)
        if st.children == p.children_mark and p.carry is _ZERO:   # nothing reaped: the rule
            p.raw = raw                                               # costs a compare
            if p.absorbed is _ZERO:
                return io
            return ProcessIO(io.ts, io.pid, *(r - a for r, a in zip(raw, p.absorbed)))
        delta = tuple(max(0, r - q) for r, q in zip(raw, p.raw))
        from_carry = tuple(min(d, c) for d, c in zip(delta, p.carry))
        got = self._reaped_by(io.pid, is_gone) if st.children != p.children_mark else _ZERO
        from_got = tuple(min(d - c, g) for d, c, g in zip(delta, from_carry, got))
        p.absorbed = _add(p.absorbed, _add(from_carry, from_got))
        # What was found reaped but is not in this reading yet (reaped between io and stat)
        # is taken from the next reading only: an orphan that went to init is not ours.
        carry = tuple(g - t for g, t in zip(got, from_got))
        p.carry = _ZERO if carry == _ZERO else carry
        p.raw, p.children_mark = tuple(max(r, q) for r, q in zip(raw, p.raw)), st.children
        if p.absorbed == _ZERO:
            p.absorbed = _ZERO
            return io
        own = [r - a for r, a in zip(p.raw, p.absorbed)]
        return ProcessIO(io.ts, io.pid, *own)

    def ended(self, pid: int, final: Optional[ProcessIO] = None) -> None:
        """``pid`` was found gone (``final`` None: its last reading stands), or a zombie whose
        io was read (``final``: what its reaper will absorb)."""
        p = self._procs.get(pid)
        if p is None:
            return
        if final is not None:
            p.raw = tuple(max(r, q) for r, q in zip(_counters(final), p.raw))
        else:
            p.gone = True

    def _adopt(self, pid: int, ppid: int) -> None:
        parent = self._procs.get(ppid)
        if parent is not None:
            parent.children.add(pid)
        else:
            self._unread_parent.setdefault(ppid, set()).add(pid)

    def _disown(self, pid: int, ppid: int) -> None:
        parent = self._procs.get(ppid)
        if parent is not None:
            parent.children.discard(pid)
        else:
            self._unread_parent.get(ppid, set()).discard(pid)

    def _reaped_by(self, reaper: int, is_gone: Callable[[int], bool]) -> Counters:
        """The last counters of the children of ``reaper`` found gone and not yet counted, and
        of their gone children (reaped by them after their last reading, or orphans that came
        to ``reaper`` and were reaped by it)."""
        total = _ZERO
        stack: List[int] = sorted(self._procs[reaper].children)
        while stack:
            pid = stack.pop()
            c = self._procs.get(pid)
            if c is None or c.counted:
                continue
            if not c.gone:
                if not is_gone(pid):
                    continue
                c.gone = True
            c.counted = True
            total = _add(total, c.raw)
            stack.extend(sorted(c.children))
        return total
