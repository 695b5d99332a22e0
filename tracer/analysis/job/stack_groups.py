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
from typing import Dict, List, Mapping, Sequence, Tuple

__all__ = ["StackGroup", "group_ranks", "suspects", "collective_frame", "stack_key"]

_FRAME = re.compile(r"^(?P<func>\S+) \((?P<file>.*?)(?::\d+)?\)$")
_COLLECTIVE_FUNCS = re.compile(
    r"^(all_reduce|all_reduce_coalesced|all_gather|all_gather_into_tensor|all_gather_object|"
    r"reduce_scatter|reduce_scatter_tensor|broadcast|broadcast_object_list|barrier|"
    r"monitored_barrier|all_to_all|all_to_all_single|reduce|gather|scatter|send|recv|isend|"
    r"irecv|batch_isend_irecv|tensor_model_parallel_\w+|custom_all_reduce|\w*all_reduce\w*)$")
_DISTRIBUTED_FILES = re.compile(r"(torch/distributed/|/distributed/|parallel_state|"
                                r"device_communicators|custom_all_reduce|pynccl)")
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


@dataclass
class StackGroup:
    key: Tuple[str, ...]          # function (file) per frame, innermost first
    pids: List[int] = field(default_factory=list)
    frames: List[str] = field(default_factory=list)     # one member's frames, for display
    collective: str = ""          # the collective frame the group sits in, if any

    def to_json(self) -> Dict[str, object]:
        return {"pids": self.pids, "frames": self.frames[:8], "collective": self.collective}


def group_ranks(stacks: Mapping[int, Sequence[str]]) -> List[StackGroup]:
    groups: Dict[Tuple[str, ...], StackGroup] = {}
    for pid in sorted(stacks):
        frames = list(stacks[pid])
        key = stack_key(frames)
        g = groups.get(key)
        if g is None:
            g = groups[key] = StackGroup(key, [], frames, collective_frame(frames))
        g.pids.append(pid)
    return sorted(groups.values(), key=lambda g: (-len(g.pids), g.pids[0]))


def suspects(groups: Sequence[StackGroup]) -> Dict[int, str]:
    """{pid: why} for the odd ones out (module doc)."""
    if sum(len(g.pids) for g in groups) < 2:
        return {}
    waiting = [g for g in groups if g.collective]
    not_waiting = [g for g in groups if not g.collective]
    out: Dict[int, str] = {}
    if waiting and len(not_waiting) == 1:
        odd = not_waiting[0]
        where = odd.frames[0] if odd.frames else "no Python frame"
        peers = sum(len(g.pids) for g in waiting)
        for pid in odd.pids:
            out[pid] = (f"its main thread is not in a collective (in {where}) while "
                        f"{peers} other rank{'s' if peers > 1 else ''} wait in "
                        f"{_short(waiting[0].collective)}")
        return out
    total = sum(len(g.pids) for g in groups)
    if total >= 3 and len(groups) == 2 and len(groups[1].pids) == 1:
        odd, main = groups[1], groups[0]
        where = odd.frames[0] if odd.frames else "no Python frame"
        out[odd.pids[0]] = (f"its main thread's stack differs from the {len(main.pids)} other "
                            f"ranks' (it is in {where}, they are in "
                            f"{main.frames[0] if main.frames else 'no Python frame'})")
    return out


def _short(frame: str) -> str:
    m = _FRAME.match(frame)
    return m.group("func") if m else frame
