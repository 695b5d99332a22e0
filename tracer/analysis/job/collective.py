"""Collectives between ranks: who is connected to whom, and which rank stopped joining.

Contract: pure functions of the recording, the thread verdicts and the NVML readings.
- ``collective_peers(rec, pid)``: the traced processes at the other end of pid's connected
  TCP/unix sockets (gloo pairs, TCPStore, NCCL bootstrap): a rank blocked in a futex while
  connected to peer ranks waits in a collective for them (waitgraph/build.py). Ranks of other
  nodes (merged traces) only through TCP between nodes (nodes.py).
- ``find_stragglers(rec, procs, threads, gpus)``: the ranks the others wait for, one per rank,
  each with how it is known (``Straggler``; the two pictures of a rank behind and of one
  waiting: its docstring). The wait-for graph then makes the spinning ranks wait for the
  straggler, and the straggler's own futex wait a wait inside its process.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Set

from ...events.evidence import CudaDriverCalls
from ...linux.fdtarget import FdTarget
from ..accumulate.accumulator import Recording
from ..accumulate.gpu import MOST, GpuStats
from ..vocab.nodes import crosses_nodes, real_id, same_node
from .process_facts import ProcessFacts, exit_failed
from .nccl_ras import RasStatus, lagging_ranks, missing_ranks
from .flight_recorder import RecorderLag
from ..progress.collectives import collective_wait, own_work_stall
from ..vocab.verdict import BLOCKED, BUSY, EXITED, PROGRESSING, UNKNOWN, ThreadVerdict, StrEnum

_SOCKETS = ("tcp", "unix", "socket")


class LagSource(StrEnum):
    """What showed that a rank is behind (most to least direct)."""
    RAS = "NCCL RAS"             # the job's own counts (operations launched per rank)
    RECORDER = "Flight Recorder"  # PyTorch's per-rank collective log (flight_recorder.py)
    EXIT = "exit"                # the rank died while its peers wait in a collective
    NCCL = "libnccl uprobes"     # its peers' GPU waits are behind a collective, its own is not
    NVML = "NVML"                # its GPU idle while a peer spins on a busy GPU
    STACKS = "Python stacks"     # it is the one rank whose main thread is not in a collective
    THREADS = "thread sets"      # it is the one rank whose threads differ (job/ranks.py)


@dataclass
class Straggler:
    """A rank the others wait for in a collective, and how we know (``source``, ``why``)."""
    pid: int
    source: LagSource
    why: str                                 # "it launched up to AllReduce operation 6, ..."
    waiters: Dict[int, str] = field(default_factory=dict)   # waiting rank -> what it does
    gpus: List[int] = field(default_factory=list)           # its GPUs, idle (NVML)
    op: str = ""
    dead: bool = False


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
        near = same_node(qpid, pid)           # merged traces: only TCP links two nodes
        for f in q.info.fds:
            if f.kind not in _SOCKETS:
                continue
            t = FdTarget.parse(f.target)
            if not near and not crosses_nodes(t):
                continue
            if t.endpoints() in want or (
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


def _spinning(rank_pids: Sequence[int], state: Mapping[int, List[ThreadVerdict]]
              ) -> List[int]:
    """Ranks whose deciding threads wait for the GPU (spin/yield-sync) and do nothing else."""
    return [pid for pid in rank_pids if state[pid]
            and not any(v.verdict == PROGRESSING for v in state[pid])
            and any(v.verdict == BUSY and v.gpu_wait for v in state[pid])]


def _waiting(rank_pids: Sequence[int], state: Mapping[int, List[ThreadVerdict]]) -> List[int]:
    """Ranks that wait: on the GPU in a collective kernel, or blocked (a gloo collective)."""
    return [pid for pid in rank_pids if state[pid]
            and not any(v.verdict == PROGRESSING for v in state[pid])
            and any((v.verdict == BUSY and v.gpu_wait) or v.verdict == BLOCKED
                    for v in state[pid])]


def _doing(pid: int, state: Mapping[int, List[ThreadVerdict]],
           gpus: Mapping[int, GpuStats]) -> str:
    busy = _gpus_of(pid, gpus, busy=True)
    if any(v.verdict == BUSY and v.gpu_wait for v in state.get(pid, [])):
        on = f" on GPU {', '.join(str(real_id(g)) for g in busy)}" if busy else ""
        return f"spin-waits{on} in the collective"
    return "waits in the collective"


def _from_ras(st: RasStatus, procs: Mapping[int, ProcessFacts],
              state: Mapping[int, List[ThreadVerdict]], gpus: Mapping[int, GpuStats]
              ) -> List[Straggler]:
    out: List[Straggler] = []
    for comm, m in missing_ranks(st):
        if m.pid is None or m.pid not in procs:
            continue
        others = [r.pid for r in comm.ranks if r.pid is not None and r.pid in procs
                  and r.pid != m.pid and procs[r.pid].gone is None]
        if not others:   # the text answer lists only the missing ranks: its siblings that wait
            others = _waiting([q for q, pf in procs.items() if q != m.pid and pf.gone is None
                               and pf.ppid == procs[m.pid].ppid and q in state], state)
        dead = m.dead or procs[m.pid].gone is not None
        gpu = "" if m.gpu is None else f", GPU {m.gpu}"
        why = (f"NCCL RAS got no data from it (rank {m.rank}{gpu})"
               + (" and considers it dead" if m.dead else ""))
        out.append(Straggler(m.pid, LagSource.RAS, why,
                             {w: _doing(w, state, gpus) for w in others}, dead=dead))
    for lag in lagging_ranks(st):
        pid = lag.behind.pid
        if pid is None or pid not in procs or any(s.pid == pid for s in out):
            continue
        ahead = [r for r in lag.ahead if r.pid is not None]
        names = ", ".join(f"rank {r.rank} up to {r.counts.get(lag.op, 0)}" for r in ahead[:3])
        why = (f"it launched up to {lag.op} operation {lag.behind.counts.get(lag.op, 0)}, "
               f"{names} (NCCL RAS)")
        waiters = {r.pid: f"launched up to {lag.op} operation {r.counts.get(lag.op, 0)} and "
                   + _doing(r.pid, state, gpus)  # type: ignore[arg-type]
                   for r in ahead if r.pid in procs and procs[r.pid].gone is None}
        out.append(Straggler(pid, LagSource.RAS, why, waiters, op=lag.op))
    return out


def _from_recorder(recorder: Sequence[RecorderLag], procs: Mapping[int, ProcessFacts],
                   state: Mapping[int, List[ThreadVerdict]], gpus: Mapping[int, GpuStats]
                   ) -> List[Straggler]:
    """Flight Recorder: the rank behind, or the one with no dump, and who waits in what."""
    def doing(w: int, what: str) -> str:
        spin = _doing(w, state, gpus)
        return f"{what}, {spin}" if spin.startswith("spin") else what
    return [Straggler(lag.pid, LagSource.RECORDER, lag.why,
                      {w: doing(w, what) for w, what in lag.waiters.items()
                       if w in procs and procs[w].gone is None},
                      op=lag.op, dead=procs[lag.pid].gone is not None)
            for lag in recorder if lag.pid in procs]


def _from_exits(rec: Recording, ranks: Sequence[int], procs: Mapping[int, ProcessFacts],
                state: Mapping[int, List[ThreadVerdict]], gpus: Mapping[int, GpuStats]
                ) -> List[Straggler]:
    """A process that died while ranks of the same job (its siblings: the same launcher)
    spin or wait. A dead rank's environment no longer reads (a zombie's /proc/PID/environ is
    empty), so the dead one is known as a sibling of the ranks, not by its RANK."""
    out = []
    for pid, pf in procs.items():
        if pf.gone is None or pid not in rec.processes or not exit_failed(rec.processes[pid]):
            continue
        peers = [q for q in _waiting([q for q in ranks if procs[q].gone is None
                                      and procs[q].ppid == pf.ppid and q != pid], state)]
        if peers:
            how = ("was " if pf.gone.startswith("killed") else "") + pf.gone
            out.append(Straggler(pid, LagSource.EXIT, f"it {how}",
                                 {q: _doing(q, state, gpus) for q in peers}, dead=True))
    return out


def _calls_of(rec: Recording, pid: int) -> List[CudaDriverCalls]:
    p = rec.processes.get(pid)
    return [] if p is None else [p.driver_calls[t] for t in sorted(p.driver_calls)]


def _first(texts: Sequence[Optional[str]]) -> Optional[str]:
    return next((t for t in texts if t), None)


def _from_nccl_calls(rec: Recording, ranks: Sequence[int], procs: Mapping[int, ProcessFacts],
                     state: Mapping[int, List[ThreadVerdict]], gpus: Mapping[int, GpuStats],
                     peers: Mapping[int, List[int]]) -> List[Straggler]:
    """libnccl uprobes (progress/collectives.py): a rank whose GPU wait is behind a collective it
    called waits for its sibling (or connected) ranks; the straggler is the one whose sync is
    behind its own work (a kernel that never ends), or the one in no collective and not
    waiting for the GPU (blocked on a lock, elsewhere), not progressing either way."""
    waits = {pid: w for pid in ranks
             if (w := _first([collective_wait(e) for e in _calls_of(rec, pid)]))}
    out: List[Straggler] = []
    for pid in ranks:
        vs = state.get(pid, [])
        if pid in waits or not vs or any(v.verdict == PROGRESSING for v in vs):
            continue
        mine = [w for w in waits if procs[w].ppid == procs[pid].ppid
                or w in peers.get(pid, []) or pid in peers.get(w, [])]
        if not mine:
            continue
        calls = _calls_of(rec, pid)
        stall = _first([own_work_stall(e) for e in calls])
        if stall:
            why = f"its own GPU work never completes: {stall}"
        elif not any(v.gpu_wait for v in vs):
            n = sum(e.collectives for e in calls)
            why = (f"it is in no collective and not waiting for the GPU ({n} NCCL collectives "
                   "called in the window), while its peers' GPU waits are behind one "
                   "(libnccl uprobes)")
        else:
            continue
        out.append(Straggler(pid, LagSource.NCCL, why, {w: _doing(w, state, gpus) for w in mine}))
    return out


def _from_nvml(ranks: Sequence[int], state: Mapping[int, List[ThreadVerdict]],
               gpus: Mapping[int, GpuStats], peers: Mapping[int, List[int]]) -> List[Straggler]:
    spinning = {pid: g for pid in _spinning(ranks, state)
                if (g := _gpus_of(pid, gpus, busy=True))}
    out = []
    for pid in ranks:
        vs = state[pid]
        if pid in spinning or not vs or any(v.verdict == PROGRESSING or v.gpu_wait for v in vs):
            continue
        idle = _gpus_of(pid, gpus, busy=False)
        mine = set(peers.get(pid, []))
        waiters = {s: f"spin-waits on GPU {', '.join(str(real_id(x)) for x in g)} in the "
                      "collective"
                   for s, g in spinning.items() if s in mine or pid in peers.get(s, [])}
        if idle and waiters:
            out.append(Straggler(pid, LagSource.NVML,
                                 f"GPU {', '.join(str(real_id(g)) for g in idle)} idle, and "
                                 "it is not waiting "
                                 "for the GPU", waiters, gpus=idle))
    return out


def find_stragglers(rec: Recording, procs: Mapping[int, ProcessFacts],
                    threads: Mapping[int, Mapping[int, ThreadVerdict]],
                    gpus: Mapping[int, GpuStats], peers: Mapping[int, List[int]],
                    ras: Optional[RasStatus] = None,
                    stack_suspects: Optional[Mapping[int, str]] = None,
                    thread_suspects: Optional[Mapping[int, str]] = None,
                    recorder: Sequence[RecorderLag] = ()) -> List[Straggler]:
    """Ranks the others wait for in a collective (module doc), one per rank, the most direct
    evidence first: NCCL RAS, the Flight Recorder, a rank that died, libnccl uprobes, NVML,
    Python stacks, thread sets.
    With NCCL a collective runs as a GPU kernel: a rank that entered it while a peer did not has
    its kernel spin on the GPU and its host thread spin-waits (or yield-waits) in the stream
    synchronize behind it. The peer that never arrived shows the opposite picture: its GPU is idle
    and its host is not waiting for the GPU (blocked in a Python-level wait, idle, or busy on
    something else). So, between connected ranks: spinning rank = a deciding thread in a GPU wait
    (thread_rules) and nothing progressing, its GPU busy in most NVML samples; straggler = a rank
    neither progressing nor in a GPU wait, its GPU idle in most samples. Without NVML readings (or
    libnccl's uprobes: ``_from_nccl_calls``) nothing is concluded: the two pictures cannot be told
    apart from syscalls."""
    ranks = sorted(pid for pid, pf in procs.items() if pf.is_rank)
    state = {pid: _deciding(threads.get(pid, {})) for pid in procs}
    found: List[Straggler] = []
    if ras is not None:
        found += _from_ras(ras, procs, state, gpus)
    found += _from_recorder(recorder, procs, state, gpus)
    found += _from_exits(rec, ranks, procs, state, gpus)
    live = [pid for pid in ranks if procs[pid].gone is None]
    found += _from_nccl_calls(rec, live, procs, state, gpus, peers)
    found += _from_nvml(live, state, gpus, peers)
    for source, odd in ((LagSource.STACKS, stack_suspects), (LagSource.THREADS, thread_suspects)):
        for pid, why in (odd or {}).items():
            waiters = {q: _doing(q, state, gpus) for q in _waiting(live, state) if q != pid}
            if waiters:
                found.append(Straggler(pid, source, why, waiters))
    out: List[Straggler] = []
    for st in found:
        if st.waiters and not any(o.pid == st.pid for o in out):
            out.append(st)
    return out


def straggler_evidence(st: Straggler, labels: Mapping[int, str]) -> str:
    waiting = ", ".join(labels.get(w, f"pid {real_id(w)}") for w in st.waiters)
    return f"{st.why}; {waiting} wait for it in the collective ({st.source}): it stopped joining"


def straggler_summary(st: Straggler, labels: Mapping[int, str], state: str) -> str:
    """The root cause line (tree_rules): ``state`` is what the straggler itself is doing."""
    late = labels.get(st.pid, f"pid {real_id(st.pid)}")
    what = f"stopped joining {st.op}" if st.op else "stopped joining the collective"
    if st.source == LagSource.STACKS:          # the comparison names the waiting ranks already
        return f"{late} {what}: {st.why}; it {state}"
    waiting = "; ".join(f"{labels.get(w, f'pid {real_id(w)}')} {doing}, waiting for it"
                        for w, doing in st.waiters.items())
    return f"{late} {what}: {st.why}; it {state}; {waiting}"
