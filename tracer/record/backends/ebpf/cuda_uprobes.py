"""libcuda driver calls of the traced tree, counted by uprobes (bpf/cuda_calls.bpf.c, loaded as
the eBPF backend's): graph captures and launches, kernel launches, copies, and the
synchronizations and queries that say whether the GPU's work completed.

Contract (on top of base.py):
- ``CudaUprobeBackend(loader=None)``: as EbpfBackend's ``loader``; ``check()``: None when a
  loader can load the uprobe program here, else one line why not (nothing loaded to decide).
- ``start(targets, emit)`` probes the libcuda and libnccl the traced processes map
  (``FAMILIES``, ``NCCL_FAMILIES``; ``start`` says how); files not read as ELF: one note.
- ``stop()`` (idempotent) emits one ``CudaDriverCalls`` per thread that made such a call (times
  in epoch) and detaches every probe in a thread of its own (``_cleanup``). Evidence, never a
  verdict. Cost: each probed call traps into the kernel once (twice with its uretprobe).
"""
from __future__ import annotations

import ctypes as ct
import re
import threading
import time
from typing import Dict, List, Optional, Set, Tuple

from ....events.evidence import CudaDriverCalls, EvidenceNote
from ....linux import cancel
from ....linux.elfsyms import function_symbols
from ...evidence.libs import identify, mapped_files, may_map, parse_maps
from ..base import Backend, Emit, TargetSet
from .env import ebpf_problem
from .loader import Program
from .programs import load_cuda_calls

__all__ = ["CudaUprobeBackend", "FAMILIES", "NCCL_FAMILIES", "NCCL_OPS", "library_paths",
           "with_cuda_uprobes", "probe_sites"]

# (entry point of bpf/cuda_calls.bpf.c, the symbols it is attached to, as a uretprobe)
FAMILIES: List[Tuple[str, str, bool]] = [
    ("on_begin", r"^cuStreamBeginCapture(_v2)?(ToGraph)?(_ptsz)?$", False),
    ("on_end", r"^cuStreamEndCapture(_ptsz)?$", False),
    ("on_launch", r"^cuGraphLaunch(_ptsz)?$", False),
    ("on_kernel", r"^cuLaunch(Cooperative)?Kernel(Ex)?(_ptsz)?$", False),
    ("on_copy", r"^cuMemcpy[A-Za-z0-9]*(_v2)?(_ptds|_ptsz)?$", False),
    ("on_sync", r"^(cuCtxSynchronize(_v2)?|cuStreamSynchronize(_ptsz)?|cuEventSynchronize)$",
     False),
    ("on_sync_ret", r"^(cuCtxSynchronize(_v2)?|cuStreamSynchronize(_ptsz)?|cuEventSynchronize)$",
     True),
    ("on_query_ret", r"^(cuStreamQuery(_ptsz)?|cuEventQuery)$", True),
]
# the NCCL_* numbers of bpf/cuda_calls.bpf.c, in order: the names CudaDriverCalls.last_op takes
NCCL_OPS = ("AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter", "Send", "Recv",
            "AlltoAll", "Gather", "Scatter", "GroupEnd", "CommInitRank")
_NCCL_CALLS = r"^p?nccl(AllReduce|Bcast|Broadcast|Reduce|AllGather|ReduceScatter|Send|Recv|" \
              r"AlltoAll|AllToAll|Gather|Scatter|GroupEnd|CommInitRank(Config|Scalable)?)$"
NCCL_FAMILIES: List[Tuple[str, str, bool]] = [
    ("on_nccl_allreduce", r"^p?ncclAllReduce$", False),
    ("on_nccl_broadcast", r"^p?nccl(Bcast|Broadcast)$", False),
    ("on_nccl_reduce", r"^p?ncclReduce$", False),
    ("on_nccl_allgather", r"^p?ncclAllGather$", False),
    ("on_nccl_reducescatter", r"^p?ncclReduceScatter$", False),
    ("on_nccl_send", r"^p?ncclSend$", False),
    ("on_nccl_recv", r"^p?ncclRecv$", False),
    ("on_nccl_alltoall", r"^p?nccl(AlltoAll|AllToAll)$", False),
    ("on_nccl_gather", r"^p?ncclGather$", False),
    ("on_nccl_scatter", r"^p?ncclScatter$", False),
    ("on_nccl_group", r"^p?ncclGroupEnd$", False),
    ("on_nccl_init", r"^p?ncclCommInitRank(Config|Scalable)?$", False),
    ("on_nccl_ret", _NCCL_CALLS, True),
]
SYNC_S = 0.5


