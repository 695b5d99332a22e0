"""End-of-recording probes (session.py's ``EndProbe``): after the backends detached and while
the target is still in the state it was recorded in, each reads what the recording could not
see and returns events for the trace (mutex owners, unix socket peers, file locks, NCCL RAS). They only read /proc (never write, never stop a thread);
what they cannot read gives fewer events, never an error.

``DEFAULT_PROBES`` is what ``hangtrace attach`` passes to ``session.record(end_probes=...)``.
"""
from __future__ import annotations

from typing import List, Tuple

from .file_locks import file_locks_probe
from .flight_recorder import flight_recorder_probe
from .futex_owner import futex_owner_probe
from .kernel_stacks import kernel_stack_probe
from .log_lines import log_lines_probe
from .memory import memory_end_probe, memory_start_probe
from .stack_motion import stack_motion_probe
from .nccl_ras import nccl_ras_probe
from .socket_peers import socket_peers_probe

# Kernel stacks last: before anything that may pause the target (py-spy --native).
DEFAULT_PROBES: List = [futex_owner_probe, socket_peers_probe, file_locks_probe, nccl_ras_probe,
                        flight_recorder_probe, kernel_stack_probe]


def attach_probes(native: bool = False) -> Tuple[List, List]:
    """(end probes, start probes) of a recording as ``attach`` (and ``watch``) make it: the
    wait-graph probes, NCCL RAS and kernel stacks, then Python stacks (with CUDA graph capture
    sites; with ``native``, native frames too: py-spy pauses each Python process while it
    unwinds; before them, several samples of the threads on a CPU: stack_motion.py), what the
    log files gained (as line templates: log_lines.py), the memory brought
    in (memory.py) and the evidence at the end; logs, vitals and memory at the start (the
    window's starting point)."""
    from ..evidence import evidence_end_probe, evidence_start_probe
    from ..evidence.capture import with_capture_sites
    from ..pystacks import native_stacks_probe, py_stacks_probe
    stacks = native_stacks_probe if native else py_stacks_probe
    return (list(DEFAULT_PROBES) + [stack_motion_probe, with_capture_sites(stacks),
                                    log_lines_probe,
                                    memory_end_probe, evidence_end_probe],
            [evidence_start_probe, memory_start_probe])

__all__ = ["DEFAULT_PROBES", "attach_probes", "futex_owner_probe", "socket_peers_probe",
           "file_locks_probe", "nccl_ras_probe", "kernel_stack_probe", "flight_recorder_probe"]
