"""CUDA graph calls of the traced tree, counted by uprobes on libcuda (BCC; bpf/cuda_graph.bpf.c).

Contract (on top of base.py):
- ``check()`` returns None when uprobes can be loaded here (root or CAP_BPF+CAP_PERFMON, BCC
  importable, kernel headers), else one line why not. ``bcc`` is imported only inside
  ``check``/``start``.
- ``start(targets, emit)`` finds the libcuda each traced process maps (/proc/PID/maps, read
  through /proc/PID/root so a container's library is probed), compiles the program and attaches
  on_begin / on_end / on_launch to the library's cuStreamBeginCapture*, cuStreamEndCapture*
  and cuGraphLaunch* symbols (uprobes attach to the file's inode, for every process that maps
  it; the program counts only the tgids in its "tgids" map, which a thread keeps equal to
  ``targets`` every ``SYNC_S``). When no traced process maps libcuda at start, nothing is
  loaded (a library loaded later is not probed).
- ``stop()`` (idempotent) emits one ``CudaGraphCalls`` per thread that made such a call and
  detaches every probe (BPF.cleanup). Times are converted from CLOCK_MONOTONIC to epoch.
- A backend that saw nothing emits nothing else: the counts are evidence, never a verdict.
"""
from __future__ import annotations

import ctypes as ct
import os
import threading
import time
from typing import Any, Dict, List, Optional, Set, Tuple

from ....events.evidence import CudaGraphCalls, EvidenceNote
from ...evidence.libs import identify, parse_maps
from ..base import Backend, Emit, TargetSet
from .env import CFLAGS, bcc_problem
from .layout import BPF_DIR

__all__ = ["CudaUprobeBackend", "PROGRAM", "SYMBOLS", "libcuda_paths", "with_cuda_uprobes"]

PROGRAM = BPF_DIR / "cuda_graph.bpf.c"
SYMBOLS = [("on_begin", r"^cuStreamBeginCapture(_v2)?(ToGraph)?(_ptsz)?$"),
           ("on_end", r"^cuStreamEndCapture(_ptsz)?$"),
           ("on_launch", r"^cuGraphLaunch(_ptsz)?$")]
SYNC_S = 0.5


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

    def __init__(self) -> None:
        super().__init__()
        self._bpf: Any = None
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
        why = bcc_problem("CUDA uprobes")
        if why:
            return why
        if not PROGRAM.exists():
            return f"BPF program missing: {PROGRAM}"
        return None

    def start(self, targets: TargetSet, emit: Emit) -> None:
        self._emit, self._targets = emit, targets
        self._since = time.time()
        self._mono_offset = self._since - time.monotonic()
        libs = libcuda_paths(targets.pids())
        if not libs:           # no CUDA in the tree: nothing to count, nothing missing
            return
        from bcc import BPF  # noqa: WPS433 (see the module doc)
        self._bpf = BPF(src_file=str(PROGRAM).encode(), cflags=CFLAGS)
        try:
            for path in libs.values():
                for fn, regex in SYMBOLS:
                    # .symtab and .dynsym both list a symbol: one probe per address
                    seen = set()
                    for sym, addr in BPF.get_user_functions_and_addresses(path.encode(),
                                                                            regex.encode()):
                        if addr in seen:
                            continue
                        seen.add(addr)
                        self._bpf.attach_uprobe(name=path.encode(), sym=sym, fn_name=fn.encode())
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
        if self._bpf is None or self._targets is None:
            return
        tg = self._bpf[b"tgids"]
        for pid in set(self._targets.pids()) - self._synced:
            tg[ct.c_uint32(pid)] = ct.c_uint8(1)
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
        for k, v in self._bpf[b"streams"].items():
            if v.capturing:
                open_by_tid.setdefault(int(v.tid), []).append(hex(int(k.stream)))
        out = []
        for k, v in self._bpf[b"counts"].items():
            key = int(k.value)
            pid, tid = key >> 32, key & 0xFFFFFFFF
            c = v
            out.append(CudaGraphCalls(
                ts=now, pid=pid, tid=tid, since=self._since, begins=int(c.begins),
                ends=int(c.ends), launches=int(c.launches),
                open_streams=sorted(open_by_tid.get(tid, [])),
                last_begin=self._epoch(int(c.last_begin_ns)),
                last_end=self._epoch(int(c.last_end_ns))))
        return out

    def _cleanup(self) -> None:
        b, self._bpf = self._bpf, None
        if b is not None:
            try:
                b.cleanup()
            except Exception as exc:
                self.errors.append(f"cuda-uprobes: detach failed: {exc}")

    def stop(self) -> None:
        self._stop.set()
        t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5)
        with self._lock:
            try:
                if self._bpf is not None and self._emit is not None:
                    for e in self._final_events():
                        self._emit(e)
            except Exception as exc:  # detaching must still happen
                self.errors.append(f"cuda-uprobes: final read failed: {exc}")
            finally:
                self._cleanup()
                self._emit = None


def with_cuda_uprobes(backends: List[Backend], why: str) -> Tuple[List[Backend], str]:
    """Add this backend beside the eBPF one when it can load (session.choose_backends)."""
    if not any(b.name == "ebpf" for b in backends):
        return backends, why
    cu = CudaUprobeBackend()
    if cu.check() is not None:       # needs what eBPF needs: rare to fail when eBPF runs
        return backends, why
    return backends + [cu], why + "; libcuda uprobes where it is loaded"

