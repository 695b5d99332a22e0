"""Events that carry the evidence an engineer checks by hand (issue 14): process vitals, log
targets, cgroups, kernel log lines of the NVIDIA driver, GPU health from NVML, library
versions, CUDA graph activity, and one-line notes on what could not be read.

Contract:
- Same rules as events/__init__.py: an event states what was read and where (``source``), never what it
  means; tracer/analysis/evidence*.py turns them into findings. Times are epoch seconds.
- ``phase`` says when a reading was taken: "start" / "end" of a recording, or "snapshot".
- Importing this module registers the classes in ``events.EVENT_CLASSES`` (the trace file maps
  fields by name through the header's schema, so old traces still read and new fields may be
  added later). tracefile/format.py imports it; nothing else needs to.
- Nested values are plain JSON, of the shapes in shapes.py, checked when read.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from msgspec import field

from .. import events as _events
from . import Event
from .shapes import (CaptureHow, Int, KlogLine, LoadedLib, LogTarget, LogTemplate,
                     MappedFile, Time)

__all__ = ["ProcessVitals", "LogTargets", "LogLines", "MemoryProgress", "KernelLog", "GpuHealth", "LoadedLibs",
           "CaptureSite", "CudaDriverCalls", "EvidenceNote", "ProcessCgroup", "EVIDENCE_TYPES"]


class ProcessVitals(Event, tag="vit"):
    """/proc/PID/stat and status: when the process started, its resident memory and the CPU
    time of all its threads (exited ones included), in seconds. (Not "threads": events/__init__.py
    encodes a field of that name as a tid -> comm map.)"""
    pid: Int
    start_time: Optional[Time] = None
    rss_bytes: Optional[Int] = None
    cpu_s: Optional[float] = None
    num_threads: Optional[Int] = None
    phase: str = ""


class LogTargets(Event, tag="logs"):
    """Where a process's output goes: fds 1 and 2 and the regular files it has open for writing
    as logs. Each entry: {"fd", "role" ("stdout", "stderr", "log"), "kind" (events/__init__.py fd kind),
    "path", "size" (bytes, files only), "mtime" (last modification: the last write for files,
    pipes and ttys), "why" (why size/mtime are missing)}. ``why`` (event level): the fd table
    could not be read."""
    pid: Int
    targets: List[LogTarget] = field(default_factory=list)
    phase: str = ""
    why: str = ""


class KernelLog(Event, tag="klog"):
    """Lines of the NVIDIA kernel driver (NVRM) from the kernel log since ``since``: each
    (epoch ts, text). ``scanned`` records were read; ``why`` says why the log could not be read
    (no /dev/kmsg, no permission) or was read only in part (the bound was reached)."""
    source: str = "/dev/kmsg"
    since: Optional[Time] = None
    lines: List[KlogLine] = field(default_factory=list)
    scanned: Int = 0
    why: str = ""


class GpuHealth(Event, tag="gpuh"):
    """One GPU's health counters through NVML (tracer/gpu/nvml_health.py). Units: mW, MHz, deg C.
    ``throttle`` is NVML's clock-event (throttle) reason bitmask. ECC counts are volatile (since
    the driver loaded); retired pages (pre-Hopper) and remapped rows (Ampere and later) are
    lifetime counts. ``missing`` maps a field name to why NVML gave no value."""
    gpu: Int
    uuid: str = ""
    name: str = ""
    pci_bus: str = ""
    power_mw: Optional[Int] = None
    power_limit_mw: Optional[Int] = None
    sm_clock_mhz: Optional[Int] = None
    sm_clock_max_mhz: Optional[Int] = None
    throttle: Optional[Int] = None
    temperature_c: Optional[Int] = None
    ecc_corrected: Optional[Int] = None
    ecc_uncorrected: Optional[Int] = None
    retired_sbe: Optional[Int] = None
    retired_dbe: Optional[Int] = None
    retired_pending: Optional[bool] = None
    remapped_corr: Optional[Int] = None
    remapped_unc: Optional[Int] = None
    remap_pending: Optional[bool] = None
    remap_failed: Optional[bool] = None
    pcie_replays: Optional[Int] = None
    missing: Dict[str, str] = field(default_factory=dict)
    phase: str = ""


class LoadedLibs(Event, tag="libs"):
    """Versions of the libraries a process has mapped (/proc/PID/maps). Each entry: {"name"
    ("nccl", "libcuda", "cudart", "torch", ...), "version", "detail" (e.g. "+cuda12.4"), "path",
    "source" (where the version was read)}. ``pid`` 0 holds host facts (the NVIDIA kernel
    module). ``why``: the maps could not be read."""
    pid: Int
    libs: List[LoadedLib] = field(default_factory=list)
    why: str = ""


class CaptureSite(Event, tag="cap"):
    """A thread whose Python stack shows CUDA graph capture (tracer/record/evidence/capture.py).
    ``how``: "with-block" (a frame executes inside ``with torch.cuda.graph(...)``, checked in the
    source at that line), "capture-call" (a frame of torch's capture_begin/capture_end or the
    graph context manager's __enter__/__exit__), "runner" (a frame of a serving stack's CUDA
    graph runner). ``frame`` is "func (file:line)"; ``detail`` the source text that decided."""
    pid: Int
    tid: Int
    how: CaptureHow
    frame: str = ""
    detail: str = ""


class CudaDriverCalls(Event, tag="cug"):
    """libcuda driver calls of one thread counted by uprobes between ``since`` and ``ts``
    (tracer/record/backends/ebpf/cuda_uprobes.py): stream captures begun and ended, graphs
    launched; ``open_streams`` are streams (hex) whose last capture call was a begin (capturing
    at ``ts``, when the begin was seen in the window). Kernels launched, copies made, syncs
    entered and returned (``syncs_done`` with CUDA_SUCCESS, ``syncs_failed`` with an error),
    stream and event queries answered ready or not; ``in_sync_since`` is when the thread entered
    a sync that had not returned at ``ts`` (None when it was in none it was seen entering).
    ``work_probed``: the kernel, copy, sync and query families were probed (False in traces
    from before them, which read their counts as 0 and None). NCCL (``nccl_probed``: its
    process's libnccl was probed): ``collectives`` called, the ``last_collective``'s time,
    ``last_op`` the last NCCL call ("AllReduce", "GroupEnd", "CommInitRank", ...),
    ``in_nccl_since`` when it entered an NCCL call it is still in; ``last_own_work`` the last
    kernel, graph or copy it launched outside NCCL (its own work, not a collective's)."""
    pid: Int
    tid: Int
    since: Time = 0.0
    begins: Int = 0
    ends: Int = 0
    launches: Int = 0
    open_streams: List[str] = field(default_factory=list)
    last_begin: Optional[Time] = None
    last_end: Optional[Time] = None
    kernels: Int = 0
    copies: Int = 0
    syncs: Int = 0
    syncs_done: Int = 0
    syncs_failed: Int = 0
    queries_ready: Int = 0
    queries_not_ready: Int = 0
    in_sync_since: Optional[Time] = None
    last_sync_done: Optional[Time] = None
    last_ready: Optional[Time] = None
    work_probed: bool = False
    nccl_probed: bool = False
    collectives: Int = 0
    last_collective: Optional[Time] = None
    last_op: str = ""
    in_nccl_since: Optional[Time] = None
    last_own_work: Optional[Time] = None


class EvidenceNote(Event, tag="evn"):
    """One datum that could not be gathered, and why: ``what`` is "gpu", "kmsg", "libs", "logs",
    "capture-uprobes", ...; ``pid`` when it concerns one process."""
    what: str
    why: str = ""
    pid: Optional[Int] = None


class LogLines(Event, tag="logl"):
    """What a process appended to a log file during the window, as line templates, never the
    text's numbers (record/probes/log_lines.py makes them): ``fd`` and ``path`` of the file,
    ``appended`` bytes between the start and the end of the window (``read``: how many of them
    were read, the newest), ``lines`` in them. ``templates``: one per distinct line shape,
    each {"text" (numbers masked as <N>, times as <T>), "count" (lines of this shape in the
    window), "before" (in the lines just before the window), "changes" (per <N> slot, how often
    its value differed from the same shape's line before), "first" (the slot values of the
    shape's last line before the window, else of its first line in it), "last" (of its last
    line)}. ``why``: why nothing was read."""
    pid: Int
    fd: Int
    path: str = ""
    appended: Int = 0
    read: Int = 0
    lines: Int = 0
    templates: List[LogTemplate] = field(default_factory=list)
    why: str = ""


class MemoryProgress(Event, tag="memp"):
    """Memory a process brought in, at the start or the end of a window (``phase``): per
    thread (minor, major) page faults so far (/proc/PID/task/TID/stat), the resident size and
    bytes read from storage (/proc/PID/io read_bytes), and its largest file mappings, each
    (path, resident bytes, file size) (/proc/PID/smaps summed per file). ``reads``: per thread
    bytes read from storage so far (/proc/PID/task/TID/io read_bytes: the thread whose faults or
    reads brought them in), for a process of more than one thread. ``cpu``: per thread CPU
    seconds so far (utime + stime of the same task/TID/stat read): what a thread ran between the
    ends, measured where a tracer's timing only bounds it (analysis/threads/state.cpu_use)."""
    pid: Int
    phase: str = ""
    faults: Dict[Int, Tuple[Int, Int]] = field(default_factory=dict)
    rss_bytes: Optional[Int] = None
    read_bytes: Optional[Int] = None
    files: List[MappedFile] = field(default_factory=list)
    why: str = ""
    reads: Dict[Int, Int] = field(default_factory=dict)
    cpu: Dict[Int, float] = field(default_factory=dict)


class ProcessCgroup(Event, tag="cgrp"):
    """Where /proc/PID/cgroup puts a process (tracer/linux/cgroup.py): its cgroup ``path`` (the
    cgroup v2 one, or the v1 line that names a container), the hierarchy's ``version`` (2 or
    1), and the container that path names: ``container_id`` (64 hex; "" in none),
    ``runtime`` ("containerd", "cri-o", "docker", "podman"; None where the path does not
    name it), a Kubernetes pod's ``pod_uid`` and ``qos`` ("guaranteed", "burstable",
    "besteffort"). ``why``: /proc/PID/cgroup could not be read."""
    pid: Int
    path: str = ""
    version: Int = 2
    container_id: str = ""
    runtime: Optional[str] = None
    pod_uid: Optional[str] = None
    qos: Optional[str] = None
    phase: str = ""
    why: str = ""


EVIDENCE_TYPES = (ProcessVitals, LogTargets, KernelLog, GpuHealth, LoadedLibs, CaptureSite,
                  CudaDriverCalls, EvidenceNote, LogLines, MemoryProgress, ProcessCgroup)

_events.register(*EVIDENCE_TYPES)