class CuCount(ct.Structure):
    """struct cu_count of bpf/cuda_calls.bpf.c (value of "counts", key tgid << 32 | tid)."""
    _fields_ = [(n, ct.c_uint64) for n in (
        "begins", "ends", "launches", "last_begin_ns", "last_end_ns", "kernels", "copies",
        "syncs", "syncs_done", "syncs_failed", "queries_ready", "queries_not_ready", "in_sync",
        "sync_enter_ns", "last_sync_done_ns", "last_ready_ns", "collectives",
        "last_collective_ns", "last_op", "in_nccl", "nccl_enter_ns", "last_own_work_ns")]


class CuStreamKey(ct.Structure):
    """struct cu_stream_key."""
    _fields_ = [("tgid", ct.c_uint32), ("pad", ct.c_uint32), ("stream", ct.c_uint64)]


class CuStream(ct.Structure):
    """struct cu_stream."""
    _fields_ = [("tid", ct.c_uint32), ("capturing", ct.c_uint32), ("ts_ns", ct.c_uint64)]


def probe_sites(path: str, families: Optional[List[Tuple[str, str, bool]]] = None
                ) -> List[Tuple[str, str, int, bool]]:
    """(entry point, symbol, file offset, uretprobe) for every symbol of ``families`` (default
    ``FAMILIES``) that ``path`` defines (read from the file: linux/elfsyms.py), one per address
    and entry point, aliases skipped. The sync and query families get a uretprobe too, which
    reads the CUresult; every NCCL call one, which ends the thread's time inside NCCL. Uprobes
    attach to the file's inode, for every process that maps it."""
    syms = function_symbols(path)
    families = FAMILIES if families is None else families
    # one pass over the names, each matched once against every family's pattern: a library
    # of 10**6 names (a target's) took a sort and a match per family and name, minutes
    anyone = re.compile("|".join(f"(?:{regex})" for _, regex, _ in families))
    names = sorted(n for n in cancel.checked(syms) if anyone.match(n))
    out = []
    for fn, regex, ret in families:
        seen: Set[int] = set()
        for name in names:
            addr, offset = syms[name]
            if re.match(regex, name) and addr not in seen:
                seen.add(addr)
                out.append((fn, name, offset, ret))
    return out


