"""Process rules: from the verdicts of a process's threads to the process's verdict.

Contract: ``judge_process`` is a pure function of the recording and the thread verdicts. Only
threads whose verdict ``decides`` count (library helpers and pool threads parked in futex do
not), unless nothing else is left. A process whose deciding threads are blocked without timeout
gets ``blocked`` with ``waits_on`` edges (pipes and sockets resolved to the processes at the other
end through the fd tables, eventfds to the other processes holding the same eventfd id and, where the end-of-recording probes found them (``facts``), unix
socket peers from sock_diag; wait4 to children; futexes to the holder of a pthread mutex read
from the target's memory; the GPU through libcuda's event thread), or
``deadlocked`` when every wait is inside the process and no thread of it runs to end it. Whether
a ``blocked`` process is part of a cross-process deadlock is the tree's question (tree_rules.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional

from .. import events as ev
from .accumulate import ProcessStats, Recording
from .roles import Role, role_of
from .thread_rules import (BLOCKED, BUSY, DEADLOCKED, EXITED, IDLE, PROGRESSING, UNKNOWN,
                           ThreadVerdict)
from .gpu_rules import blocking_sync_text, collective_peers
from .waits import Wait, eventfd_object

if TYPE_CHECKING:  # pragma: no cover
    from .waitgraph import WaitFacts

_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS",
            8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM"}


@dataclass
class WaitEdge:
    """Thread ``tid`` of the process waits on ``kind`` (pipe, socket, child, gpu, thread, outside,
    self, eventfd); ``pids`` are the traced processes that could end the wait. ``self_holds``:
    this process holds the object too (an eventfd), so one of its running threads could end it."""
    tid: int
    kind: str
    what: str
    pids: List[int] = field(default_factory=list)
    self_holds: bool = False


@dataclass
class ProcessVerdict:
    pid: int
    ppid: int
    role: Role
    comm: str
    cmdline: List[str]
    verdict: str
    rule: str
    evidence: List[str]
    threads: Dict[int, ThreadVerdict]
    key_tid: Optional[int] = None
    waits_on: List[WaitEdge] = field(default_factory=list)
    exit_status: Optional[str] = None
    pid_unknown: bool = False     # one thread whose process the recording does not show

    @property
    def label(self) -> str:
        if self.pid_unknown:
            return f"thread {self.pid} (its process is not shown by the recording)"
        name = self.role.label if self.role.kind != "other" else (self.comm or "process")
        return f"{name} (pid {self.pid})"


def exit_text(p: ProcessStats) -> Optional[str]:
    """'exited with status 3' / 'killed by SIGKILL' / None when the process is alive."""
    if p.exited is not None:
        if p.exited.signal:
            return f"killed by {p.exited.signal}" + (" (core dumped)" if p.exited.core_dumped
                                                      else "")
        if p.exited.status is not None:
            return f"exited with status {p.exited.status}"
        return "exited"
    info = p.info
    if info is not None and info.state in ("Z", "X"):
        code = info.exit_code
        if code is None:
            return "exited (zombie)"
        if code & 0x7F:
            sig = code & 0x7F
            return f"killed by {_SIGNALS.get(sig, f'signal {sig}')} (zombie, not reaped)"
        return f"exited with status {code >> 8} (zombie, not reaped)"
    return None


def exit_failed(p: ProcessStats) -> bool:
    text = exit_text(p) or ""
    return "killed" in text or ("status" in text and "status 0" not in text)


def _holders(rec: Recording, target: str, mode: str, exclude: Optional[int] = None) -> List[int]:
    out = []
    for pid, p in rec.processes.items():
        if pid == exclude or p.info is None or exit_text(p) is not None:
            continue
        if any(f.target == target and mode in (f.mode or "rw") for f in p.info.fds):
            out.append(pid)
    return sorted(out)


def _socket_peer(rec: Recording, target: str, self_pid: int, w: Optional[Wait] = None,
                 facts: Optional["WaitFacts"] = None) -> List[int]:
    """Processes holding the other end of a socket: a unix socket printed as
    UNIX-STREAM:[a->b] (strace -yy) or whose peer inode sock_diag gave (``facts``), or a TCP
    connection whose reversed addresses another traced process shows."""
    from .waitgraph import socket_inode, strace_peer, tcp_reverse
    rev = tcp_reverse(target)
    if rev is not None:
        return sorted(pid for pid, p in rec.processes.items() if p.info is not None
                      and exit_text(p) is None and any(f.target == rev for f in p.info.fds))
    want = strace_peer(target)
    if want is None and facts is not None and facts.unix_peers:
        info = rec.processes[self_pid].info if self_pid in rec.processes else None
        inode = socket_inode(target, info.fds if info else [], w.fd if w else None)
        want = facts.unix_peers.get(inode) if inode else None
    if want is None:
        return []
    return sorted(pid for pid, p in rec.processes.items()
                  if p.info is not None and any(f.inode == want for f in p.info.fds))


def _pid_of_tid(rec: Recording, tid: int) -> Optional[int]:
    pid = next((p for (p, t) in rec.threads if t == tid), None)
    return pid if pid is not None or tid not in rec.processes else tid


def _futex_edge(rec: Recording, pid: int, tid: int, w: Wait,
                facts: Optional["WaitFacts"]) -> WaitEdge:
    addr = w.futex_addr or 0
    fo = facts.owner(pid, w.futex_addr) if facts is not None else None
    if fo is None or not fo.owner_tid or fo.kind not in ("mutex", "pi-mutex", "join"):
        return WaitEdge(tid, "thread", f"futex 0x{addr:x} without timeout")
    owner = fo.owner_tid
    what = (f"futex 0x{addr:x} without timeout: pthread_join of thread {owner}, which "
            "holds it until it exits"
            if fo.kind == "join" else
            f"futex 0x{addr:x} without timeout: {'process-shared ' if fo.shared else ''}"
            f"mutex held by thread {owner}")
    opid = fo.owner_pid if fo.owner_pid is not None else _pid_of_tid(rec, owner)
    if opid is None:
        return WaitEdge(tid, "mutex", what + ", which no longer exists")
    if opid == pid:
        return WaitEdge(tid, "thread", what)
    return WaitEdge(tid, "mutex", what + f" of pid {opid}", [opid])


def resolve_wait(rec: Recording, pid: int, tid: int, w: Wait,
                 facts: Optional["WaitFacts"] = None) -> WaitEdge:
    """Turn one blocking call into an edge of the wait-for graph."""
    if w.call in ("wait4", "waitid"):
        if w.child not in (None, -1, 0) and w.child > 0:
            kids = [w.child]
        else:
            kids = sorted(c for c, p in rec.processes.items()
                          if p.info is not None and p.info.ppid == pid)
        return WaitEdge(tid, "child", f"waits for {('pid ' + str(kids[0])) if len(kids) == 1 else 'its children'} in {w.call}", kids)
    if w.call == "futex":
        return _futex_edge(rec, pid, tid, w, facts)
    target = w.fd_target or ""
    if w.fd_kind in ("pipe", "fifo") and target:
        writers = _holders(rec, target, "w")
        others = [p for p in writers if p != pid]
        if others:
            return WaitEdge(tid, "pipe", f"reads {target}; writers: "
                            + ", ".join(f"pid {p}" for p in others), others)
        if pid in writers:
            return WaitEdge(tid, "self", f"reads {target} whose only writer is this process",
                            [pid])
        return WaitEdge(tid, "outside", f"reads {target}; no traced process holds its write end")
    if w.fd_kind == "eventfd":
        info = rec.processes[pid].info if pid in rec.processes else None
        obj = eventfd_object(info.fds if info else [], w)
        if obj is not None:
            return _eventfd_edge(rec, pid, tid, w, obj)
    if w.fd_kind in ("unix", "socket", "tcp", "udp") and target:
        peers = [p for p in _socket_peer(rec, target, pid, w, facts) if p != pid]
        if peers:
            return WaitEdge(tid, "socket", f"reads {target}; peer: "
                            + ", ".join(f"pid {p}" for p in peers), peers)
        return WaitEdge(tid, "outside", f"waits on {target} (peer outside the traced tree "
                        "or unknown)")
    return WaitEdge(tid, "outside", f"waits in {w.describe()}")


def _eventfd_edge(rec: Recording, pid: int, tid: int, w: Wait, obj: str) -> WaitEdge:
    """Any process holding the eventfd may write (or read) it: those are the wait's ends."""
    holders = _holders(rec, obj, "")
    others = [p for p in holders if p != pid]
    mine = pid in holders
    if others:
        return WaitEdge(tid, "eventfd", f"waits in {w.call} on {obj}; other holders: "
                        + ", ".join(f"pid {p}" for p in others)
                        + ("; this process holds it too" if mine else ""), others, mine)
    # Only this process holds it: another thread of it, or the kernel (an eventfd registered with
    # io_uring, aio or KVM), could signal it; no other traced process can.
    why = ("only this process holds it (another thread of it or a kernel producer such as "
           "io_uring or aio could signal it)" if mine else "no traced process holds it")
    return WaitEdge(tid, "outside", f"waits in {w.call} on {obj}; {why}")


