"""Ranks grouped by their main thread's Python stack, the way LLNL's STAT groups MPI tasks.

Contract (pure): ``group_ranks(ranks, stacks)`` takes {pid: frames} (py-spy frames
"func (file:line)", innermost first, of each rank's main thread) and returns the groups of ranks
whose stacks are the same function by function (line numbers differ between iterations of the
same loop and do not split a group), largest first. ``suspects(groups)`` names the odd one out:
- a rank whose main thread is not in a collective while every other rank's is (any number of
  ranks: the others wait in the collective for it);
- with three ranks or more, a rank alone in its group while all the others share one stack.
Frames of a collective: torch.distributed's calls (all_reduce, all_gather, broadcast, barrier,
send/recv, ...), vLLM's and SGLang's tensor-parallel all-reduce (``tensor_model_parallel_*``,
custom all-reduce), matched on the function name in a file of a distributed package.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

__all__ = ["StackGroup", "group_ranks", "suspects", "collective_frame", "stack_key",
           "python_sync_frame"]

_FRAME = re.compile(r"^(?P<func>\S+) \((?P<file>.*?)(?::\d+)?\)$")
_COLLECTIVE_FUNCS = re.compile(
    r"^(all_reduce|all_reduce_coalesced|all_gather|all_gather_into_tensor|all_gather_object|"
    r"reduce_scatter|reduce_scatter_tensor|broadcast|broadcast_object_list|barrier|"
    r"monitored_barrier|all_to_all|all_to_all_single|reduce|gather|scatter|send|recv|isend|"
    r"irecv|batch_isend_irecv|tensor_model_parallel_\w+|custom_all_reduce|\w*all_reduce\w*)$")
_DISTRIBUTED_FILES = re.compile(r"(torch/distributed/|/distributed/|parallel_state|"
                                r"device_communicators|custom_all_reduce|pynccl)")
# Python's own waits between threads: a futex under one of these waits for another thread of the
# process (a queue's producer, an event's setter), not for the GPU nor a peer
_SYNC_FILES = re.compile(r"(^|/)(threading|queue|multiprocessing/(synchronize|queues|connection)|"
                         r"concurrent/futures/_base|asyncio/\w+)\.py$")
DEPTH = 24          # frames compared (innermost first); deeper frames are the same startup


def _key(frame: str) -> str:
    m = _FRAME.match(frame)
    if not m:
        return frame
    return f"{m.group('func')} ({m.group('file').rsplit('/', 1)[-1]})"


def stack_key(frames: Sequence[str]) -> Tuple[str, ...]:
    """A stack as the groups compare it: function (file) per frame, innermost first, without
    line numbers, down to DEPTH frames."""
    return tuple(_key(f) for f in frames[:DEPTH])


def collective_frame(frames: Sequence[str]) -> str:
    """The innermost frame of a collective in ``frames``, or ""."""
    for f in frames:
        m = _FRAME.match(f)
        if m and _COLLECTIVE_FUNCS.match(m.group("func")) \
                and _DISTRIBUTED_FILES.search(m.group("file")):
            return f
    return ""


def python_sync_frame(frames: Sequence[str]) -> str:
    """The innermost frame when it is one of Python's waits between threads (``Condition.wait
    (threading.py)``, ``Queue.get (queue.py)``, ...), or ""."""
    for f in frames[:1]:
        m = _FRAME.match(f)
        if m and _SYNC_FILES.search(m.group("file")):
            return f
    return ""


@dataclass
class StackGroup:
    key: Tuple[str, ...]          # function (file) per frame, innermost first
    pids: List[int] = field(default_factory=list)
    frames: List[str] = field(default_factory=list)     # one member's frames, for display
    collective: str = ""          # the collective frame the group sits in, if any

    def to_json(self) -> Dict[str, object]:
        return {"pids": self.pids, "frames": self.frames[:8], "collective": self.collective}


def _display(frame: str) -> str:
    """A frame with its file's base name (stacks may carry full paths: StackTable.located)."""
    m = _FRAME.match(frame)
    if not m or "/" not in m.group("file"):
        return frame
    return frame.replace(m.group("file"), m.group("file").rsplit("/", 1)[-1], 1)


def group_ranks(stacks: Mapping[int, Sequence[str]]) -> List[StackGroup]:
    groups: Dict[Tuple[str, ...], StackGroup] = {}
    for pid in sorted(stacks):
        frames = list(stacks[pid])
        key = stack_key(frames)
        g = groups.get(key)
        if g is None:
            g = groups[key] = StackGroup(key, [], [_display(f) for f in frames],
                                         _display(collective_frame(frames)))
        g.pids.append(pid)
    return sorted(groups.values(), key=lambda g: (-len(g.pids), g.pids[0]))


def _ranks_text(pids: Sequence[int], labels: Mapping[int, str]) -> str:
    """"ranks 0 (pid 11), 1 (pid 12) and 3 (pid 14)" from labels "rank 0 (pid 11)", ..."""
    names = [labels.get(p, f"pid {p}") for p in pids]
    if len(names) > 1 and all(n.startswith("rank ") for n in names):
        names = [names[0]] + [n[len("rank "):] for n in names[1:]]
        names[0] = "ranks " + names[0][len("rank "):]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def suspects(groups: Sequence[StackGroup],
             labels: Optional[Mapping[int, str]] = None) -> Dict[int, str]:
    """{pid: why} for the odd ones out (module doc): "ranks 0, 1 and 3 wait in all_reduce (same
    stack); rank 2 differs: ..." (``labels`` name the ranks)."""
    labels = labels or {}
    if sum(len(g.pids) for g in groups) < 2:
        return {}
    waiting = [g for g in groups if g.collective]
    not_waiting = [g for g in groups if not g.collective]
    out: Dict[int, str] = {}

    def same(gs: Sequence[StackGroup]) -> str:
        pids = sorted(p for g in gs for p in g.pids)
        where = _short(gs[0].collective) if gs[0].collective else (
            gs[0].frames[0] if gs[0].frames else "no Python frame")
        verb = "waits" if len(pids) == 1 else "wait"
        alike = " (same stack)" if len(gs) == 1 and len(pids) > 1 else ""
        return f"{_ranks_text(pids, labels)} {verb} in {where}{alike}"

    if waiting and len(not_waiting) == 1:
        odd = not_waiting[0]
        where = odd.frames[0] if odd.frames else "no Python frame"
        for pid in odd.pids:
            out[pid] = (f"{same(waiting)}; {labels.get(pid, f'pid {pid}')} differs: its main "
                        f"thread is not in a collective (it is in {where})")
        return out
    total = sum(len(g.pids) for g in groups)
    if total >= 3 and len(groups) == 2 and len(groups[1].pids) == 1:
        odd, main = groups[1], groups[0]
        pid = odd.pids[0]
        first = next((i for i, (a, b) in enumerate(zip(odd.key, main.key)) if a != b), None)
        inner = odd.frames[0] if odd.frames else "no Python frame"
        where = _short(odd.collective) if odd.collective else inner
        if first is not None and 0 < first < min(len(odd.frames), len(main.frames)):
            where += (f", and its stack differs at {odd.frames[first]} (theirs: "
                      f"{main.frames[first]})")
        elif first is None:
            where += ", with a stack of another depth"
        out[pid] = f"{same([main])}; {labels.get(pid, f'pid {pid}')} differs: it is in {where}"
    return out


def _short(frame: str) -> str:
    m = _FRAME.match(frame)
    return m.group("func") if m else frame
