"""Per-process facts every later stage reads: role and label, whether and how it ended, and an
index of who holds which fd target.

Contract (pure functions of the recording; no verdicts):
- ``exit_text(p)``: "exited with status 3" / "killed by SIGKILL (zombie, not reaped)" / None
  while the process runs; ``exit_failed`` tells a failure from a clean exit.
- ``process_facts(rec)`` -> {pid: ProcessFacts}: role (roles.role_of), label ("scheduler TP1
  (pid 42)"), ppid, comm, cmdline, ``gone`` (exit_text) and ``children``; in merged traces
  each process also has its node (``ProcessFacts.label``).
- ``FdIndex(rec)``: for each fd target text, the live processes holding it and in which modes,
  and each socket inode's holders: one pass over the fd tables instead of one per question.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from ... import events as ev
from ...linux.wait_status import describe_wait_status
from ..accumulate.accumulator import ProcessStats, Recording
from ..vocab.nodes import NodeMap, real_id, scoped_inode, target_scope
from .roles import Role, role_of

def exit_text(p: ProcessStats) -> Optional[str]:
    """'exited with status 3' / 'killed by SIGKILL' / None when the process is alive.
    Kernel facts: a zombie's /proc/PID/stat still carries its wait status (exit_code: signal in the
    low 7 bits, status in bits 8-15), readable until the parent reaps it."""
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
        return describe_wait_status(code) + " (zombie, not reaped)"
    return None


def exit_failed(p: ProcessStats) -> bool:
    """Killed by a signal, or exited with a non-zero status."""
    if p.exited is not None:
        return bool(p.exited.signal) or (p.exited.status not in (None, 0))
    info = p.info
    if info is not None and info.state in ("Z", "X") and info.exit_code is not None:
        return info.exit_code != 0
    return False


_GPU_ROLES = ("rank", "scheduler", "worker")
# A log without a pid column or an attach line (strace -o LOG -p N) names no task: its lines are
# one thread of unknown process (tid 0 inside), never "pid 0".
UNNAMED_THREAD = "the traced thread (the log does not name its process: give --pid)"


@dataclass
class ProcessFacts:
    pid: int
    ppid: int
    role: Role
    comm: str
    cmdline: List[str]
    gone: Optional[str] = None                 # exit_text: None while it runs
    children: List[int] = field(default_factory=list)
    gpu: Optional[int] = None                  # the GPU a rank or worker drives, when known
    pid_unknown: bool = False    # one thread whose process the recording does not show
    node: Optional[str] = None                 # its node's name, in merged traces only
    ranked: bool = False         # one of the ranks of a job without RANK (job/ranks.py)
    threads_partial: bool = False  # only some of its threads were traced (strace -p TID)
    ns_pid: Optional[int] = None   # its pid in its own pid namespace, below the recording's

    @property
    def ns_words(self) -> str:
        """", pid 7 in its namespace" for a process of a pid namespace below the one the
        recording numbers processes in (a container's, seen from the host), else ""."""
        return f", pid {self.ns_pid} in its namespace" if self.ns_pid is not None else ""

    @property
    def is_rank(self) -> bool:
        """A rank of a job: RANK in its environment or NCCL RAS names it, or it is one of a set
        of siblings job/ranks.py recognised as ranks."""
        return self.role.kind == "rank" or self.ranked

    @property
    def role_label(self) -> str:
        """"rank 1 (GPU 1)": the role, with its GPU for ranks and workers."""
        if self.gpu is not None and self.role.kind in _GPU_ROLES:
            return f"{self.role.label} (GPU {real_id(self.gpu)})"
        return self.role.label

    @property
    def label(self) -> str:
        """"rank 1 (pid 623, GPU 1)" ("node b, rank 1 (pid 623, GPU 1)" in merged traces): how
        sentences name the process.
        In merged traces (``nodes``) pids are keys (nodes.py); labels and ``ref`` show the pid the
        node knows."""
        if self.pid_unknown and real_id(self.pid) == 0:
            return UNNAMED_THREAD
        if self.pid_unknown:
            return f"thread {real_id(self.pid)} (its process is not shown by the recording)"
        name = self.role.label if self.role.kind != "other" else (self.comm or "process")
        gpu = f", GPU {real_id(self.gpu)}" if self.gpu is not None \
            and self.role.kind in _GPU_ROLES else ""
        where = f"node {self.node}, " if self.node is not None else ""
        return f"{where}{name} (pid {real_id(self.pid)}{self.ns_words}{gpu})"

    @property
    def ref(self) -> str:
        """"pid 623" ("pid 623 on node b"): the short name lists use."""
        return f"pid {real_id(self.pid)}" + (f" on node {self.node}" if self.node else "")


def process_facts(rec: Recording, ranks: Optional[Dict[int, Tuple[int, Optional[int]]]] = None,
                  gpu_of: Optional[Dict[int, int]] = None,
                  nodes: Optional[NodeMap] = None) -> Dict[int, ProcessFacts]:
    """Facts per process. ``ranks`` ({pid: (rank, GPU)}, from NCCL RAS) names ranks whose
    environment has no RANK; ``gpu_of`` ({pid: GPU index}, from NVML) their GPU otherwise;
    ``nodes`` names their nodes (merged traces)."""
    kids: Dict[int, List[int]] = {}
    for pid, p in rec.processes.items():
        # never its own child: a log's unnamed process is pid 0 with ppid 0
        if p.info is not None and p.info.ppid != pid:
            kids.setdefault(p.info.ppid, []).append(pid)
    out: Dict[int, ProcessFacts] = {}
    for pid in sorted(rec.processes):
        p = rec.processes[pid]
        info = p.info or ev.ProcessInfo(ts=0.0, pid=pid, ppid=0)
        role = role_of(info.cmdline, info.comm, has_children=pid in kids,
                       is_root=pid in rec.roots, environ_rank=info.environ_rank)
        rank, gpu = (ranks or {}).get(pid, (None, None))
        if rank is not None and role.kind in ("other", "launcher"):
            role = Role("rank", rank, f"rank {rank}")
        if gpu is None:
            gpu = (gpu_of or {}).get(pid)
        out[pid] = ProcessFacts(pid, info.ppid, role, info.comm, list(info.cmdline),
                                exit_text(p), sorted(kids.get(pid, [])), gpu,
                                info.pid_unknown,
                                nodes.name(pid) if nodes is not None else None,
                                threads_partial=info.threads_partial,
                                ns_pid=info.ns_pids[-1] if info.ns_pids else None)
    return out


class FdIndex:
    """Who holds what (module doc); only processes that still run are holders.
    Holders are looked up on the asker's node, but for connections between nodes
    (nodes.target_scope); inodes are node-scoped (nodes.scoped_inode)."""

    def __init__(self, rec: Recording, facts: Dict[int, ProcessFacts]) -> None:
        self.by_target: Dict[Tuple[Optional[int], str], List[Tuple[int, str]]] = {}
        self.by_inode: Dict[int, Set[int]] = {}
        for pid, p in sorted(rec.processes.items()):
            if p.info is None or facts[pid].gone is not None:
                continue
            for f in p.info.fds:
                self.by_target.setdefault((target_scope(pid, f.target), f.target),
                                          []).append((pid, f.mode or "rw"))
                if f.inode:
                    self.by_inode.setdefault(scoped_inode(pid, f.inode), set()).add(pid)

    def holders(self, target: str, mode: str = "", near: int = 0) -> List[int]:
        """Processes holding ``target`` with ``mode`` ("w": the write end of a pipe), on the
        node of pid ``near`` unless the target links nodes (module doc)."""
        key = (target_scope(near, target), target)
        return sorted({pid for pid, m in self.by_target.get(key, []) if mode in m})

    def inode_holders(self, inode: int) -> List[int]:
        """Holders of a socket inode, node-scoped (``nodes.scoped_inode``)."""
        return sorted(self.by_inode.get(inode, ()))
