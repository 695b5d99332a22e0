"""The bounded types of event fields: what a trace row may hold, checked once at the edge (the
trace codec decodes rows straight into the event classes and msgspec checks these in C).

Contract:
- ``Int``: an integer of 64 bits, signed (``INT64_MIN`` .. ``INT64_MAX``): every int field of
  every event class (pids, counts, sizes, addresses, inodes), in lists and dict keys too.
- ``Time``: epoch seconds from year 1 to year 9999 (``TIME_MIN`` .. ``TIME_MAX``), what the
  analysis and the renderers can turn into a date; a duration or a timeout is a plain float.
- The nested values of evidence events have their shapes here, as TypedDicts (decoded into
  plain dicts, so their readers index them as before): a key the readers index is
  ``Required``, the others may be absent; every value typed and bounded like a field. A dict
  of another shape makes the row a bad line, as any field of a wrong type does.
"""
from __future__ import annotations

import sys
from typing import Annotated, List, Literal, Optional, Tuple, TypedDict

from msgspec import Meta

if sys.version_info >= (3, 11):
    from typing import Required
else:                                   # (pyproject: typing_extensions on 3.10 only)
    from typing_extensions import Required

__all__ = ["Int", "Time", "INT64_MIN", "INT64_MAX", "TIME_MIN", "TIME_MAX", "CaptureHow", "KlogLine",
           "LogTarget", "LoadedLib", "FdCounts", "IoctlCounts", "MappedFile", "LogTemplate",
           "FrFrame", "FrEntry", "FrGroup", "FrStatus"]

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
TIME_MIN = -62135510400.0          # 0001-01-02 00:00:00 UTC
TIME_MAX = 253402214399.0          # 9999-12-30 23:59:59 UTC
# A day inside either end, so that every time zone's local date exists. Time is what ``ts``,
# ``since``, ``mtime`` hold (a file's mtime may be before 1970). Int: msgspec alone decodes
# an int of any size (a 5,000-digit ``cpu`` or ``wr`` field reached the rules). A duration
# or a timeout is a plain float (finite, any size).

Int = Annotated[int, Meta(ge=INT64_MIN, le=INT64_MAX)]
Time = Annotated[float, Meta(ge=TIME_MIN, le=TIME_MAX)]

# events.evidence.CaptureSite.how: how a CUDA graph capture was seen
CaptureHow = Literal["with-block", "capture-call", "runner"]

# Nested values are plain JSON (lists, dicts of str/int/float/None); a fixed-length record is
# a tuple: a row round-trips as it is when it is made with one.
# events.evidence.KernelLog.lines: [epoch ts, text]
KlogLine = Tuple[Time, str]

# events.evidence.MemoryProgress.files: [path, resident bytes, file size]
MappedFile = Tuple[str, Int, Int]


class LogTarget(TypedDict, total=False):
    """events.evidence.LogTargets.targets: one fd a process writes its output to."""
    fd: Required[Int]
    role: str
    kind: Optional[str]
    path: str
    size: Optional[Int]
    mtime: Optional[Time]
    why: str


class LoadedLib(TypedDict, total=False):
    """events.evidence.LoadedLibs.libs: one library's version."""
    name: Required[str]
    version: Optional[str]
    detail: Optional[str]
    path: Optional[str]
    source: Optional[str]


class FdCounts(TypedDict, total=False):
    """events.counts.ThreadCounts.per_fd: one fd's writes and reads (counts.FD_KEYS)."""
    fd: Required[Int]
    kind: Optional[str]
    target: Optional[str]
    writes: Int
    wbytes: Int
    wmin: Int
    wmax: Int
    wsmall: Int
    wsbytes: Int
    reads: Int
    rbytes: Int
    first: Optional[Time]
    last: Optional[Time]


class IoctlCounts(TypedDict, total=False):
    """events.counts.ThreadCounts.ioctls: the ioctl calls of one (fd, request)."""
    fd: Required[Int]
    kind: Optional[str]
    target: Optional[str]
    request: Required[Int]
    calls: Required[Int]


class LogTemplate(TypedDict, total=False):
    """events.evidence.LogLines.templates: one line shape (record/probes/log_lines.py)."""
    text: Required[str]
    count: Int
    before: Int
    changes: List[Int]
    first: List[float]
    last: List[float]


class FrFrame(TypedDict, total=False):
    """A Flight Recorder entry's frame (tracefile/fr_dump.py writes every key)."""
    name: str
    filename: str
    line: Optional[Int]


class FrEntry(TypedDict, total=False):
    """events.stacks.FlightRecorderDump.entries: one collective (fr_dump.normalize)."""
    record_id: Optional[Int]
    pg_id: Optional[Int]
    collective_seq_id: Optional[Int]
    p2p_seq_id: Optional[Int]
    op_id: Optional[Int]
    time_created_ns: Optional[Int]
    time_discovered_started_ns: Optional[Int]
    time_discovered_completed_ns: Optional[Int]
    timeout_ms: Optional[Int]
    profiling_name: str
    state: str
    thread_name: str
    retired: bool
    is_p2p: bool
    process_group: List[str]
    input_sizes: List[List[Int]]
    output_sizes: List[List[Int]]
    input_dtypes: List[str]
    output_dtypes: List[str]
    frames: List[FrFrame]


class FrGroup(TypedDict, total=False):
    """events.stacks.FlightRecorderDump.pg_config: one process group."""
    key: str
    name: str
    desc: str
    ranks: str


class FrStatus(TypedDict, total=False):
    """events.stacks.FlightRecorderDump.pg_status: one group's last collectives (-1: none)."""
    pg_id: str
    last_enqueued_collective: Optional[Int]
    last_started_collective: Optional[Int]
    last_completed_collective: Optional[Int]
