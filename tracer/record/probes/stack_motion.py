"""Several Python stacks of the threads that are on a CPU at the end of a recording: whether
their code moves (a capture walking model layers) or stays on one line (a spin).

Contract: ``stack_motion_probe(pids, analyzer)`` is an ``EndProbe``. For each running Python
process among ``pids`` with threads on a CPU (``busy_threads``), at most ``MAX_PROCESSES`` of
them, it takes ``SAMPLES`` ``py-spy dump --nonblocking`` stacks (pystacks.take_stacks: the
target is never paused; how they are spaced, and that none begins after the probe's deadline:
``stack_motion_probe``) and returns one ``StackSamples`` per such thread with its innermost
``TOP`` frames of each sample. Without py-spy, or without a thread on a CPU, it returns
nothing. Cost: ``SAMPLES`` dumps of each busy Python process (about 60-80 ms of py-spy each
for a small interpreter here), about a second in all, and only where a thread is on a CPU.
"""
from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Set, Tuple

from ... import events as ev
from ...events.stacks import StackSamples
from ...linux import procfs
from ..probe_run import probe_deadline
from ..pystacks import _TIMEOUT_S, find_py_spy, is_python_process, take_stacks

__all__ = ["stack_motion_probe", "busy_threads", "SAMPLES", "GAP_S", "TOP"]

SAMPLES = 8
GAP_S = 0.12
TOP = 8
PAUSE_S = 0.05
MAX_PROCESSES = 16


def _running(pid: int, root: str) -> Set[int]:
    out = set()
    for tid in procfs.list_tids(pid, root):
        st = procfs.read_stat(pid, tid, root)
        if st is not None and st.state == "R":
            out.add(tid)
    return out


def busy_threads(pids: List[int], root: str = "/proc") -> Dict[int, Set[int]]:
    """{pid: threads in state R in one of two reads of all of ``pids``, ``PAUSE_S`` apart}
    (one pause for every process, however many).
    State R is read from /proc/PID/task/TID/stat."""
    first = {pid: _running(pid, root) for pid in pids}
    time.sleep(PAUSE_S)
    out = {}
    for pid in pids:
        tids = first[pid] | _running(pid, root)
        if tids:
            out[pid] = tids
    return out


def stack_motion_probe(pids: List[int], analyzer: object = None) -> List[StackSamples]:
    """EndProbe (session.py): StackSamples of the busy threads of ``pids`` (module doc).
    The samples are ``GAP_S`` apart on average with a random jitter (so that a loop whose period is
    a multiple of the gap is not seen in one place every time), all processes at once."""
    exe = find_py_spy()
    if exe is None:
        return []
    busy: Dict[int, Set[int]] = {}
    for pid, tids in busy_threads(pids).items():
        if len(busy) < MAX_PROCESSES and is_python_process(pid):
            busy[pid] = tids
    if not busy:
        return []
    samples: Dict[Tuple[int, int], List[List[str]]] = {}
    t0 = time.monotonic()
    due = t0
    deadline = probe_deadline()
    with ThreadPoolExecutor(max_workers=min(8, len(busy))) as pool:
        for k in range(SAMPLES):
            if k:
                due += GAP_S * random.uniform(0.4, 1.6)
            if k and deadline is not None and due >= deadline:
                break                   # the samples taken stand; the budget is the stacks'
            time.sleep(max(0.0, due - time.monotonic()))
            left = _TIMEOUT_S if deadline is None else deadline - time.monotonic()
            if k and left <= 0:
                break
            for stacks in pool.map(lambda p: take_stacks(p, exe, max(0.1, min(_TIMEOUT_S, left))),
                                   list(busy)):
                for s in stacks:
                    if isinstance(s, ev.PyStack) and not s.error and s.tid in busy.get(s.pid, ()):
                        samples.setdefault((s.pid, s.tid), []).append(list(s.frames[:TOP]))
    span = time.monotonic() - t0
    now = time.time()
    return [StackSamples(ts=now, pid=pid, tid=tid, samples=got, span=round(span, 3))
            for (pid, tid), got in sorted(samples.items())]


stack_motion_probe.__name__ = "stack motion"
