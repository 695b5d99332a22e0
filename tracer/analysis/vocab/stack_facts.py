"""What the stack probes found, as typed facts: kernel stacks, native frames, the GIL.

Contract: ``StackFacts.feed`` takes ``KernelStack``, ``NativeStack``, ``PythonRuntime`` and
``PyStack`` events (events/stacks.py, events/__init__.py); it keeps, per thread, the kernel
and native frames read, and per process where ``_PyRuntime`` lies and which thread py-spy said
holds the GIL. Questions the rules and the wait-for graph ask: ``driver_frames(pid, tid)``
(NVIDIA's driver frames: gpu/frames.py), ``gpu_call(pid, tid)`` (the CUDA/NCCL/cuBLAS call its
native frames are in), ``lock_call(pid, tid)``, ``gil_holder(pid)``, ``is_gil(pid, addr)``,
``notes()`` (one line per source and reason of what could not be read).
Empty facts (older traces) answer None/False/[]: the analysis then goes on without them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ... import events as ev
from ...events.stacks import KernelStack, NativeStack, PythonRuntime
from ...gpu.frames import GpuCall, driver_frames, gpu_call
from .nodes import real_id

Key = Tuple[int, int]

# glibc's lock waits (innermost first in a stack): the low-level lock, then the call the
# program made; a futex wait inside them is a wait for a lock's holder.
_LOW_LOCKS = ("__lll_lock_wait", "__lll_lock_wait_private", "__lll_robust_lock_wait")
LOCK_FUNCTIONS = frozenset(_LOW_LOCKS + (
    "pthread_mutex_lock", "__pthread_mutex_lock", "pthread_mutex_timedlock",
    "__pthread_mutex_lock_full", "pthread_rwlock_rdlock", "pthread_rwlock_wrlock",
    "__pthread_rwlock_rdlock", "__pthread_rwlock_wrlock", "pthread_spin_lock"))


@dataclass
class GilHolder:
    tid: int
    name: str = ""
    frame: str = ""          # its innermost Python frame, "func (file:line)"


@dataclass
class StackFacts:
    kernel: Dict[Key, KernelStack] = field(default_factory=dict)
    native: Dict[Key, NativeStack] = field(default_factory=dict)
    runtime: Dict[int, PythonRuntime] = field(default_factory=dict)
    holders: Dict[int, GilHolder] = field(default_factory=dict)
    failures: List[ev.Event] = field(default_factory=list)

    def feed(self, e: ev.Event) -> None:
        if isinstance(e, ev.PyStack):
            if e.owns_gil and e.tid and not e.error:
                self.holders[e.pid] = GilHolder(e.tid, e.thread_name,
                                                e.frames[0] if e.frames else "")
        elif isinstance(e, PythonRuntime):
            self.runtime[e.pid] = e
        elif isinstance(e, KernelStack):
            if e.tid and e.frames:
                self.kernel[(e.pid, e.tid)] = e
            if e.error:
                self.failures.append(e)
        elif isinstance(e, NativeStack):
            if e.tid and e.frames:
                self.native[(e.pid, e.tid)] = e
            if e.error:
                self.failures.append(e)

    # ------------------------------------------------------------------ questions
    def kernel_frames(self, pid: int, tid: int) -> List[str]:
        k = self.kernel.get((pid, tid))
        return list(k.frames) if k is not None else []

    def driver_frames(self, pid: int, tid: int) -> List[str]:
        """The thread's kernel frames that are NVIDIA's driver (gpu/frames.py): a thread sleeping
        there waits inside the GPU driver, it is not idle."""
        return driver_frames(self.kernel_frames(pid, tid))

    def native_frames(self, pid: int, tid: int) -> Tuple[List[str], str]:
        """(frames, source) of the thread's native stack, its native frames only (py-spy
        interleaves the Python ones, which the Python stack shows); [] when none."""
        n = self.native.get((pid, tid))
        if n is None:
            return [], ""
        libs = list(n.libs) + [""] * (len(n.frames) - len(n.libs))
        return [f for f, lib in zip(n.frames, libs) if lib], n.source

    def gpu_call(self, pid: int, tid: int) -> Optional[GpuCall]:
        n = self.native.get((pid, tid))
        return gpu_call(n.frames, n.libs) if n is not None else None

    def lock_call(self, pid: int, tid: int) -> Optional[str]:
        """The lock the thread's native frames wait in (``LOCK_FUNCTIONS``: glibc's mutex, rwlock
        and low-level lock waits, ``pthread_mutex_lock <- __lll_lock_wait``), or None."""
        n = self.native.get((pid, tid))
        names = [f.split(" (", 1)[0] for f in (n.frames[:8] if n is not None else ())]
        locks = [f for f in names if f in LOCK_FUNCTIONS]
        if not locks:
            return None
        return " <- ".join(dict.fromkeys(reversed(locks)))   # the program's call first

    def gil_holder(self, pid: int) -> Optional[GilHolder]:
        return self.holders.get(pid)

    def is_gil(self, pid: int, addr: Optional[int]) -> bool:
        """Whether a futex address is the GIL's: inside ``_PyRuntime`` (the main interpreter's GIL
        mutex and conditions live there in CPython 3.9 to 3.14). ``gil_holder(pid)`` is the thread
        py-spy said holds it."""
        rt = self.runtime.get(pid)
        return (addr is not None and rt is not None and not rt.error and rt.size > 0
                and rt.addr <= addr < rt.addr + rt.size)

    # ------------------------------------------------------------------ what was not read
    def notes(self) -> List[str]:
        by_reason: Dict[Tuple[str, str], List[str]] = {}
        for f in self.failures:
            what = "kernel stacks" if isinstance(f, KernelStack) else "native frames"
            who = (f"pid {real_id(f.pid)}" if not f.tid   # type: ignore[attr-defined]
                   else f"thread {real_id(f.tid)} of pid {real_id(f.pid)}")  # type: ignore
            if not f.pid:                                   # type: ignore[attr-defined]
                who = ""
            by_reason.setdefault((what, f.error), []).append(who)  # type: ignore[attr-defined]
        out = []
        for (what, why), whos in by_reason.items():
            named = [w for w in dict.fromkeys(whos) if w]
            more = f" (+{len(named) - 4} more)" if len(named) > 4 else ""
            target = f" for {', '.join(named[:4])}{more}" if named else ""
            if what == "native frames":       # the probe's reason begins with its own words
                why = why.removeprefix("native frames not gathered: ")
                out.append(f"native frames not gathered{target}: {why}")
            else:
                out.append(f"{what} not read{target}: {why}")
        for pid, h in sorted(self.holders.items()):
            rt = self.runtime.get(pid)
            if rt is not None and rt.error:
                out.append(f"the GIL's address in pid {real_id(pid)} is not known ({rt.error}): "
                           "waits for the GIL could not be told from other futex waits")
        return out
