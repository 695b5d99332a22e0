"""Roles of processes in a serving stack and the library helper threads that never decide a verdict.

Contract: pure functions of what /proc shows (cmdline, comm, environment rank). A role only
labels a process for the report (and helps name the root cause); verdicts never depend on it.

Facts used (see ../shared/reference): setproctitle rewrites /proc/PID/cmdline, so SGLang's
``sglang::scheduler_TP1`` and vLLM's ``VLLM::Worker_TP0`` are read from cmdline; comm is cut at 15
characters (``sglang::schedul``). libcuda, NCCL, PyTorch, gloo and ZeroMQ start threads that look
the same in every process, healthy or hung.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Dict, List, Optional, Protocol, Sequence

from ...linux.intparse import DIGIT, is_digits, parse_uint

# a rank of at most 10 ASCII digits (intparse.py): a title of "_TP" and 5,000 digits has no rank
_TP_RE = re.compile(rf"_TP({DIGIT}{{1,10}})(?!{DIGIT})")
# a title of its own that names the role and the rank ("...scheduler_TP0", "Worker_TP3"), the
# way SGLang and vLLM set them, wherever the title puts them: it says what the process is, even
# when it has children (a JIT compiler it waits for)
_SCHEDULER_RE = re.compile(r"scheduler_TP\d+", re.IGNORECASE)
_WORKER_RE = re.compile(r"worker_TP\d+", re.IGNORECASE)
_DP_RE = re.compile(rf"_(DP|PP|EP)({DIGIT}{{1,10}})(?!{DIGIT})")


@dataclass(frozen=True)
class Role:
    kind: str             # launcher, scheduler, worker, engine, detokenizer, tokenizer, rank, other
    rank: Optional[int] = None
    label: str = "other"  # what the report prints: "scheduler TP1", "launcher", ...

    def __str__(self) -> str:
        return self.label


def _title(cmdline: Sequence[str], comm: str) -> str:
    if cmdline:
        first = cmdline[0]
        # setproctitle may put the whole title in argv[0] with spaces.
        return first
    return comm


_RANK_RE = re.compile(r"(?:^|\s)(LOCAL_RANK|RANK)=([0-9]{1,10})(?![0-9])")


def parse_environ_rank(environ_rank: Optional[str]) -> Optional[int]:
    """The global rank from ProcessInfo.environ_rank: "RANK=3 LOCAL_RANK=1" -> 3; a bare "3"
    (older traces) -> 3; only LOCAL_RANK -> that; None when absent."""
    if not environ_rank:
        return None
    text = environ_rank.strip()
    if is_digits(text):
        return parse_uint(text, 10)
    found = dict(m.groups() for m in _RANK_RE.finditer(text))
    val = found.get("RANK", found.get("LOCAL_RANK"))
    return parse_uint(val, 10) if val is not None else None


def role_of(cmdline: Sequence[str], comm: str, *, has_children: bool = False,
            is_root: bool = False, environ_rank: Optional[str] = None) -> Role:
    """The role of a process from its title/cmdline (see module doc)."""
    title = _title(cmdline, comm)
    low = title.lower()
    tp = _TP_RE.search(title)
    rank = parse_uint(tp.group(1), 10) if tp else None
    suffix = "".join(f" {m.group(1)}{m.group(2)}" for m in _DP_RE.finditer(title))
    if low.startswith("sglang::scheduler") or (tp and _SCHEDULER_RE.search(title)):
        return Role("scheduler", rank, f"scheduler TP{rank}{suffix}" if rank is not None
                    else "scheduler")
    if low.startswith("sglang::detokenizer"):
        return Role("detokenizer", None, "detokenizer")
    if low.startswith("sglang::tokenizer"):
        return Role("tokenizer", None, "tokenizer")
    if low.startswith("vllm::worker") or (tp and _WORKER_RE.search(title)):
        return Role("worker", rank, f"worker TP{rank}{suffix}" if rank is not None else "worker")
    if low.startswith("vllm::enginecore") or low.startswith("vllm::engine_core") \
            or low.startswith("enginecore"):
        return Role("engine", None, "engine core")
    r = parse_environ_rank(environ_rank)
    if r is not None:
        return Role("rank", r, f"rank {r}")
    program = " ".join(a for a in (cmdline or [comm])[:3] if not a.startswith("--")).lower()
    if has_children and (is_root or "launch" in program or "serve" in program):
        return Role("launcher", None, "launcher")
    return Role("other", None, "other")


class Titled(Protocol):
    """What ``role_labels`` reads of a process (a ProcessInfo, a snapshot's process)."""
    pid: int
    ppid: int
    cmdline: Sequence[str]
    comm: str
    environ_rank: Optional[str]


def role_labels(processes: Sequence[Titled], roots: Sequence[int]) -> Dict[int, str]:
    """pid -> the label ``role_of`` gives each of ``processes`` ("scheduler TP1", "launcher"),
    a parent being a process another names as its ppid: how a trace header and a snapshot's
    evidence name them."""
    parents = {p.ppid for p in processes}
    return {p.pid: role_of(p.cmdline, p.comm, has_children=p.pid in parents,
                           is_root=p.pid in roots, environ_rank=p.environ_rank).label
            for p in processes}


# libcuda's event thread: it polls the /dev/nvidia* fds and wakes blocking-sync waits.
GPU_EVENT_THREAD = "cuda-EvtHandlr"


def is_gpu_event_thread(comm: str) -> bool:
    return comm == GPU_EVENT_THREAD


# Library threads that poll or park forever in every process of their kind (module doc).
HELPER_THREAD_PATTERNS: List[tuple] = [
    (GPU_EVENT_THREAD, "libcuda event handler (polls the GPU fds, wakes blocking-sync waits)"),
    ("cuda0*", "libcuda poller"),
    ("cuda-*", "libcuda helper"),
    ("pt_nccl_watchdg", "PyTorch NCCL watchdog"),
    ("pt_nccl_heartbt", "PyTorch NCCL heartbeat monitor"),
    ("pt_gloo_runloop", "PyTorch gloo loop"),
    ("pt_tcpstore_uv", "PyTorch TCPStore server"),
    ("pt_autograd_*", "PyTorch autograd worker"),
    ("pt_main_thread", None),  # PyTorch names the main thread; it is never a helper
    ("NCCL Proxy*", "NCCL proxy thread"),
    ("NCCL Prox*", "NCCL proxy thread"),
    ("NCCL Service*", "NCCL service thread"),
    ("NCCL Progress*", "NCCL progress thread"),
    ("NCCL RAS*", "NCCL RAS thread (keep-alives between ranks)"),
    ("NCCL UDS*", "NCCL UDS service thread"),
    ("NCCL *", "NCCL library thread"),
    ("ZMQbg/*", "ZeroMQ I/O thread"),
    ("jemalloc_bg_thd", "jemalloc background thread"),
    ("tokio-runtime-w", "tokio worker"),
]


@lru_cache(maxsize=4096)        # a job has thousands of threads and few distinct names
def helper_kind(comm: str) -> Optional[str]:
    """What library helper a thread is by its name, or None for an ordinary thread."""
    for pattern, what in HELPER_THREAD_PATTERNS:
        if fnmatchcase(comm, pattern):
            return what
    return None
