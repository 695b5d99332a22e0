"""Collectives on the GPU (NCCL): which rank stopped joining, when the others spin waiting for it.

Contract: ``find_stragglers(rec, pvs, gpus)`` is a pure function of the process verdicts and the
NVML readings. With NCCL a collective runs as a GPU kernel: a rank that entered it while a peer
did not has its kernel spin on the GPU, and its host thread spin-waits (or yield-waits) in the
stream synchronize behind it. The peer that never arrived shows the opposite picture: its GPU is
idle and its host is not waiting for the GPU at all (blocked in a Python-level wait, idle, or
busy on something else). So, between ranks connected by sockets (TCPStore / NCCL bootstrap):
- spinning rank: verdict busy-waiting by a GPU wait rule, its GPU busy in most NVML samples;
- straggler: a rank that is neither progressing nor in a GPU wait, its GPU idle in most samples.
``apply_stragglers`` then rewrites the edges: the spinning ranks wait (kind ``collective``) for the
straggler, and the straggler's own "waits in a collective" edge toward them (inferred from a
futex wait plus sockets, the gloo picture) is dropped, since its GPU shows it is not in one.
Without NVML readings nothing is concluded: the two pictures cannot be told apart from syscalls.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping

from .accumulate import Recording
from .gpu_rules import MOST, GpuStats, collective_peers
from .process_rules import ProcessVerdict, WaitEdge
from .verdict import BLOCKED, BUSY, IDLE

GPU_WAIT_RULES = ("thread-gpu-spin-wait", "thread-gpu-yield-wait")


@dataclass
class Straggler:
    pid: int
    gpus: List[int]            # its GPUs, idle
    waiters: Dict[int, List[int]]   # spinning rank pid -> its busy GPUs


def _gpus_of(pid: int, gpus: Mapping[int, GpuStats], *, busy: bool) -> List[int]:
    out = []
    for g in gpus.values():
        if pid not in g.pids or not g.util_known:
            continue
        share = (g.busy if busy else g.idle) / g.util_known
        if share >= MOST:
            out.append(g.gpu)
    return sorted(out)


def find_stragglers(rec: Recording, pvs: Mapping[int, ProcessVerdict],
                    gpus: Mapping[int, GpuStats]) -> List[Straggler]:
    ranks = {pid: pv for pid, pv in pvs.items() if pv.role.kind == "rank"}
    spinning = {pid: _gpus_of(pid, gpus, busy=True) for pid, pv in ranks.items()
                if pv.verdict == BUSY and pv.rule in GPU_WAIT_RULES}
    spinning = {pid: g for pid, g in spinning.items() if g}
    if not spinning:
        return []
    out = []
    for pid, pv in sorted(ranks.items()):
        if pid in spinning or pv.verdict not in (BLOCKED, IDLE, BUSY):
            continue
        if pv.verdict == BUSY and pv.rule in GPU_WAIT_RULES:
            continue
        idle = _gpus_of(pid, gpus, busy=False)
        if not idle:
            continue
        peers = set(collective_peers(rec, pid))
        waiters = {s: g for s, g in spinning.items()
                   if s in peers or pid in collective_peers(rec, s)}
        if waiters:
            out.append(Straggler(pid, idle, waiters))
    return out


def apply_stragglers(stragglers: List[Straggler], pvs: Dict[int, ProcessVerdict]) -> None:
    """Rewrite the wait-for edges of the ranks involved (module doc)."""
    for st in stragglers:
        late = pvs[st.pid]
        for e in late.waits_on:
            if e.kind == "collective" and set(e.pids) & set(st.waiters):
                # Not a collective after all: a wait inside the process (Python-level, a lock).
                e.kind, e.pids = "thread", []
                e.what = e.what.split(";")[0] + " (a wait inside the process: its GPU is idle, " \
                    "so it is not in the collective)"
        late.rule = "stopped-joining-collective"
        late.evidence = [f"thread {e.tid}: {e.what}" for e in late.waits_on]
        late.evidence.append(
            f"its GPU {', '.join(map(str, st.gpus))} is idle and it is not waiting for the GPU, "
            f"while {', '.join(pvs[w].label for w in st.waiters)} spin-wait in the collective: "
            "it stopped joining")
        for w, busy_gpus in st.waiters.items():
            pvs[w].waits_on.append(WaitEdge(
                tid=pvs[w].key_tid or w, kind="collective",
                what=(f"its collective kernel on GPU {', '.join(map(str, busy_gpus))} spins "
                      f"waiting for {late.label}, which has not joined"),
                pids=[st.pid]))


def straggler_summary(st: Straggler, pvs: Mapping[int, ProcessVerdict]) -> str:
    late = pvs[st.pid]
    why = next((e for e in late.evidence if not e.startswith("its GPU")), late.rule)
    if why.startswith(f"thread {late.key_tid}: "):
        why = why[len(f"thread {late.key_tid}: "):]
    waiting = "; ".join(f"{pvs[w].label} spin-waits on GPU {', '.join(map(str, g))} in the "
                        "collective, waiting for it" for w, g in st.waiters.items())
    return (f"{late.label} stopped joining the collective: GPU {', '.join(map(str, st.gpus))} "
            f"idle, and it is not waiting for the GPU ({why}); {waiting}")