def _gpu_event_thread(tvs: Dict[int, ThreadVerdict], rec: Recording, pid: int) -> Optional[int]:
    """A live thread polling /dev/nvidia* fds: libcuda's event handler, the one that wakes a
    blocking-sync wait when the GPU signals completion."""
    for t in rec.threads_of(pid):
        v = tvs.get(t.tid)
        if v is None or v.verdict in (EXITED, BLOCKED, UNKNOWN):
            continue
        if t.poll_fd_kinds.get("nvidia") or (v.helper and "libcuda event" in v.helper):
            return t.tid
    return None


def judge_process(pid: int, rec: Recording, tvs: Dict[int, ThreadVerdict],
                  facts: Optional["WaitFacts"] = None) -> ProcessVerdict:
    p = rec.processes[pid]
    info = p.info or ev.ProcessInfo(ts=0.0, pid=pid, ppid=0)
    has_children = any(q.info is not None and q.info.ppid == pid for q in rec.processes.values())
    role = role_of(info.cmdline, info.comm, has_children=has_children,
                   is_root=pid in rec.roots, environ_rank=info.environ_rank)
    pv = ProcessVerdict(pid=pid, ppid=info.ppid, role=role, comm=info.comm,
                        cmdline=list(info.cmdline), verdict=UNKNOWN, rule="no-data",
                        evidence=[], threads=tvs, pid_unknown=info.pid_unknown)
    gone = exit_text(p)
    if gone is not None:
        pv.verdict, pv.rule, pv.exit_status = EXITED, "process-exited", gone
        pv.evidence = [gone]
        return pv
    live = {tid: v for tid, v in tvs.items() if v.verdict not in (EXITED, UNKNOWN)}
    deciding = {tid: v for tid, v in live.items() if v.decides} or live
    if not deciding:
        pv.evidence = ["nothing recorded for this process"]
        return pv
    for verdict in (PROGRESSING, BUSY):
        hits = [tid for tid, v in deciding.items() if v.verdict == verdict]
        if hits:
            key = pid if pid in hits else hits[0]
            pv.verdict, pv.key_tid = verdict, key
            pv.rule = f"thread-{deciding[key].rule}"
            pv.evidence = [f"thread {key}: {e}" for e in deciding[key].evidence]
            return pv
    blocked = {tid: v for tid, v in deciding.items() if v.verdict == BLOCKED and v.wait}
    if blocked:
        return _judge_blocked(pv, p, rec, tvs, blocked, facts)
    idle = [tid for tid, v in deciding.items() if v.verdict == IDLE]
    key = pid if pid in idle else (idle[0] if idle else next(iter(deciding)))
    pv.verdict, pv.key_tid, pv.rule = IDLE, key, f"thread-{deciding[key].rule}"
    pv.evidence = [f"thread {key}: {e}" for e in deciding[key].evidence]
    return pv


