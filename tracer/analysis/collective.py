"""Collectives between ranks: who is connected to whom, and which rank stopped joining.

Contract: pure functions of the recording, the thread verdicts and the NVML readings.
- ``collective_peers(rec, pid)``: the traced processes at the other end of pid's connected
  TCP/unix sockets (gloo pairs, TCPStore, NCCL bootstrap): a rank blocked in a futex while
  connected to peer ranks waits in a collective for them (graph_build.py).
- ``find_stragglers(rec, procs, threads, gpus)``: with NCCL a collective runs as a GPU kernel:
  a rank that entered it while a peer did not has its kernel spin on the GPU and its host thread
  spin-waits (or yield-waits) in the stream synchronize behind it. The peer that never arrived
  shows the opposite picture: its GPU is idle and its host is not waiting for the GPU (blocked
  in a Python-level wait, idle, or busy on something else). So, between connected ranks:
  spinning rank = a deciding thread in a GPU wait (thread_rules) and nothing progressing, its GPU
  busy in most NVML samples; straggler = a rank neither progressing nor in a GPU wait, its GPU
  idle in most samples. Without NVML readings nothing is concluded: the two pictures cannot be
  told apart from syscalls. The wait-for graph then makes the spinning ranks wait for the
  straggler, and the straggler's own futex wait a wait inside its process.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Set

from ..linux.fdtarget import FdTarget
from .accumulate import Recording
from .gpu_rules import MOST, GpuStats
from .process_facts import ProcessFacts
from .verdict import BUSY, EXITED, PROGRESSING, UNKNOWN, ThreadVerdict

_SOCKETS = ("tcp", "unix", "socket")


@dataclass
class Straggler:
    pid: int
    gpus: List[int]                 # its GPUs, idle
    waiters: Dict[int, List[int]]   # spinning rank pid -> its busy GPUs


def collective_peers(rec: Recording, pid: int) -> List[int]:
    """Traced processes (alive, other than ``pid``) at the other end of pid's connected sockets
    (module doc): TCP by reversed endpoints, unix socketpairs by inode."""
    p = rec.processes.get(pid)
    if p is None or p.info is None:
        return []
    mine = {e for e in (FdTarget.parse(f.target).endpoints() for f in p.info.fds
                        if f.kind in _SOCKETS) if e is not None}
    if not mine:
        return []
    want = {(remote, local) for local, remote in mine}      # what the other end shows
    peer_inodes = {remote for _, remote in mine if remote.isdigit()}
    out: Set[int] = set()
    for qpid, q in rec.processes.items():
        if qpid == pid or q.info is None or q.exited is not None:
            continue
        for f in q.info.fds:
            if f.kind not in _SOCKETS:
                continue
            if FdTarget.parse(f.target).endpoints() in want or (
                    f.kind == "unix" and f.inode is not None and str(f.inode) in peer_inodes):
                out.add(qpid)
                break
    return sorted(out)


def _gpus_of(pid: int, gpus: Mapping[int, GpuStats], *, busy: bool) -> List[int]:
    out = []
    for g in gpus.values():
        if pid not in g.pids or not g.util_known:
            continue
        share = (g.busy if busy else g.idle) / g.util_known
        if share >= MOST:
            out.append(g.gpu)
    return sorted(out)


def _deciding(tvs: Mapping[int, ThreadVerdict]) -> List[ThreadVerdict]:
    live = [v for v in tvs.values() if v.verdict not in (EXITED, UNKNOWN)]
    return [v for v in live if v.decides] or live


def find_stragglers(rec: Recording, procs: Mapping[int, ProcessFacts],
                    threads: Mapping[int, Mapping[int, ThreadVerdict]],
                    gpus: Mapping[int, GpuStats],
                    peers: Mapping[int, List[int]]) -> List[Straggler]:
    """Ranks that stopped joining a collective their peers spin in (module doc)."""
    ranks = [pid for pid, pf in procs.items() if pf.role.kind == "rank" and pf.gone is None]
    state = {pid: _deciding(threads.get(pid, {})) for pid in ranks}
    spinning: Dict[int, List[int]] = {}
    for pid in ranks:
        vs = state[pid]
        if vs and not any(v.verdict == PROGRESSING for v in vs) \
                and any(v.verdict == BUSY and v.gpu_wait for v in vs):
            busy = _gpus_of(pid, gpus, busy=True)
            if busy:
                spinning[pid] = busy
    if not spinning:
        return []
    out = []
    for pid in sorted(ranks):
        vs = state[pid]
        if pid in spinning or not vs or any(v.verdict == PROGRESSING or v.gpu_wait for v in vs):
            continue
        idle = _gpus_of(pid, gpus, busy=False)
        if not idle:
            continue
        mine = set(peers.get(pid, []))
        waiters = {s: g for s, g in spinning.items() if s in mine or pid in peers.get(s, [])}
        if waiters:
            out.append(Straggler(pid, idle, waiters))
    return out


def straggler_evidence(st: Straggler, labels: Mapping[int, str]) -> str:
    return (f"its GPU {', '.join(map(str, st.gpus))} is idle and it is not waiting for the GPU, "
            f"while {', '.join(labels[w] for w in st.waiters)} spin-wait in the collective: "
            "it stopped joining")


def straggler_summary(st: Straggler, labels: Mapping[int, str], why: str) -> str:
    """The root cause line (tree_rules): ``why`` is the straggler's own first evidence line."""
    waiting = "; ".join(f"{labels[w]} spin-waits on GPU {', '.join(map(str, g))} in the "
                        "collective, waiting for it" for w, g in st.waiters.items())
    return (f"{labels[st.pid]} stopped joining the collective: GPU "
            f"{', '.join(map(str, st.gpus))} idle, and it is not waiting for the GPU ({why}); "
            f"{waiting}")
