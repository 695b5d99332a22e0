"""Waits the stacks resolve (issue 24), for build.py's resolution: called first for every
blocked thread, it answers the waits that the stack facts (vocab/stack_facts.py) explain, and
None for the rest (build.py then resolves them as before).

Contract: ``stack_wait(builder, pid, tid, src, who, wait)`` adds the edges of one wait to the
builder's graph and returns a ``Resolution``, what build.py's ``ResolvedWait`` takes after the
tid (kind, text, other pids, whether it stays inside the process), or None. The waits it
answers (the GIL's holder, the GPU driver, a vfork child): its docstring. The builder is
anything shaped as ``GraphBuilder`` (build.py's ``_Builder``: its ``edge``, ``thread``,
``process``, ``special``), so that this module does not import build.py back.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple

from ...linux.kstack import frame_function
from ..vocab.nodes import real_id
from ..vocab.waits import Wait
from .graph import GPU, EdgeKind, NodeKind

__all__ = ["stack_wait", "Resolution", "GraphBuilder"]


class GraphBuilder(Protocol):
    """What stack_wait uses of the graph builder (build.py's _Builder)."""
    inp: Any                   # build.GraphInput: the recording, the facts, the threads
    g: Any                     # graph.WaitGraph being built
    procs: Dict[int, Any]

    def thread(self, pid: int, tid: int) -> str: ...

    def process(self, pid: int, any_thread: bool = False) -> str: ...

    def special(self, nid: str, kind: NodeKind, label: str, dead: bool = False,
                dead_text: str = "") -> str: ...

    def edge(self, src: str, dst: str, kind: EdgeKind, obj: str, text: str) -> None: ...

    def plabel(self, pid: int) -> str: ...

    def refs(self, pids: Sequence[int]) -> str: ...

Resolution = Tuple[EdgeKind, str, List[int], bool]     # kind, what, other pids, inside


def stack_wait(b: GraphBuilder, pid: int, tid: int, src: str, who: str,
               w: Wait) -> Optional[Resolution]:
    """The edges of one wait the stacks explain, and its ``Resolution`` (module doc), or None:

    - a futex wait on the GIL (an address inside ``_PyRuntime``) while py-spy saw another thread
      hold it: an edge to the holder thread (kind mutex, object "GIL"): only it can release it;
    - a thread whose kernel stack is in NVIDIA's driver, or blocked in an ioctl of NVIDIA's
      driver (on an fd of /dev/nvidia*, or known by its request number on an fd never seen
      opened: gpu/nvidia.describe_ioctl): an edge to the GPU (it waits inside the driver, for the
      GPU or the driver itself);
    - a vfork parent (in D state until its child execs or exits): edges to its children."""
    facts = b.inp.facts.stacks
    holder = facts.gil_holder(pid)
    if (w.call == "futex" and holder is not None and holder.tid != tid
            and facts.is_gil(pid, w.futex_addr)):
        dst = b.thread(pid, holder.tid)
        b.edge(src, dst, EdgeKind.MUTEX, "GIL",
               f"{who} waits for the GIL (futex 0x{w.futex_addr or 0:x}) held by "
               f"{b.g.nodes[dst].label}")
        return (EdgeKind.MUTEX, f"waits for the GIL held by thread {real_id(holder.tid)}",
                [], True)
    driver = facts.driver_frames(pid, tid)
    if driver or w.gpu_ioctl:
        how = " <- ".join(frame_function(f) for f in driver[:3]) if driver else \
            f"ioctl {w.gpu_ioctl}"
        what = f"waits inside the NVIDIA GPU driver ({how})"
        b.edge(src, b.special(GPU, NodeKind.GPU, "the GPU"), EdgeKind.GPU, "GPU driver",
               f"{who} {what}")
        return (EdgeKind.GPU, what, [], False)
    if w.call == "vfork":
        pf = b.procs.get(pid)
        kids = list(pf.children) if pf is not None else []
        for c in kids:
            b.edge(src, b.process(c), EdgeKind.CHILD, "vfork",
                   f"{who} waits in vfork until {b.plabel(c)} execs or exits")
        if kids:
            return (EdgeKind.CHILD, f"waits in vfork until {b.refs(kids)} execs or exits",
                    kids, False)
    return None