def library_paths(pids: List[int], names: Tuple[str, ...] = ("libcuda",), root: str = "/proc"
                  ) -> Dict[str, Dict[str, Tuple[str, Set[int]]]]:
    """{library name: {"dev:inode": (/proc/PID/map_files/RANGE, pids that map it)}} of every
    library of ``names`` (evidence/libs.identify's) the processes map (one per file): the very
    file mapped, in a container's root or unlinked since (a driver upgraded under a running
    job), never what a path names now."""
    out: Dict[str, Dict[str, Tuple[str, Set[int]]]] = {n: {} for n in names}
    for pid in pids:
        try:
            with open(f"{root}/{pid}/maps", "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        if not may_map(text, names):
            continue
        mapped = mapped_files(text, pid, root)
        for path, key in parse_maps(text):
            name = identify(path)
            if name in out and key in mapped:
                out[name].setdefault(key, (mapped[key], set()))[1].add(pid)
    return out


Site = Tuple[str, str, Set[int], Tuple[str, str, int, bool]]


def _sites_of(libs: Dict[str, Dict[str, Tuple[str, Set[int]]]]) -> Tuple[List[Site], List[str]]:
    """((library name, path, pids, probe site) for every site of the libcuda and libnccl files
    ``libs`` holds, ["libcuda (pid 7): why"] for each file not read as an ELF shared object: a
    file a target maps under the name is the target's, and may be anything."""
    sites: List[Site] = []
    unread: List[str] = []
    for name, families in (("libcuda", FAMILIES), ("nccl", NCCL_FAMILIES)):
        for path, pids in libs.get(name, {}).values():
            try:
                found = probe_sites(path, families)
            except (ValueError, OSError) as exc:
                who = ", ".join(str(p) for p in sorted(pids)[:3])
                unread.append(f"{name} (pid {who}): {exc}")
                continue
            sites.extend((name, path, pids, site) for site in found)
    return sites, unread


def _op_name(c: CuCount) -> str:
    op = int(c.last_op)
    return NCCL_OPS[op] if op < len(NCCL_OPS) else f"op {op}"


class CudaUprobeBackend(Backend):
    name = "cuda-uprobes"

    def __init__(self, loader: Optional[str] = None) -> None:
        super().__init__()
        self.loaders = (loader,) if loader else None
        self._prog: Optional[Program] = None
        self._emit: Optional[Emit] = None
        self._targets: Optional[TargetSet] = None
        self._since = 0.0
        self._mono_offset = 0.0
        self._synced: Set[int] = set()
        self._nccl_pids: Set[int] = set()      # processes whose libnccl is probed
        self._closing: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self.attached = 0

    def check(self) -> Optional[str]:
        """None when a loader can load the uprobe program here (env.choose for bpf/cuda_calls; the
        CO-RE object with libbpf, else BCC), else one line why not. Nothing is loaded to decide."""
        why = ebpf_problem(self.loaders, objects=("cuda_calls",))
        return f"CUDA uprobes: {why}" if why else None

    def start(self, targets: TargetSet, emit: Emit) -> None:
        """Find the libcuda and libnccl each traced process maps (/proc/PID/maps; the file itself
        through /proc/PID/map_files, so a container's or an unlinked library is probed), load the
        program and attach each entry point of ``FAMILIES`` (libcuda) and ``NCCL_FAMILIES``
        (libnccl) to every symbol of its family the library defines (``probe_sites``); the program
        counts only the tgids in its "tgids" map, kept equal to ``targets`` every ``SYNC_S``. When
        no traced process maps libcuda at start, nothing is loaded (a library loaded later is not
        probed)."""
        self._emit, self._targets = emit, targets
        self._since = time.time()
        self._mono_offset = self._since - time.monotonic()
        libs = library_paths(targets.pids(), ("libcuda", "nccl"))
        if not libs["libcuda"]:     # no CUDA in the tree: nothing to count, nothing missing
            return
        sites, unread = _sites_of(libs)
        if unread:
            emit(EvidenceNote(ts=self._since, what="cuda-uprobes",
                              why="not read, so not probed: " + "; ".join(unread)))
        self._prog, self.notes = load_cuda_calls(self.loaders)
        try:
            for name, path, pids, (fn, sym, offset, ret) in sites:
                self._prog.attach_uprobe(fn, path, sym, offset, retprobe=ret)
                self.attached += 1
                if name == "nccl":
                    self._nccl_pids |= pids
            if not self.attached and not unread:
                emit(EvidenceNote(ts=self._since, what="cuda-uprobes",
                                  why="libcuda exports none of the driver entry points probed"))
            self._sync()
        except BaseException:
            self._cleanup()
            raise
        self._thread = threading.Thread(target=self._loop, name="hangtrace-cuda-uprobes",
                                        daemon=True)
        self._thread.start()

    def _sync(self) -> None:
        """Make the "tgids" map equal to the targets (new children followed)."""
        if self._prog is None or self._targets is None:
            return
        tg = self._prog.map("tgids")
        for pid in set(self._targets.pids()) - self._synced:
            tg.set(bytes(ct.c_uint32(pid)), b"\x01")
            self._synced.add(pid)

    def _loop(self) -> None:
        while not self._stop.wait(SYNC_S):
            try:
                with self._lock:
                    self._sync()
            except Exception as exc:   # a map update failing must not kill the recording
                self.errors.append(f"cuda-uprobes: {exc}")
                return

    def _epoch(self, mono_ns: int) -> Optional[float]:
        return round(mono_ns / 1e9 + self._mono_offset, 6) if mono_ns else None

    def _final_events(self) -> List[CudaDriverCalls]:
        now = time.time()
        open_by_tid: Dict[int, List[str]] = {}
        assert self._prog is not None
        for kraw, vraw in self._prog.map("streams").items():
            k, v = CuStreamKey.from_buffer_copy(kraw), CuStream.from_buffer_copy(vraw)
            if v.capturing:
                open_by_tid.setdefault(int(v.tid), []).append(hex(int(k.stream)))
        out = []
        for kraw, vraw in self._prog.map("counts").items():
            key = ct.c_uint64.from_buffer_copy(kraw).value
            pid, tid = key >> 32, key & 0xFFFFFFFF
            c = CuCount.from_buffer_copy(vraw)
            out.append(CudaDriverCalls(
                ts=now, pid=pid, tid=tid, since=self._since, begins=int(c.begins),
                ends=int(c.ends), launches=int(c.launches),
                open_streams=sorted(open_by_tid.get(tid, [])),
                last_begin=self._epoch(int(c.last_begin_ns)),
                last_end=self._epoch(int(c.last_end_ns)), kernels=int(c.kernels),
                copies=int(c.copies), syncs=int(c.syncs), syncs_done=int(c.syncs_done),
                syncs_failed=int(c.syncs_failed), queries_ready=int(c.queries_ready),
                queries_not_ready=int(c.queries_not_ready),
                in_sync_since=self._epoch(int(c.sync_enter_ns)) if c.in_sync else None,
                last_sync_done=self._epoch(int(c.last_sync_done_ns)),
                last_ready=self._epoch(int(c.last_ready_ns)), work_probed=True,
                nccl_probed=pid in self._nccl_pids or bool(c.nccl_enter_ns),
                collectives=int(c.collectives),
                last_collective=self._epoch(int(c.last_collective_ns)),
                last_op=_op_name(c) if c.nccl_enter_ns else "",
                in_nccl_since=self._epoch(int(c.nccl_enter_ns)) if c.in_nccl else None,
                last_own_work=self._epoch(int(c.last_own_work_ns))))
        return out

    def _cleanup(self, wait: bool = True) -> None:
        """Detach every probe and close the program; with ``wait`` False (``stop``) in a thread
        of its own, which the interpreter joins before it exits (``detached(timeout)`` waits
        for it): the kernel waits a grace period as it unregisters each uprobe (about 0.1 s
        each here, one after another; a serving tree's took 18 s on the H200), and the
        recording's other backends must not run on meanwhile."""
        prog, self._prog = self._prog, None
        if prog is None:
            return

        def close() -> None:
            try:
                prog.close()
            except Exception as exc:
                self.errors.append(f"cuda-uprobes: detach failed: {exc}")
        if wait:
            close()
            return
        self._closing = threading.Thread(target=close, name="hangtrace-uprobe-detach")
        self._closing.start()

    def latest_completion(self) -> Optional[float]:
        """When a traced thread's GPU work last completed (a sync returned, a query answered
        ready, a graph capture ended), from the counts so far; None before any or unloaded."""
        with self._lock:
            if self._prog is None:
                return None
            latest = 0
            for _key, vraw in self._prog.map("counts").items():
                c = CuCount.from_buffer_copy(vraw)
                latest = max(latest, int(c.last_sync_done_ns), int(c.last_ready_ns),
                             int(c.last_end_ns))
        return self._epoch(latest)

    @property
    def loaded(self) -> bool:
        """Whether ``start`` loaded the program (a traced process maps libcuda)."""
        return self._prog is not None

    def detached(self, timeout: Optional[float] = None) -> bool:
        """Whether every probe is detached, waiting up to ``timeout`` seconds for it."""
        t = self._closing
        if t is not None:
            t.join(timeout)
        return self._prog is None and (t is None or not t.is_alive())

    def stop(self) -> None:
        """Emit one ``CudaDriverCalls`` per thread that made such a call (an ``EvidenceNote``
        "cuda-uprobes" saying so when none did) and detach every probe (close the program) in a
        thread of its own (``_cleanup``); idempotent."""
        self._stop.set()
        t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5)
        with self._lock:
            try:
                if self._prog is not None and self._emit is not None:
                    events = self._final_events()
                    for e in events:
                        self._emit(e)
                    if not events and self.attached:
                        self._emit(EvidenceNote(ts=time.time(), what="cuda-uprobes", why=(
                            f"{self.attached} uprobes on libcuda counted no call of a traced "
                            "thread: none launched, copied, captured or entered a sync in the "
                            "window (a thread inside a sync since before it shows none)")))
            except Exception as exc:  # detaching must still happen
                self.errors.append(f"cuda-uprobes: final read failed: {exc}")
            finally:
                self._cleanup(wait=False)
                self._emit = None


def with_cuda_uprobes(backends: List[Backend], why: str) -> Tuple[List[Backend], str]:
    """Add this backend beside the eBPF one when it can load (session.choose_backends),
    through the loader the eBPF backend may use."""
    ebpf = next((b for b in backends if b.name == "ebpf"), None)
    if ebpf is None:
        return backends, why
    loaders = getattr(ebpf, "loaders", None)
    cu = CudaUprobeBackend(loader=loaders[0] if loaders else None)
    if cu.check() is not None:       # needs what eBPF needs: rare to fail when eBPF runs
        return backends, why
    return backends + [cu], why + "; libcuda uprobes where it is loaded"
