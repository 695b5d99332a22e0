"""Pools: threads of one process that sit in the same wait, collapsed into one group.

Contract: ``find_pools(pid, verdicts, stacks)`` is pure and returns the ``Pool`` groups of a
process, and marks their members ``parked`` (they then do not decide the process's verdict). A
thread blocked in one call for the whole window is the first suspect, not background: only
groups of identical waits are collapsed (the same call on the same futex or fd target, futex
waits of one pool's neighbouring slots, the same Python stack: ``find_pools``), and a wait that
is the thread's own (``_own``) never is.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..job.stack_groups import collective_frame, stack_key
from ..vocab.verdict import BLOCKED, ThreadVerdict

__all__ = ["Pool", "find_pools", "NEIGHBOURS_MIN", "NEIGHBOURHOOD"]

NEIGHBOURS_MIN = 3          # threads on neighbouring futexes that make a pool
NEIGHBOURHOOD = 64 << 10    # bytes: the span of one pool's futex words
_OWN_FD_KINDS = frozenset({"pipe", "fifo", "tcp", "udp", "unix", "socket"})
OWN_WAITS = frozenset({"wait4", "waitid", "flock", "fcntl", "fcntl64"})


@dataclass
class Pool:
    """Threads collapsed into one line: ``what`` they wait in, ``why`` they are one group."""
    pid: int
    tids: List[int]
    what: str
    why: str
    frames: List[str] = field(default_factory=list)

    def to_json(self) -> Dict[str, object]:
        return {"pid": self.pid, "tids": self.tids, "what": self.what, "why": self.why}


def _own(v: ThreadVerdict, frames: Sequence[str]) -> bool:
    """The wait is the thread's own: never collapsed, whatever the group: a thread whose wait is
    its own (``OWN_WAITS``: wait4 on a child, a pipe or FIFO read or write, a socket to a peer,
    flock/fcntl locks) or whose Python stack is in a collective (stack_groups.collective_frame)."""
    w = v.wait
    if w is None:
        return True
    if w.call in OWN_WAITS or w.fd_kind in _OWN_FD_KINDS:
        return True
    return bool(frames) and bool(collective_frame(frames))


def _candidates(pid: int, verdicts: Mapping[int, ThreadVerdict],
                stacks: Mapping[int, Sequence[str]]) -> Dict[int, ThreadVerdict]:
    return {tid: v for tid, v in sorted(verdicts.items())
            if tid != pid and v.helper is None and v.verdict == BLOCKED and v.wait is not None
            and v.wait.whole_window and v.wait.timeout is None
            and not _own(v, stacks.get(tid, ()))}


def _same_object(c: Mapping[int, ThreadVerdict]) -> Dict[Tuple, List[int]]:
    groups: Dict[Tuple, List[int]] = {}
    for tid, v in c.items():
        w = v.wait
        assert w is not None
        if w.call == "futex":
            key: Tuple = ("futex", w.futex_op, w.futex_addr)
        elif w.fd_target:
            key = (w.call, w.fd_target)
        else:
            continue
        groups.setdefault(key, []).append(tid)
    return {k: tids for k, tids in groups.items() if len(tids) >= 2}


def _neighbours(c: Mapping[int, ThreadVerdict]) -> List[List[int]]:
    """Runs of futex waits (same op) whose addresses lie within NEIGHBOURHOOD of each other."""
    by_op: Dict[str, List[Tuple[int, int]]] = {}
    for tid, v in c.items():
        w = v.wait
        if w is not None and w.call == "futex" and w.futex_addr:
            by_op.setdefault(w.futex_op, []).append((w.futex_addr, tid))
    runs: List[List[int]] = []
    for pairs in by_op.values():
        pairs.sort()
        run = [pairs[0]] if pairs else []
        for p in pairs[1:]:
            if p[0] - run[0][0] <= NEIGHBOURHOOD:
                run.append(p)
                continue
            runs.append([t for _, t in run])
            run = [p]
        if run:
            runs.append([t for _, t in run])
    return [sorted(r) for r in runs if len(r) >= NEIGHBOURS_MIN]


def find_pools(pid: int, verdicts: Mapping[int, ThreadVerdict],
               stacks: Optional[Mapping[int, Sequence[str]]] = None) -> List[Pool]:
    """The pools of process ``pid`` (module doc); their members are marked ``parked``. The groups:
    identical waits: two threads or more, not the main thread, not library helpers, blocked for the
    whole window without a time limit in the same call with the same futex op on the same futex
    address, or on the same fd target (several threads in epoll_wait on one epoll fd); a thread
    pool whose workers each wait on their own futex (an OpenMP team, C++ pools: one slot each in
    one array): ``NEIGHBOURS_MIN`` threads or more in the same call and op on futex addresses that
    all lie within ``NEIGHBOURHOOD`` bytes; the same Python stack (py-spy), function by function,
    for two threads or more (a ThreadPoolExecutor's idle workers each wait on a lock of their
    own)."""
    stacks = stacks or {}
    c = _candidates(pid, verdicts, stacks)
    pools: List[Pool] = []
    taken: set = set()

    def add(tids: List[int], what: str, why: str, frames: Sequence[str] = ()) -> None:
        tids = [t for t in tids if t not in taken]
        if len(tids) < 2:
            return
        taken.update(tids)
        pools.append(Pool(pid, tids, what, why, list(frames)))

    by_stack: Dict[Tuple[str, ...], List[int]] = {}
    for tid in c:
        if stacks.get(tid):
            by_stack.setdefault(stack_key(stacks[tid]), []).append(tid)
    for key, tids in by_stack.items():
        if len(tids) >= 2:
            add(tids, f"the same Python stack ({stacks[tids[0]][0]})", "same Python stack",
                stacks[tids[0]])
    for key, tids in _same_object(c).items():
        w = c[tids[0]].wait
        assert w is not None
        add(tids, w.describe(), "the same wait on one object")
    for tids in _neighbours({t: v for t, v in c.items() if t not in taken}):
        lo = min(c[t].wait.futex_addr or 0 for t in tids)      # type: ignore[union-attr]
        hi = max(c[t].wait.futex_addr or 0 for t in tids)      # type: ignore[union-attr]
        add(tids, f"futex {c[tids[0]].wait.futex_op or 'WAIT'} on neighbouring words "  # type: ignore[union-attr]
            f"0x{lo:x}..0x{hi:x}", "a thread pool: one futex each, side by side")
    for p in pools:
        for tid in p.tids:
            verdicts[tid].parked = True
    return pools
