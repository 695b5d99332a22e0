"""One-shot look at process trees: what every thread is doing right now (hangtrace snapshot).

Contract:
- ``take_snapshot(pids, root)`` reads /proc once for each pid and all of its descendants: every
  thread (state, CPU time, wchan, current system call decoded with what it waits on), every fd
  and its target, the listening sockets. It never stops or signals anything, nor raises for
  processes that vanish or cannot be read: ``errors`` lines (a pid that does not exist) or
  empty fields (fds of another user's process).
- With ``evidence`` (the default) it also gathers what a person checks by hand (record/evidence:
  vitals, log targets, ports, NVRM kernel log lines, GPU health, library versions and, with
  stacks, CUDA graph capture) into ``evidence`` (analysis/evidence/build.py's JSON form).
- ``Snapshot.to_json()``: the stable form (hangtrace.snapshot/1); renderers never read /proc.
"""
from __future__ import annotations

import platform
import time
from typing import Any, Dict, Iterable, List, Optional

from ..linux import procfs
from ..events import FdInfo
from ..snapshot_model import FORMAT, STATE_NAMES, ProcessSnapshot, Snapshot, ThreadSnapshot
from ..linux.procfs_fds import read_fds_checked
from ..linux.blocking import decode_blocking
from ..linux.syscall_table import parse_proc_syscall

__all__ = ["ThreadSnapshot", "ProcessSnapshot", "Snapshot", "take_snapshot", "STATE_NAMES",
           "FORMAT"]

def _thread_snapshot(pid: int, tid: int, fds: Dict[int, FdInfo], root: str,
                     ticks_hz: int) -> Optional[ThreadSnapshot]:
    sample = procfs.read_thread_sample(pid, tid, root)
    if sample is None:
        return None  # exited while we looked
    cs = parse_proc_syscall(sample.syscall)
    block = decode_blocking(cs, fds)
    if cs is None:
        name = ""
    elif cs.kind == "running":
        name = "running"
    else:
        name = cs.name or ""
    return ThreadSnapshot(
        tid=tid, comm=sample.comm, state=sample.state, utime=sample.utime / ticks_hz,
        stime=sample.stime / ticks_hz, wchan="" if sample.wchan == "0" else sample.wchan,
        syscall=name, syscall_raw=sample.syscall,
        blocking=str(block) if block else "", waits_on=block.waits_on if block else "",
        has_timeout=block.has_timeout if block else None)


def _process_snapshot(pid: int, root: str) -> Optional[ProcessSnapshot]:
    st = procfs.read_stat(pid, root=root)
    if st is None:
        return None
    fds_checked = read_fds_checked(pid, root)
    fds = fds_checked or []
    by_fd = {f.fd: f for f in fds}
    bt = procfs.boot_time(root)
    snap = ProcessSnapshot(
        pid=pid, ppid=st.ppid, comm=st.comm, cmdline=procfs.read_cmdline(pid, root),
        state=st.state, exit_code=st.exit_code if st.state in ("Z", "X") else None,
        start_time=None if bt is None else bt + st.starttime / procfs.TICKS_HZ,
        environ_rank=procfs.read_environ_rank(pid, root), fds=fds,
        fds_readable=fds_checked is not None,
        listening=procfs.listening_sockets(pid, root, fds=fds))
    for tid in procfs.list_tids(pid, root):
        t = _thread_snapshot(pid, tid, by_fd, root, procfs.TICKS_HZ)
        if t is not None:
            snap.threads.append(t)
    return snap


