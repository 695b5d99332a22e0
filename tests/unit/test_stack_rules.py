"""What the stacks change in thread verdicts (analysis/threads/stacks.py), as pure functions:
GIL waiters, a thread in the GPU driver, uninterruptible sleep, evidence lines."""
from __future__ import annotations

from types import SimpleNamespace

from tracer import events as ev
from tracer.analysis.threads.stacks import apply_stack_facts, kernel_line
from tracer.analysis.vocab.stack_facts import StackFacts
from tracer.analysis.vocab.verdict import BLOCKED, BUSY, IDLE, PROGRESSING, ThreadVerdict
from tracer.analysis.vocab.waits import Wait
from tracer.events.stacks import KernelStack, NativeStack, PythonRuntime
from tracer.linux.fdtarget import FdTarget

GIL = 0xA5B8F0
REC = SimpleNamespace(threads={})


def _facts(holder_tid: int = 3, driver: bool = False) -> StackFacts:
    f = StackFacts()
    f.feed(ev.PyStack(ts=0, pid=1, tid=holder_tid, thread_name="holder", frames=["h (x.py:7)"],
                      owns_gil=True))
    f.feed(ev.PyStack(ts=0, pid=1, tid=2, thread_name="w", frames=["w (x.py:9)"],
                      owns_gil=False))
    f.feed(PythonRuntime(ts=0, pid=1, addr=0xA5B740, size=166688, binary="/usr/bin/python3"))
    f.feed(NativeStack(ts=0, pid=1, tid=holder_tid, frames=["read (libc.so.6)", "h (x.py:7)"],
                       libs=["/usr/lib/x86_64-linux-gnu/libc.so.6", ""], source="py-spy"))
    if driver:
        f.feed(KernelStack(ts=0, pid=1, tid=4, state="D", reason="D state", frames=[
            "uvm_spin_loop+0x5e/0x90 [nvidia_uvm]", "uvm_ioctl+0x1f0/0x1cb0 [nvidia_uvm]",
            "__x64_sys_ioctl+0x95/0xd0"]))
    return f


def _waiter(addr: int = GIL) -> ThreadVerdict:
    return ThreadVerdict(BUSY, "periodic-wakeups", ["558 futex wait timeouts in 3.0 s"],
                         wait=Wait(call="futex", futex_addr=addr, futex_op="WAIT_BITSET",
                                   timeout=-1.0))


def _holder(verdict=BLOCKED) -> ThreadVerdict:
    return ThreadVerdict(verdict, "blocked-without-timeout", ["blocked in read"], parked=True,
                         wait=Wait(call="read", fd=3, target=FdTarget.parse("pipe:[9]")))


def test_gil_waiters_are_blocked_on_a_stuck_holder():
    tvs = {1: {2: _waiter(), 3: _holder(), 5: _waiter(0x7F0000)}}
    apply_stack_facts(tvs, REC, _facts())
    w, h, other = tvs[1][2], tvs[1][3], tvs[1][5]
    assert (w.verdict, w.rule) == (BLOCKED, "waits-for-gil")
    assert w.wait.futex_addr == GIL and w.wait.timeout is None
    assert "held by thread 3 (holder) at h (x.py:7), which blocks in read(3<pipe:[9]>)" \
        in w.evidence[0] and "in read (libc.so.6)" in w.evidence[0]
    assert other.rule == "periodic-wakeups"             # a futex outside _PyRuntime
    assert not h.parked and any("holds the GIL" in e and "(2)" in e for e in h.evidence)
    assert "native: in read (libc.so.6) (py-spy)" in h.evidence


def test_a_working_holder_leaves_the_waiters_alone():
    tvs = {1: {2: _waiter(), 3: _holder(PROGRESSING)}}
    apply_stack_facts(tvs, REC, _facts())
    assert tvs[1][2].rule == "periodic-wakeups"


def test_without_the_runtime_address_nothing_changes_and_a_note_says_why():
    f = StackFacts()
    f.feed(ev.PyStack(ts=0, pid=1, tid=3, owns_gil=True))
    f.feed(PythonRuntime(ts=0, pid=1, error="no _PyRuntime symbol in python3 (stripped)"))
    tvs = {1: {2: _waiter(), 3: _holder()}}
    apply_stack_facts(tvs, REC, f)
    assert tvs[1][2].rule == "periodic-wakeups"
    assert any("GIL's address in pid 1 is not known" in n for n in f.notes())


def test_a_thread_in_the_driver_waits_inside_it():
    tvs = {1: {4: ThreadVerdict(IDLE, "quiet", ["no output, no spin"])}}
    apply_stack_facts(tvs, REC, _facts(driver=True))
    v = tvs[1][4]
    assert (v.verdict, v.rule) == (BLOCKED, "in-gpu-driver")
    assert v.evidence[0].startswith("waits inside the NVIDIA GPU driver (uvm_spin_loop <- "
                                    "uvm_ioctl")
    assert any(e.startswith("in the kernel (D state): uvm_spin_loop <- uvm_ioctl")
               for e in v.evidence)


def test_kernel_line_leaves_out_syscall_entry():
    assert kernel_line(["kernel_clone+0x1d3/0x400", "__do_sys_vfork+0x66/0x90",
                        "do_syscall_64+0x71/0x290",
                        "entry_SYSCALL_64_after_hwframe+0x76/0x7e"], "D") == \
        "in the kernel (D state): kernel_clone <- __do_sys_vfork (/proc/PID/task/TID/stack)"
