"""Thread verdicts with what the stacks show (issue 24): pure functions over the thread verdicts
of one recording and the stack facts (vocab/stack_facts.py), run once after the thread rules.

Contract: ``apply_stack_facts(tvs, rec, facts)`` changes ``tvs`` (pid -> tid -> verdict) in
place, and only there:
- **GIL waiters** (rule ``waits-for-gil``): blocked on the GIL's holder (``_gil_waiters``).
- **the GPU driver** (rule ``in-gpu-driver``): a thread whose kernel stack is in NVIDIA's driver
  and that is not running (idle, quiet or blocked) waits inside the GPU driver.
- **uninterruptible sleep** (rule ``uninterruptible-sleep``): a thread in D state in every
  look (and when its stack was read) that no other rule called blocked is blocked in the kernel.
- every thread with a kernel stack or native frames gets one evidence line each (the kernel;
  the native call, CUDA, NCCL, cuBLAS named). Verdicts depend only on the facts, never on names.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional

from ...linux.kstack import frame_function
from ...linux.syscall_table import parse_proc_syscall
from ..accumulate.accumulator import Recording, ThreadStats
from ..vocab.nodes import real_id
from ..vocab.stack_facts import GilHolder, StackFacts
from ..vocab.verdict import (BLOCKED, BUSY, D_RULE, EXITED, IDLE, PROGRESSING, UNKNOWN,
                             ThreadVerdict)
from ..vocab.waits import Wait, wait_from_proc

__all__ = ["apply_stack_facts", "kernel_line", "GIL_RULE", "DRIVER_RULE", "D_RULE"]

GIL_RULE, DRIVER_RULE = "waits-for-gil", "in-gpu-driver"
KERNEL_FRAMES_SHOWN = 4
_ENTRY = ("entry_SYSCALL", "do_syscall_64", "__x64_sys_", "__arm64_sys_", "el0_svc",
          "invoke_syscall", "x64_sys_call")


def kernel_line(frames: List[str], state: str = "") -> str:
    """"in the kernel (D state): kernel_clone <- __do_sys_vfork" (syscall entry frames left
    out; innermost first)."""
    funcs = [frame_function(f) for f in frames if not frame_function(f).startswith(_ENTRY)]
    shown = " <- ".join(funcs[:KERNEL_FRAMES_SHOWN]) or " <- ".join(
        frame_function(f) for f in frames[:KERNEL_FRAMES_SHOWN])
    more = " <- ..." if len(funcs) > KERNEL_FRAMES_SHOWN else ""
    st = f" ({state} state)" if state else ""
    return f"in the kernel{st}: {shown}{more} (/proc/PID/task/TID/stack)"


def _futex_addr(v: ThreadVerdict, t: Optional[ThreadStats]) -> Optional[int]:
    if v.wait is not None and v.wait.call == "futex":
        return v.wait.futex_addr
    if t is not None and t.last_sample is not None:
        w = wait_from_proc(t.last_sample.syscall, [], t.last_sample.wchan)
        if w is not None and w.call == "futex":
            return w.futex_addr
    # a GIL waiter wakes every 5 ms: the last /proc sample may catch it between two waits,
    # so the futex it was seen in most often counts too
    for call, _ in (t.sample_calls.most_common() if t is not None else ()):
        w = wait_from_proc(call, [], "")
        if w is not None and w.call == "futex":
            return w.futex_addr
    return None


def _doing(v: ThreadVerdict, facts: StackFacts, pid: int, tid: int) -> str:
    """What a GIL holder does, for its waiters' evidence."""
    if v.wait is not None:
        what = f"blocks in {v.wait.describe()}"
    elif v.verdict == BUSY:
        what = f"runs without releasing it ({v.rule})"
    else:
        what = f"is {v.verdict} ({v.rule})"
    call = facts.gpu_call(pid, tid)
    named = _first_named(facts.native_frames(pid, tid)[0])
    if call is not None:
        what += f", in {call.describe()}"
    elif named:
        what += f", in {named}"
    return what


def _first_named(frames: List[str]) -> str:
    """The innermost native frame a symbol names ("" when none: "0x7f.. (libc.so.6)")."""
    return next((f for f in frames if not f.startswith("0x")), "")


