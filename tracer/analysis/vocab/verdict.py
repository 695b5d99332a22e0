"""The typed vocabulary every stage shares: verdicts, how a process waits, notes, and what a
thread rule returns.

Contract: ``Verdict`` is the verdict of a thread, process or tree (a ``str`` enum: it prints
and serialises as its value, "busy-waiting"); ``BlockKind`` says what a blocked process waits
on (the process rules derive it from the wait-for graph; the tree rules read it, never a rule
name); ``Note`` is a report note with a typed ``kind``. ``ThreadVerdict`` is what a thread rule
returns (verdict, the rule that fired, its evidence, and typed facts: the wait, CPU use, whether
the thread waits for the GPU; threads/context.py holds what it is given). Every stage imports
these from here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import List, Optional

from .waits import CpuUse, Wait


class StrEnum(str, Enum):
    """A ``str`` enum that prints, formats, hashes and serialises as its value."""
    __hash__ = str.__hash__

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Verdict(StrEnum):
    PROGRESSING = "progressing"
    BUSY = "busy-waiting"
    BLOCKED = "blocked"
    DEADLOCKED = "deadlocked"
    IDLE = "idle"
    EXITED = "exited"
    UNKNOWN = "unknown"


PROGRESSING, BUSY, BLOCKED, DEADLOCKED = (Verdict.PROGRESSING, Verdict.BUSY, Verdict.BLOCKED,
                                          Verdict.DEADLOCKED)
IDLE, EXITED, UNKNOWN = Verdict.IDLE, Verdict.EXITED, Verdict.UNKNOWN
# The thread rule of a thread in uninterruptible sleep (D) all the window (threads/stacks.py);
# the wait-for graph makes its wait owed (waitgraph/fd_waits.py).
D_RULE = "uninterruptible-sleep"
ACTIVE = frozenset({PROGRESSING, BUSY, IDLE, UNKNOWN})   # a thread that can still act


class BlockKind(StrEnum):
    """What the waits of a blocked process lead to (verdicts/process.py, from the graph)."""
    GPU = "gpu"                  # a blocking-sync wait that the GPU will end
    COLLECTIVE = "collective"    # a collective that waits for other ranks
    PEERS = "peers"              # other traced processes that can still act
    OUTSIDE = "outside"          # nothing in the tree: input from outside
    STUCK = "stuck"              # nothing that can act: a cycle or a dead end across processes
    CLOSED = "closed"            # every thread blocked inside the process, none runs
    UNKNOWN_WAKER = "unknown-waker"  # a wait inside the process that no thread at work can end
    STOPPED = "stopped"          # stopped by a signal (SIGSTOP, job control)


class NoteKind(StrEnum):
    GPU = "gpu"                          # NVML findings
    INPUT = "input"                      # what the log or the backends could not show
    STACKS = "stacks"                    # py-spy could not take stacks
    PARTIAL_DEADLOCK = "partial-deadlock"  # a deadlock among some threads while the tree goes on
    RECORDING = "recording"              # the recording's own trouble (ended early, errors)
    JOB = "job"                          # what the job itself said (NCCL RAS)
    PROGRESS = "progress"                # the progress signals looked at (progress/still.py)


@dataclass(frozen=True)
class Note:
    kind: NoteKind
    text: str


SPIN_CPU = 0.5            # on CPU at least this fraction of the window with nothing to show
PERIODIC_MIN_WAKEUPS = 3  # timed waits that ran out, at least this many ...
PERIODIC_MIN_RATE = 0.2   # ... and this often per second
YIELD_MIN_RATE = 50.0
POLL_MIN_RATE = 5.0       # timed wake-ups a second of a loop that only looks again: a poller
# thread rules that find progress in work that writes nothing (issue 30): the tree is slow, not
# hung, and its headline says so (verdicts/tree.py)
SILENT_WORK_RULES = frozenset({"loads-memory", "code-moves", "gpu-work-completes",
                               "gpu-computes"})
SLOW_NOT_HUNG = "slow, not hung (nothing is written, but the work advances): "
WAIT_NAMES = frozenset({"futex", "poll", "ppoll", "select", "pselect6", "epoll_wait",
                        "epoll_pwait", "epoll_pwait2", "nanosleep", "clock_nanosleep",
                        "sched_yield", "restart_syscall", "rt_sigtimedwait", "rt_sigreturn"})


@dataclass
class ThreadVerdict:
    verdict: Verdict
    rule: str
    evidence: List[str] = field(default_factory=list)
    wait: Optional[Wait] = None
    cpu: Optional[CpuUse] = None
    helper: Optional[str] = None
    parked: bool = False         # one of a pool of identical waits (threads/pools.py)
    gpu_wait: bool = False       # it waits for the GPU (spin-sync or yield-sync)
    ticks: bool = False          # a periodic loop with nothing to show (watchdog, heartbeat)
    stopped: bool = False        # stopped by a signal (state T): it runs nothing until SIGCONT
    polls: bool = False          # ticks fast, only to look again (no signal, no output)

    @property
    def decides(self) -> bool:
        """Whether this thread may decide its process's verdict (library helpers and threads
        folded into a pool do not; a ticking thread decides only when nothing else does)."""
        return self.helper is None and not self.parked
