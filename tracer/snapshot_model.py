"""A snapshot of process trees as plain data (what ``hangtrace snapshot`` prints), and its JSON.

Contract: ``Snapshot`` holds what record/snapshot.py read of each process and thread at one
instant; it never reads /proc. ``to_json()`` is the stable machine form
{"format": "hangtrace.snapshot/1", ...}; render/snapshot.py draws it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from msgspec import structs

from .events import FdInfo

__all__ = ["ThreadSnapshot", "ProcessSnapshot", "Snapshot", "STATE_NAMES", "FORMAT"]

FORMAT = "hangtrace.snapshot/1"

# /proc/PID/stat state letters (fs/proc/array.c task_state_array).
STATE_NAMES = {"R": "running", "S": "sleeping", "D": "disk sleep", "T": "stopped",
               "t": "tracing stop", "X": "dead", "Z": "zombie", "P": "parked", "I": "idle"}


@dataclass
class ThreadSnapshot:
    """One thread. ``syscall`` is the call name, "running" or "" (blocked outside a call or
    unreadable); ``blocking`` is decode_blocking's text ("futex(0x7f.., WAIT_BITSET) no
    timeout"); ``has_timeout`` False marks a wait that only another thread or process can end.
    """
    tid: int
    comm: str
    state: str
    utime: float
    stime: float
    wchan: str = ""
    syscall: str = ""
    syscall_raw: str = ""
    blocking: str = ""
    waits_on: str = ""
    has_timeout: Optional[bool] = None
    stack: List[str] = field(default_factory=list)   # Python frames (--stacks), innermost first
    kernel_stack: List[str] = field(default_factory=list)   # --stacks: D state or stuck threads
    native_stack: List[str] = field(default_factory=list)   # --native: "func (library)"
    owns_gil: Optional[bool] = None          # --stacks: py-spy says it holds the GIL


@dataclass
class ProcessSnapshot:
    pid: int
    ppid: int
    comm: str
    cmdline: List[str]
    state: str
    exit_code: Optional[int] = None
    start_time: Optional[float] = None
    environ_rank: Optional[str] = None
    threads: List[ThreadSnapshot] = field(default_factory=list)
    fds: List[FdInfo] = field(default_factory=list)
    fds_readable: bool = True
    listening: List[str] = field(default_factory=list)


@dataclass
class Snapshot:
    ts: float
    host: str
    roots: List[int]
    processes: List[ProcessSnapshot] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    evidence: Optional[Dict[str, Any]] = None

    def listening(self) -> List[Tuple[int, str]]:
        """(pid, "tcp 127.0.0.1:8000") for every listening socket in the trees."""
        return [(p.pid, s) for p in self.processes for s in p.listening]

    def to_json(self) -> Dict[str, Any]:
        return {"format": FORMAT, "ts": self.ts, "host": self.host, "roots": self.roots,
                "processes": [_process_json(p) for p in self.processes], "errors": self.errors,
                "evidence": self.evidence}


def _process_json(p: Any) -> Dict[str, Any]:
    """A process of the snapshot as JSON: its fields, the fd table's rows as objects."""
    out = asdict(p)
    out["fds"] = [structs.asdict(f) for f in p.fds]
    return out