def _gil_waiters(pid: int, tvs: Dict[int, ThreadVerdict], rec: Recording,
                 facts: StackFacts) -> None:
    """A thread of a process whose GIL py-spy saw held by another thread that is not progressing,
    waiting (timed or not) on a futex inside ``_PyRuntime``, is blocked on the holder: CPython's
    waiters wake every 5 ms to ask for the GIL (the timeouts are not work), and only the holder can
    end the wait. Its wait becomes that futex without time limit, which waitgraph/stack_waits.py
    turns into an edge to the holder; the holder's evidence says who waits for it and names what it
    is blocked in."""
    holder = facts.gil_holder(pid)
    if holder is None or holder.tid not in tvs:
        return
    hv = tvs[holder.tid]
    if hv.verdict in (PROGRESSING, EXITED):
        return          # a holder that works hands the GIL on every 5 ms: waiting is normal
    waiters: List[int] = []
    doing = _doing(hv, facts, pid, holder.tid)
    for tid, v in sorted(tvs.items()):
        if tid == holder.tid or v.verdict not in (BUSY, BLOCKED, IDLE):
            continue
        t = rec.threads.get((pid, tid))
        addr = _futex_addr(v, t)
        if not facts.is_gil(pid, addr):
            continue
        waiters.append(tid)
        tvs[tid] = _gil_verdict(v, addr or 0, holder, doing)
    if waiters:
        hv.parked = False         # not a pool thread parked in a wait: the others wait for it
        who = ", ".join(str(real_id(w)) for w in waiters[:6]) + (" ..." if len(waiters) > 6
                                                                 else "")
        hv.evidence.append(f"holds the GIL (py-spy: owns_gil) while it {doing}; "
                           f"{len(waiters)} Python thread{'s' if len(waiters) > 1 else ''} "
                           f"({who}) wait for it")


def _gil_verdict(v: ThreadVerdict, addr: int, holder: GilHolder, doing: str) -> ThreadVerdict:
    name = f" ({holder.name})" if holder.name else ""
    at = f" at {holder.frame}" if holder.frame else ""
    ev_ = [f"waits for the GIL (futex 0x{addr:x} inside the interpreter's _PyRuntime), held "
           f"by thread {real_id(holder.tid)}{name}{at}, which {doing}"]
    if v.verdict == BUSY:
        ev_.append("its timed futex waits are CPython's 5 ms GIL drop requests, not work: "
                   + "; ".join(v.evidence[:1]))
    w = Wait(call="futex", futex_addr=addr, futex_op=(v.wait.futex_op if v.wait else "")
             or "WAIT_BITSET", timeout=None,
             since=v.wait.since if v.wait else None, source="GIL (py-spy owns_gil)")
    return ThreadVerdict(BLOCKED, GIL_RULE, ev_, wait=w, cpu=v.cpu, helper=v.helper)


def _driver(pid: int, tid: int, v: ThreadVerdict, facts: StackFacts) -> ThreadVerdict:
    frames = facts.driver_frames(pid, tid)
    if not frames or v.verdict not in (IDLE, BLOCKED, UNKNOWN):
        return v
    k = facts.kernel[(pid, tid)]
    funcs = " <- ".join(frame_function(f) for f in frames[:3])
    ev_ = [f"waits inside the NVIDIA GPU driver ({funcs}; kernel stack, "
           f"{k.state or '?'} state, read because: {k.reason})"] + v.evidence
    return ThreadVerdict(BLOCKED, DRIVER_RULE, ev_, wait=v.wait or Wait(
        call="ioctl", source="kernel stack"), cpu=v.cpu, helper=v.helper, parked=False)


def _uninterruptible(pid: int, tid: int, v: ThreadVerdict, t: Optional[ThreadStats],
                     facts: StackFacts) -> ThreadVerdict:
    k = facts.kernel.get((pid, tid))
    if k is None or k.state != "D" or v.verdict not in (IDLE, UNKNOWN):
        return v
    if t is not None and t.samples and t.states.get("D", 0) < t.samples:
        return v                                  # it was seen awake in the window
    cs = parse_proc_syscall(t.last_sample.syscall) if t is not None and t.last_sample else None
    call = cs.name if cs is not None and cs.name else "the kernel"
    ev_ = [f"in uninterruptible sleep (D) all window in {call}: it cannot run or be "
           "interrupted until the kernel completes what it waits for"] + v.evidence
    return ThreadVerdict(BLOCKED, D_RULE, ev_, wait=Wait(call=call, source="kernel stack"),
                         cpu=v.cpu, helper=v.helper)


def _annotate(pid: int, tid: int, v: ThreadVerdict, facts: StackFacts) -> None:
    k = facts.kernel.get((pid, tid))
    if k is not None and not any(e.startswith("in the kernel") for e in v.evidence):
        v.evidence.append(kernel_line(k.frames, k.state))
    call = facts.gpu_call(pid, tid)
    frames, source = facts.native_frames(pid, tid)
    named = _first_named(frames)
    if call is not None:
        v.evidence.append(f"native: in {call.describe()} ({source})")
    elif named:
        v.evidence.append(f"native: in {named} ({source})")


def apply_stack_facts(tvs: Mapping[int, Dict[int, ThreadVerdict]], rec: Recording,
                      facts: StackFacts) -> None:
    """The stack facts' changes to the thread verdicts (module doc), in place."""
    for pid, threads in tvs.items():
        for tid in list(threads):
            t = rec.threads.get((pid, tid))
            threads[tid] = _uninterruptible(pid, tid, _driver(pid, tid, threads[tid], facts), t,
                                            facts)
        _gil_waiters(pid, threads, rec, facts)
        for tid, v in threads.items():
            _annotate(pid, tid, v, facts)