def take_snapshot(pids: Iterable[int], root: str = "/proc", *, stacks: bool = False,
                  evidence: bool = True, native: bool = False) -> Snapshot:
    """Snapshot of every process of the trees rooted at ``pids``, each parent before its children.

    ``stacks``: also each Python process's stacks through py-spy (pystacks.py), and the
    kernel stacks of threads in D state or blocked in an ioctl, a device read/write or a futex
    wait without timeout (probes/kernel_stacks.py); what could not be read is an ``errors``
    line. ``native``: native frames too (pystacks.py: py-spy --native pauses each Python
    process briefly; other processes get a stack scan of their blocked threads)."""
    roots = list(dict.fromkeys(pids))
    snap = Snapshot(ts=time.time(), host=platform.node(), roots=roots)
    tree = procfs.children_map(root)
    # Depth-first, so that every parent comes before its children (pids wrap: a child may
    # have a smaller pid than its parent).
    order: List[int] = []
    stack = list(reversed(roots))
    while stack:
        pid = stack.pop()
        if pid in order:
            continue
        order.append(pid)
        stack.extend(sorted(tree.get(pid, ()), reverse=True))
    for pid in order:
        ps = _process_snapshot(pid, root)
        if ps is None:
            if pid in roots:
                snap.errors.append(f"pid {pid}: no such process")
            continue  # a descendant that exited while we looked
        snap.processes.append(ps)
        if not ps.fds_readable:
            snap.errors.append(f"pid {pid}: fds not readable (another user's process: run as "
                               "root or as its owner)")
    if stacks:
        _add_kernel_stacks(snap)            # before py-spy: its reading never pauses, but
    taken = _add_stacks(snap, native) if stacks else []   # the kernel's view comes first
    if evidence and root == "/proc":
        snap.evidence = _evidence(snap, taken)
    return snap


def _evidence(snap: Snapshot, stacks: list) -> Dict[str, Any]:
    from ..analysis.evidence.build import EvidenceTable, ProcFacts, build_evidence
    from ..analysis.evidence.libs import fd_conditions
    from ..analysis.job.roles import role_labels
    from ..events import GpuSample
    from .evidence import collect
    from .evidence.capture import capture_sites
    table = EvidenceTable()
    for e in collect([p.pid for p in snap.processes]) + capture_sites(stacks):
        if isinstance(e, GpuSample):
            table.feed_gpu(e)
        else:
            table.feed(e)
    labels = role_labels(snap.processes, snap.roots)
    procs = [ProcFacts(p.pid, p.ppid, labels[p.pid],
                       list(p.cmdline), list(p.listening), p.start_time,
                       fd_conditions(f.target for f in p.fds))
             for p in snap.processes]
    return build_evidence(table, procs, now=snap.ts).to_json()


def _add_kernel_stacks(snap: Snapshot) -> None:
    from ..analysis.vocab.stack_facts import StackFacts
    from ..analysis.vocab.waits import wait_from_proc
    from .probes.kernel_stacks import read_thread_stacks, stack_reason
    wanted = {}
    for p in snap.processes:
        for t in p.threads:
            w = wait_from_proc(t.syscall_raw, p.fds, t.wchan) if t.syscall_raw else None
            reason = stack_reason(t.state, w)
            if reason is not None:
                wanted[(p.pid, t.tid)] = reason.replace("blocked all window in", "blocked in")
    facts = StackFacts()
    for e in read_thread_stacks(wanted):
        facts.feed(e)
    for p in snap.processes:
        for t in p.threads:
            t.kernel_stack = facts.kernel_frames(p.pid, t.tid)
    snap.errors.extend(facts.notes())


def _add_stacks(snap: Snapshot, native: bool = False) -> list:
    from ..analysis.accumulate.stacks import failure_notes
    from ..analysis.vocab.stack_facts import StackFacts
    from ..events import PyStack
    from .probes.native import scan_uncovered
    from .pystacks import find_py_spy, is_python_process, take_stacks
    exe = find_py_spy()
    failures, taken, every = [], [], []
    for p in snap.processes:
        if p.state in ("Z", "X") or not is_python_process(p.pid):
            continue
        by_tid = {t.tid: t for t in p.threads}
        for s in take_stacks(p.pid, exe, native=native):
            every.append(s)
            if not isinstance(s, PyStack):
                continue
            if s.error:
                failures.append(s)
            elif s.tid in by_tid:
                by_tid[s.tid].stack = list(s.frames)
                by_tid[s.tid].owns_gil = s.owns_gil
                taken.append(s)
    snap.errors.extend(failure_notes(failures))
    if native:
        live = [p.pid for p in snap.processes if p.state not in ("Z", "X")]
        facts = StackFacts()
        for e in every + scan_uncovered(live, every):
            facts.feed(e)
        for p in snap.processes:
            for t in p.threads:
                t.native_stack = facts.native_frames(p.pid, t.tid)[0]
        snap.errors.extend(n for n in facts.notes() if n.startswith("native"))
    return taken