def _judge_blocked(pv: ProcessVerdict, p: ProcessStats, rec: Recording,
                   tvs: Dict[int, ThreadVerdict], blocked: Dict[int, ThreadVerdict],
                   facts: Optional["WaitFacts"] = None) -> ProcessVerdict:
    pid = pv.pid
    key = pid if pid in blocked else min(blocked)
    pv.key_tid = key
    edges = [resolve_wait(rec, pid, tid, v.wait, facts) for tid, v in sorted(blocked.items())
             if v.wait is not None]
    # Every thread of the process that still does something (helpers too) could end a wait
    # inside the process.
    running = [tid for tid, v in tvs.items() if v.verdict in (PROGRESSING, BUSY, IDLE)]
    gpu_tid = _gpu_event_thread(tvs, rec, pid)
    peers = collective_peers(rec, pid) if pv.role.kind == "rank" else []
    for e in edges:
        if e.kind == "thread" and peers:   # a rank blocked in futex, connected to its peers
            e.kind, e.pids = "collective", peers
            e.what += ("; connected (gloo/TCPStore sockets) to " + ", ".join(
                f"pid {q}" for q in peers) + ": waits in a collective for them")
        elif e.kind == "thread" and gpu_tid is not None:
            e.kind, e.what = "gpu", blocking_sync_text(e.what, gpu_tid)
        elif e.kind == "thread" and running:
            e.what += f"; threads {', '.join(map(str, running[:4]))} still run and could wake it"
        elif e.kind == "eventfd" and e.self_holds and running:
            e.what += (f"; threads {', '.join(map(str, running[:4]))} of this process still run "
                       "and could write it")
    pv.waits_on = edges
    pv.evidence = [f"thread {e.tid}: {e.what}" for e in edges]
    if any(e.kind == "gpu" for e in edges):
        pv.verdict, pv.rule = BLOCKED, "waits-on-gpu"
        return pv
    if any(e.kind == "collective" for e in edges):
        pv.verdict, pv.rule = BLOCKED, "waits-in-collective"
        return pv
    inside = [e for e in edges if e.kind in ("thread", "self")]
    if len(inside) == len(edges) and not running:
        woken = [e for e in inside if blocked[e.tid].wait and
                 blocked[e.tid].wait.futex_addr in rec.futex_wakers]
        if not woken:
            # The parked threads are part of the picture now: list their waits too.
            extra = [resolve_wait(rec, pid, tid, v.wait, facts) for tid, v in sorted(tvs.items())
                     if v.verdict == BLOCKED and v.wait is not None and tid not in blocked]
            pv.waits_on = edges + extra
            pv.evidence = [f"thread {e.tid}: {e.what}" for e in pv.waits_on]
            pv.verdict, pv.rule = DEADLOCKED, "all-threads-blocked"
            pv.evidence.append("no thread of the process runs, so none can end these waits")
            return pv
    if all(e.kind == "outside" for e in edges):
        pv.verdict, pv.rule = IDLE, "waits-outside"
        return pv
    pv.verdict, pv.rule = BLOCKED, "waits-on-peers"
    return pv
