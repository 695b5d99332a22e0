"""End-of-recording probes (session.py's ``EndProbe``): after the backends detached and while
the target is still in the state it was recorded in, each reads what the recording could not
see and returns events for the trace (mutex owners, unix socket peers, file locks, the mounts
of blocked file and device calls, NCCL RAS).
They only read /proc (never write, never stop a thread); what they cannot read gives fewer
events, never an error.

Contract: ``attach_probes(native)`` -> (end probes, start probes), what ``hangtrace attach``
(and ``watch``) pass to ``session.record``; the end probes are a ``Later`` list, their modules
imported when the recording first looks at them (at its end), not before the window opens
(issue 33: the command's first trace byte). ``wait_graph_probes()`` is the first part of them.
"""
from __future__ import annotations

from typing import Callable, Iterator, List, Optional, Sequence, Tuple, Union, overload

__all__ = ["attach_probes", "wait_graph_probes", "Later"]


class Later(Sequence):
    """A list made by ``make`` on first use (iteration, length, an item), then kept."""

    def __init__(self, make: Callable[[], List]) -> None:
        self._make: Optional[Callable[[], List]] = make
        self._items: List = []

    def _list(self) -> List:
        if self._make is not None:
            self._items, self._make = self._make(), None
        return self._items

    @overload
    def __getitem__(self, i: int) -> Callable: ...

    @overload
    def __getitem__(self, i: slice) -> List: ...

    def __getitem__(self, i: Union[int, slice]) -> Union[Callable, List]:
        return self._list()[i]

    def __len__(self) -> int:
        return len(self._list())

    def __iter__(self) -> Iterator[Callable]:
        return iter(self._list())


def wait_graph_probes() -> List:
    """The wait-graph probes, NCCL RAS, the Flight Recorder and kernel stacks, in their order:
    kernel stacks last, before anything that may pause the target (py-spy --native). The
    futex owners and kernel stacks of the calls still running, and NCCL RAS (it talks to the
    target), wait for the backends to stop (probe_run.mark)."""
    from ..probe_run import mark
    from .file_locks import file_locks_probe
    from .flight_recorder import flight_recorder_probe
    from .futex_owner import futex_owner_probe
    from .kernel_stacks import kernel_stack_probe
    from .nccl_ras import nccl_ras_probe
    from .socket_peers import socket_peers_probe
    from .storage_waits import storage_waits_probe
    return [mark(futex_owner_probe, after_stop=True), socket_peers_probe, file_locks_probe,
            mark(storage_waits_probe, after_stop=True),
            mark(nccl_ras_probe, after_stop=True), flight_recorder_probe,
            mark(kernel_stack_probe, after_stop=True, deciding=True)]


def _end_probes(native: bool) -> List:
    """wait_graph_probes, then the stacks (native ones pause the target: after the stop) and
    the probes that read each process again (probe_run.mark). Stack motion, the Python
    stacks (not the native ones) and the memory run in the window's last part (``in_window``:
    record/ending.py), so that the report comes soon after the window."""
    from ..evidence import evidence_end_probe
    from ..probe_run import mark
    from ..evidence.capture import with_capture_sites
    from ..pystacks import native_stacks_probe, py_stacks_probe
    from .log_lines import log_lines_probe
    from .memory import memory_end_probe
    from .stack_motion import stack_motion_probe
    stacks = native_stacks_probe if native else py_stacks_probe
    return wait_graph_probes() + [
        mark(stack_motion_probe, per_process=True, beside=True, in_window=True),
        mark(with_capture_sites(stacks), after_stop=native, per_process=True, beside=True,
             in_window=not native, deciding=True),
        mark(log_lines_probe, per_process=True),
        mark(memory_end_probe, per_process=True, in_window=True),
        mark(evidence_end_probe, per_process=True)]


def attach_probes(native: bool = False) -> Tuple[Sequence, List]:
    """(end probes, start probes) of a recording as ``attach`` (and ``watch``) make it: the
    wait-graph probes, then Python stacks (with CUDA graph capture sites; with ``native``,
    native frames too: py-spy pauses each Python process while it unwinds; before them,
    several samples of the threads on a CPU: stack_motion.py), what the log files gained (as
    line templates: log_lines.py), the memory brought in (memory.py) and the evidence at the
    end; logs, vitals and memory at the start (the window's starting point)."""
    from ..evidence import evidence_start_probe
    from .memory import memory_start_probe
    return Later(lambda: _end_probes(native)), [evidence_start_probe, memory_start_probe]
