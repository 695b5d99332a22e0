"""Events of the stacks where hangs live (issue 24): kernel stacks of stuck threads, native
frames, where a Python process keeps its GIL, and PyTorch Flight Recorder dumps.

Contract:
- Same rules as events/__init__.py: an event states what was read and where, never what it
  means (analysis/vocab/stack_facts.py and analysis/job/flight_recorder.py judge them).
- A reading that failed has ``error`` (one line: why); a failure that concerns every thread of
  a process (no permission, the tool is missing) has ``tid`` 0.
- Nested values are plain JSON (lists, dicts of str/int/float/bool/None), so rows round-trip.
- Importing this module registers the classes (tracefile/format.py imports it).
"""
from __future__ import annotations

from typing import List, Optional

from msgspec import field

from . import Event, register
from .shapes import FrEntry, FrGroup, FrStatus, Int, Time

__all__ = ["KernelStack", "NativeStack", "PythonRuntime", "FlightRecorderDump", "StackSamples",
           "STACK_TYPES"]


class KernelStack(Event, tag="kst"):
    """/proc/PID/task/TID/stack of one thread at the end of a recording (or a snapshot), read
    because ``reason`` ("D state", "blocked all window in ioctl(/dev/nvidia-uvm)"). ``frames``
    are the kernel's "function+0xoff/0xsize", innermost first; ``state`` the thread's state
    letter when it was read, ``wchan`` its wait channel. ``error``: why no frame was read
    (not root, the kernel hides stacks, the thread was running)."""
    pid: Int
    tid: Int
    state: str = ""
    wchan: str = ""
    reason: str = ""
    frames: List[str] = field(default_factory=list)
    error: str = ""


class NativeStack(Event, tag="nst"):
    """One thread's native (C/C++) frames, innermost first: ``frames`` "function (library)"
    (or "0x7f..+0x1a2 (library)" where no symbol covers the address), ``libs`` the path of each
    frame's mapped file ("" for a Python frame that py-spy interleaves). ``source``: "py-spy"
    (``py-spy dump --native``: the process was paused while it read) or "stack-scan" (the
    thread's pc and the return addresses found on its stack, read from /proc/PID/mem without
    stopping it: candidates, not an unwind) or "strace -k" (the stack strace printed after the
    call an imported log ends in). ``error``: why none were gathered."""
    pid: Int
    tid: Int
    frames: List[str] = field(default_factory=list)
    libs: List[str] = field(default_factory=list)
    source: str = ""
    error: str = ""


class PythonRuntime(Event, tag="pyrt"):
    """Where CPython's ``_PyRuntime`` lies in process ``pid``: ``addr`` (absolute) and ``size``
    bytes, from the ELF symbol of ``binary`` (the python executable or libpython) and the load
    address in /proc/PID/maps. The main interpreter's GIL (its mutex and conditions) lies in
    it in CPython 3.9 to 3.14. ``error``: why it could not be found."""
    pid: Int
    addr: Int = 0
    size: Int = 0
    binary: str = ""
    error: str = ""


class FlightRecorderDump(Event, tag="frd"):
    """One rank's PyTorch Flight Recorder dump, as read (tracefile/fr_dump.py): ``path``,
    ``rank`` (from the file name's suffix), ``pid`` of the traced process whose environment
    named it (0 when read from a directory alone), ``mtime`` and ``size`` of the file.
    ``version``, ``comm_lib_version`` as the dump has them; ``pg_config`` one dict per group
    ({"key", "name", "desc", "ranks"}: ranks as the dump writes them, "[0, 1]"), ``pg_status``
    one per group ({"pg_id", "last_enqueued_collective", "last_started_collective",
    "last_completed_collective"}: -1 when none); ``entries`` its collectives, oldest
    first, each a dict of the known keys (record_id, pg_id, process_group [name, desc],
    collective_seq_id, p2p_seq_id, op_id, profiling_name, input_sizes, output_sizes,
    input_dtypes, output_dtypes, state, time_created_ns, time_discovered_started_ns,
    time_discovered_completed_ns, retired, timeout_ms, is_p2p, thread_name, frames [{"name",
    "filename", "line"}]), bounded (``dropped``: entries left out, the oldest). ``error``: why
    it could not be read (one line)."""
    path: str
    rank: Optional[Int] = None
    pid: Int = 0
    mtime: Optional[Time] = None
    size: Int = 0
    version: str = ""
    comm_lib_version: str = ""
    pg_config: List[FrGroup] = field(default_factory=list)
    pg_status: List[FrStatus] = field(default_factory=list)
    entries: List[FrEntry] = field(default_factory=list)
    dropped: Int = 0
    error: str = ""


class StackSamples(Event, tag="pyss"):
    """Several Python stacks of one thread that was on a CPU at the end of a recording, taken
    ``span`` seconds apart in all (record/probes/stack_motion.py): ``samples`` are frame lists
    as PyStack's (innermost first, at most the innermost few), oldest first."""
    pid: Int
    tid: Int
    samples: List[List[str]] = field(default_factory=list)
    span: float = 0.0


STACK_TYPES = (KernelStack, NativeStack, PythonRuntime, FlightRecorderDump, StackSamples)

register(*STACK_TYPES)
