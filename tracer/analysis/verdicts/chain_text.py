"""The chain of waits in words, for the root cause.

Contract: pure functions over a ``Chain`` (waitgraph/chain.py), the settled graph and the process
verdicts. ``chain_line(chain, graph)`` is the one line a person reads first: each step's edge
sentence ("launcher (pid 1) reads pipe:[9] whose writers include scheduler TP0 (pid 2)"), the
hops into a thread of a process said only when they change the subject ("thread 7 of scheduler
TP0 (pid 2)"), joined by "; ". ``end_line(end, graph, pvs)`` says what the chain ends in, with
the evidence of the thread there, as the process verdicts word it ("scheduler TP0 (pid 2) thread
7 busy-waits: on CPU 100% of 5.0 s ...; no output"; "everything waits for compiler (pid 9), which
makes progress: wrote 20 KiB in 110 writes (21.0/s) to fd 3 (/tmp/build-0.o)"; "... is blocked:
...; it waits for another thread of its process, and none of them is at work (1 thread ticks in
a periodic loop): which one would end the wait cannot be told from here").
"""
from __future__ import annotations

from typing import Mapping, Optional

from ..vocab.nodes import real_id
from ..waitgraph.chain import WAITER_ENDS, Chain, End, EndKind
from ..waitgraph.graph import EdgeKind, NodeKind, WaitGraph
from .process import ProcessVerdict

__all__ = ["chain_line", "end_line", "thread_label"]


def thread_label(graph: WaitGraph, nid: str) -> str:
    node = graph.nodes.get(nid)
    return node.label if node is not None else nid


def chain_line(chain: Chain, graph: WaitGraph, at: Optional[str] = None) -> str:
    """The steps' sentences; the wait of ``at`` (the thread the root cause names, whose own
    line says what it waits in) is left out."""
    return "; ".join(step.edge.text for step in chain.steps
                     if step.edge is not None and step.src != at)


def _evidence(pvs: Mapping[int, ProcessVerdict], pid: Optional[int], tid: Optional[int],
              n: int = 2) -> str:
    pv = pvs.get(pid or -1)
    if pv is None or tid not in pv.threads:
        return ""
    lines = pv.threads[tid].evidence[:n]
    return "; ".join(lines)


def _others(graph: WaitGraph, pid: int, waiter: Optional[str]) -> str:
    """What the rest of process ``pid`` does, in a few words (an unknown waker's neighbours)."""
    kinds = [n.activity for n in graph.threads_of(pid) if n.id != waiter and not n.dead]
    tick = sum(1 for k in kinds if k == "tick")
    idle = sum(1 for k in kinds if k == "idle")
    wait = sum(1 for k in kinds if k == "wait")
    bits = []
    for n, one, many in ((tick, "thread ticks in a periodic loop", "threads tick in periodic loops"),
                         (idle, "thread waits for input", "threads wait for input"),
                         (wait, "other thread waits too", "other threads wait too")):
        if n:
            bits.append(f"{n} {one if n == 1 else many}")
    return ", ".join(bits)


_WORDS = {"busy-waiting": "busy-waits", "blocked": "is blocked", "progressing": "makes progress",
          "idle": "is idle", "unknown": "could not be judged", "deadlocked": "is deadlocked"}


def _head(pv: ProcessVerdict, tid: Optional[int]) -> str:
    """"rank 1 (pid 42) thread 7 busy-waits: <its first evidence lines>; no output"."""
    v = pv.threads.get(tid) if tid is not None else None
    lines = pv.key_lines() if tid == pv.key_tid or v is None else list(v.evidence)
    lines = lines[:2] + [e for e in lines[2:] if e == "no output"]
    thread = f" thread {real_id(tid)}" if tid not in (None, pv.pid) else ""
    words = _WORDS.get(str(pv.verdict), str(pv.verdict))
    return f"{pv.label}{thread} {words}: " + ("; ".join(lines) or pv.rule)


def end_line(end: End, graph: WaitGraph, pvs: Mapping[int, ProcessVerdict],
             waited: bool) -> str:
    """What the chain ends in (module doc); ``waited``: some other process waits on it."""
    node = graph.nodes[end.node]
    at = graph.nodes[end.before] if end.before and end.kind in WAITER_ENDS else node
    pv = pvs.get(at.pid or -1)
    head = _head(pv, at.tid) if pv is not None else node.label
    if end.kind == EndKind.PROGRESS and waited:
        return "everything waits for " + head.replace(" makes progress: ", ", which makes "
                                                      "progress: ", 1)
    if end.kind == EndKind.UNKNOWN_WAKER:
        rest = _others(graph, node.pid or 0, end.before)
        if end.likely:
            doing = ("it only looks again and again for something that does not come" if at.polls
                     else "it waits on another thread of its process itself")
            return (head + f"; {doing}; the other waits in its process most likely end with it, "
                    "its only other worker thread, and none of them is at work"
                    + (f" ({rest})" if rest else ""))
        return (head + "; it waits for another thread of its process, and none of them is at "
                "work" + (f" ({rest})" if rest else "")
                + ": which one would end the wait cannot be told from here")
    if end.kind == EndKind.OUTSIDE_STUCK:
        if any(e.kind == EdgeKind.STORAGE for e in graph.out(at.id)):
            return head      # its own line says what owes it (fd_waits.storage)
        return head + ("; what it waits for is owed from outside the recording (a lock's holder, "
                       "a peer that does not answer, a device, a child not traced) and does "
                       "not come")
    if end.kind == EndKind.WRITE_STUCK:
        return head + ("; its write cannot go out: whoever reads the other end is not in the "
                       "recording, or stopped reading")
    if end.kind == EndKind.GPU:
        return head.replace(" is blocked: ", " waits for the GPU: ", 1)
    if end.kind == EndKind.CYCLE and node.kind in (NodeKind.ANY_THREAD, NodeKind.PROCESS):
        return f"no thread of {node.label.removeprefix('another thread of ')} can act"
    if end.kind == EndKind.DEAD and pv is None:
        return f"{node.label} {node.dead_text or 'is gone'}"
    return head
