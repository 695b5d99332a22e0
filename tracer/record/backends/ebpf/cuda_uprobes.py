"""CUDA graph calls of the traced tree, counted by uprobes on libcuda (bpf/cuda_graph.bpf.c,
loaded as the eBPF backend loads its program: the CO-RE object with libbpf, else BCC).

Contract (on top of base.py):
- ``CudaUprobeBackend(loader=None)``: as EbpfBackend's ``loader``.
- ``check()`` returns None when a loader can load the uprobe program here (env.choose for
  bpf/cuda_graph), else one line why not. Nothing is loaded to decide.
- ``start(targets, emit)`` finds the libcuda each traced process maps (/proc/PID/maps, read
  through /proc/PID/root so a container's library is probed), loads the program and attaches
  on_begin / on_end / on_launch to the library's cuStreamBeginCapture*, cuStreamEndCapture*
  and cuGraphLaunch* symbols (read from the file: linux/elfsyms.py; one probe per address,
  aliases skipped; uprobes attach to the file's inode, for every process that maps it; the
  program counts only the tgids in its "tgids" map, which a thread keeps equal to
  ``targets`` every ``SYNC_S``). When no traced process maps libcuda at start, nothing is
  loaded (a library loaded later is not probed).
- ``stop()`` (idempotent) emits one ``CudaGraphCalls`` per thread that made such a call and
  detaches every probe (closes the program). Times are converted from CLOCK_MONOTONIC to epoch.
- A backend that saw nothing emits nothing else: the counts are evidence, never a verdict.
"""
from __future__ import annotations

import ctypes as ct
import os
import re
import threading
import time
from typing import Dict, List, Optional, Set, Tuple

from ....events.evidence import CudaGraphCalls, EvidenceNote
from ....linux.elfsyms import function_symbols
from ...evidence.libs import identify, parse_maps
from ..base import Backend, Emit, TargetSet
from .env import ebpf_problem
from .loader import Program
from .programs import load_cuda_graph

__all__ = ["CudaUprobeBackend", "SYMBOLS", "libcuda_paths", "with_cuda_uprobes", "probe_sites"]

SYMBOLS = [("on_begin", r"^cuStreamBeginCapture(_v2)?(ToGraph)?(_ptsz)?$"),
           ("on_end", r"^cuStreamEndCapture(_ptsz)?$"),
           ("on_launch", r"^cuGraphLaunch(_ptsz)?$")]
SYNC_S = 0.5


class CgCount(ct.Structure):
    """struct cg_count of bpf/cuda_graph.bpf.c (value of "counts", key tgid << 32 | tid)."""
    _fields_ = [("begins", ct.c_uint64), ("ends", ct.c_uint64), ("launches", ct.c_uint64),
                ("last_begin_ns", ct.c_uint64), ("last_end_ns", ct.c_uint64)]


class CgStreamKey(ct.Structure):
    """struct cg_stream_key."""
    _fields_ = [("tgid", ct.c_uint32), ("pad", ct.c_uint32), ("stream", ct.c_uint64)]


class CgStream(ct.Structure):
    """struct cg_stream."""
    _fields_ = [("tid", ct.c_uint32), ("capturing", ct.c_uint32), ("ts_ns", ct.c_uint64)]


def probe_sites(path: str) -> List[Tuple[str, str, int]]:
    """(program, symbol, file offset) for every graph symbol ``path`` defines, one per
    address (module doc)."""
    syms = function_symbols(path)
    out = []
    for fn, regex in SYMBOLS:
        seen: Set[int] = set()
        for name in sorted(syms):
            addr, offset = syms[name]
            if re.match(regex, name) and addr not in seen:
                seen.add(addr)
                out.append((fn, name, offset))
    return out


def libcuda_paths(pids: List[int], root: str = "/proc") -> Dict[str, str]:
    """{"dev:inode": readable path} of every libcuda the processes map (one per file)."""
    out: Dict[str, str] = {}
    for pid in pids:
        try:
            with open(f"{root}/{pid}/maps", "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        for path, key in parse_maps(text):
            if key not in out and identify(path) == "libcuda":
                via = f"{root}/{pid}/root{path}"
                out[key] = via if os.path.exists(via) else path
    return out


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
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self.attached = 0

    def check(self) -> Optional[str]:
        why = ebpf_problem(self.loaders, objects=("cuda_graph",))
        return f"CUDA uprobes: {why}" if why else None

    def start(self, targets: TargetSet, emit: Emit) -> None:
        self._emit, self._targets = emit, targets
        self._since = time.time()
        self._mono_offset = self._since - time.monotonic()
        libs = libcuda_paths(targets.pids())
        if not libs:           # no CUDA in the tree: nothing to count, nothing missing
            return
        self._prog, self.notes = load_cuda_graph(self.loaders)
        try:
            for path in libs.values():
                for fn, sym, offset in probe_sites(path):
                    self._prog.attach_uprobe(fn, path, sym, offset)
                    self.attached += 1
            if not self.attached:
                emit(EvidenceNote(ts=self._since, what="cuda-uprobes",
                                  why="libcuda exports none of the graph capture symbols"))
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

    def _final_events(self) -> List[CudaGraphCalls]:
        now = time.time()
        open_by_tid: Dict[int, List[str]] = {}
        assert self._prog is not None
        for kraw, vraw in self._prog.map("streams").items():
            k, v = CgStreamKey.from_buffer_copy(kraw), CgStream.from_buffer_copy(vraw)
            if v.capturing:
                open_by_tid.setdefault(int(v.tid), []).append(hex(int(k.stream)))
        out = []
        for kraw, vraw in self._prog.map("counts").items():
            key = ct.c_uint64.from_buffer_copy(kraw).value
            pid, tid = key >> 32, key & 0xFFFFFFFF
            c = CgCount.from_buffer_copy(vraw)
            out.append(CudaGraphCalls(
                ts=now, pid=pid, tid=tid, since=self._since, begins=int(c.begins),
                ends=int(c.ends), launches=int(c.launches),
                open_streams=sorted(open_by_tid.get(tid, [])),
                last_begin=self._epoch(int(c.last_begin_ns)),
                last_end=self._epoch(int(c.last_end_ns))))
        return out

    def _cleanup(self) -> None:
        prog, self._prog = self._prog, None
        if prog is not None:
            try:
                prog.close()
            except Exception as exc:
                self.errors.append(f"cuda-uprobes: detach failed: {exc}")

    def stop(self) -> None:
        self._stop.set()
        t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5)
        with self._lock:
            try:
                if self._prog is not None and self._emit is not None:
                    for e in self._final_events():
                        self._emit(e)
            except Exception as exc:  # detaching must still happen
                self.errors.append(f"cuda-uprobes: final read failed: {exc}")
            finally:
                self._cleanup()
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
