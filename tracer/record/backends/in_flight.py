"""Calls a thread was already inside when the recording attached, and never left: read from
/proc/TID/syscall, the same way for every backend (issue 42 item 4). A thread in D state (a read of
a hung FUSE or NFS mount, a driver call) takes no ptrace stop and hits no exit tracepoint until its
call returns; /proc/PID/task/TID/syscall still shows its number and argument registers.

Contract:
- ``uninterruptible_samples(pids)``: the D-state threads' ThreadSamples now (reads /proc);
  ``uninterruptible_calls(samples)`` -> {(pid, tid): syscall line} of those inside a call.
- ``unseen_calls(pids, seen)`` -> the same lines of the threads strace never printed;
- ``in_flight_events(lines, since, now)`` -> one ongoing ``Syscall`` per line (``ret`` None,
  ``dur`` now - since), decoded as ebpf/inflight.ongoing_call decodes the eBPF backend's.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Tuple

from ... import events as ev
from ...linux import procfs
from ...linux.syscall_table import parse_proc_syscall, syscall_table

__all__ = ["uninterruptible_samples", "uninterruptible_calls", "in_flight_events",
           "unseen_calls"]


def uninterruptible_samples(pids: List[int]) -> Dict[Tuple[int, int], ev.ThreadSample]:
    """{(pid, tid): its ThreadSample now} of the threads of ``pids`` in state D (in a call or
    not: a page fault), read from /proc."""
    out: Dict[Tuple[int, int], ev.ThreadSample] = {}
    for pid in pids:
        for tid in procfs.list_tids(pid):
            st = procfs.read_stat(pid, tid)           # one file a thread; the rest if in D
            s = procfs.read_thread_sample(pid, tid) if st is not None and st.state == "D" \
                else None
            if s is not None and s.state == "D":
                out[(pid, tid)] = s
    return out


def uninterruptible_calls(samples: Dict[Tuple[int, int], ev.ThreadSample]
                          ) -> Dict[Tuple[int, int], str]:
    """The module doc's syscall lines, of those of ``samples`` inside a system call."""
    out: Dict[Tuple[int, int], str] = {}
    for key, s in samples.items():
        cs = parse_proc_syscall(s.syscall or "")
        if cs is not None and cs.kind == "syscall":
            out[key] = s.syscall
    return out


def unseen_calls(pids: List[int], seen: Callable[[int], bool]) -> Dict[Tuple[int, int], str]:
    """{(pid, tid): syscall line} of the threads of ``pids`` that ``seen(tid)`` says the
    recording never showed and that are inside a call now (/proc/PID/task/TID/syscall; not
    "running"): strace prints the call a thread is in once it has attached and stopped it; one
    it printed nothing of while the thread sits in a call never got that far (5,001 processes
    on a busy VM: strace had stopped none of them 3 s after attaching)."""
    out: Dict[Tuple[int, int], str] = {}
    for pid in pids:
        for tid in procfs.list_tids(pid):
            if seen(tid):
                continue
            text = procfs.read_text(f"/proc/{pid}/task/{tid}/syscall") or ""
            cs = parse_proc_syscall(text.strip())
            # a kernel thread reads "0 0x0 ... 0x0" (no user stack, no call): not a read
            if cs is not None and cs.kind == "syscall" and (cs.sp or cs.pc):
                out[(pid, tid)] = text.strip()
    return out


def in_flight_events(lines: Dict[Tuple[int, int], str], since: float,
                     now: float) -> List[ev.Syscall]:
    """The module doc's ongoing events, in (pid, tid) order."""
    if not lines:
        return []
    from .ebpf import layout as L
    from .ebpf.convert import Converter, FdCache
    from .ebpf.inflight import ongoing_call
    conv, kinds = Converter(FdCache()), L.kinds_for(syscall_table())
    out: List[ev.Syscall] = []
    for (pid, tid), text in sorted(lines.items()):
        e = ongoing_call(conv, pid, tid, text, kinds, since, now - since)
        if e is not None:
            out.append(e)
    return out
