"""Per-GPU readings from NVIDIA's management library (libnvidia-ml.so.1): through NVIDIA's own
bindings (``nvidia-ml-py``, nvml_py.py) when they are installed, else through ctypes here.

Contract:
- ``open_nvml()`` returns an ``Nvml`` (or nvml_py's ``PyNvml``, the same interface) or raises
  ``NvmlError`` with one line saying why not (no library, init failed, no GPU). ``binding``
  says which was used ("nvidia-ml-py" or "ctypes"). No pip dependency: the library ships with
  the driver; ``pip install 'hangtrace[gpu]'`` adds the bindings.
- ``Nvml.read(ts)`` returns one ``events.GpuSample`` per GPU: utilization (percent of the driver's last
  sample period, 1/6 s to 1 s, in which a kernel ran), memory used/total in bytes, and the pids of
  the compute processes holding a context on it. A value NVML refuses is None (or an empty list),
  never a guess. ``close()`` shuts NVML down; both are safe to call from one thread at a time.
- Each sample also carries the board power draw (mW) and the SM clock (MHz) where NVML gives
  them; ``health(ts, phase)`` reads the slower health counters (nvml_health.py).
- Nothing here classifies; the analysis of readings is tracer/analysis/rules/gpu.py.

ABI used (nvml.h, stable since driver 450): nvmlInit_v2, nvmlDeviceGetCount_v2,
nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetUUID, nvmlDeviceGetUtilizationRates
({uint gpu, uint memory}), nvmlDeviceGetMemoryInfo ({ull total, free, used}),
nvmlDeviceGetComputeRunningProcesses_v3/_v2 ({uint pid; ull usedGpuMemory; uint gpuInstanceId;
uint computeInstanceId}), falling back to the v1 call ({uint pid; ull usedGpuMemory}),
nvmlDeviceGetPowerUsage (uint mW), nvmlDeviceGetClockInfo (NVML_CLOCK_SM = 1, uint MHz).
"""
from __future__ import annotations

import ctypes
from typing import Any, List

from ..events import GpuSample

from .nvml_common import NVML_CLOCK_SM, NvmlError

NVML_SUCCESS = 0
NVML_ERROR_INSUFFICIENT_SIZE = 7
LIBRARY_NAMES = ("libnvidia-ml.so.1", "libnvidia-ml.so")

__all__ = ["NvmlError", "Nvml", "open_nvml", "open_ctypes", "NVML_CLOCK_SM", "LIBRARY_NAMES"]


class _Util(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class _ProcV2(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class _ProcV1(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


class Nvml:
    """An initialised NVML (module doc). Built by ``open_nvml``; ``lib`` is the ctypes CDLL."""

    binding = "ctypes"

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self._handles: List[ctypes.c_void_p] = []
        n = ctypes.c_uint(0)
        rc = lib.nvmlDeviceGetCount_v2(ctypes.byref(n))
        if rc != NVML_SUCCESS:
            raise NvmlError(f"nvmlDeviceGetCount failed ({self._error(rc)})")
        for i in range(n.value):
            h = ctypes.c_void_p()
            rc = lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(i), ctypes.byref(h))
            if rc != NVML_SUCCESS:
                raise NvmlError(f"nvmlDeviceGetHandleByIndex({i}) failed ({self._error(rc)})")
            self._handles.append(h)
        self.uuids = [self._uuid(h) for h in self._handles]

    def _error(self, rc: int) -> str:
        try:
            f = self.lib.nvmlErrorString
            f.restype = ctypes.c_char_p
            return (f(ctypes.c_int(rc)) or b"").decode() or f"error {rc}"
        except (AttributeError, UnicodeDecodeError):
            return f"error {rc}"

    def _uuid(self, h: ctypes.c_void_p) -> str:
        buf = ctypes.create_string_buffer(96)
        if self.lib.nvmlDeviceGetUUID(h, buf, ctypes.c_uint(96)) != NVML_SUCCESS:
            return ""
        return buf.value.decode(errors="replace")

    @property
    def count(self) -> int:
        return len(self._handles)

    def _pids(self, h: ctypes.c_void_p) -> List[int]:
        for name, struct in (("nvmlDeviceGetComputeRunningProcesses_v3", _ProcV2),
                             ("nvmlDeviceGetComputeRunningProcesses_v2", _ProcV2),
                             ("nvmlDeviceGetComputeRunningProcesses", _ProcV1)):
            fn = getattr(self.lib, name, None)
            if fn is None:
                continue
            size = 64
            for _ in range(3):
                n = ctypes.c_uint(size)
                arr = (struct * size)()
                rc = fn(h, ctypes.byref(n), arr)
                if rc == NVML_SUCCESS:
                    return sorted({int(arr[i].pid) for i in range(n.value)})
                if rc != NVML_ERROR_INSUFFICIENT_SIZE:
                    break
                size = max(size * 2, n.value + 8)
            return []
        return []

    def read(self, ts: float) -> List[GpuSample]:
        out = []
        for i, h in enumerate(self._handles):
            r = GpuSample(ts=ts, gpu=i, uuid=self.uuids[i])
            u = _Util()
            if self.lib.nvmlDeviceGetUtilizationRates(h, ctypes.byref(u)) == NVML_SUCCESS:
                r.util_pct = int(u.gpu)
            m = _Memory()
            if self.lib.nvmlDeviceGetMemoryInfo(h, ctypes.byref(m)) == NVML_SUCCESS:
                r.mem_used, r.mem_total = int(m.used), int(m.total)
            r.pids = self._pids(h)
            v = ctypes.c_uint(0)
            if self.lib.nvmlDeviceGetPowerUsage(h, ctypes.byref(v)) == NVML_SUCCESS:
                r.power_mw = int(v.value)
            if self.lib.nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM, ctypes.byref(v)) == NVML_SUCCESS:
                r.sm_clock_mhz = int(v.value)
            if self.lib.nvmlDeviceGetEnforcedPowerLimit(h, ctypes.byref(v)) == NVML_SUCCESS:
                r.power_limit_mw = int(v.value) or None
            out.append(r)
        return out

    def health(self, ts: float, phase: str = "") -> list:
        """One ``GpuHealth`` per GPU (nvml_health.py)."""
        from .nvml_health import read_health
        return [read_health(self.lib, h, i, self.uuids[i], ts, phase, self._error)
                for i, h in enumerate(self._handles)]

    def close(self) -> None:
        if self.lib is not None:
            try:
                self.lib.nvmlShutdown()
            finally:
                self.lib = None


def open_nvml(names: tuple = LIBRARY_NAMES) -> Any:
    """Load and initialise NVML (module doc); raises NvmlError with the reason. The bindings
    are tried first when ``names`` is the default; anything they refuse goes to ctypes."""
    if names == LIBRARY_NAMES:
        try:
            import pynvml  # noqa: WPS433 (optional: nvidia-ml-py)
        except Exception:  # ImportError, or a broken install
            pynvml = None
        if pynvml is not None:
            from .nvml_py import open_pynvml
            try:
                return open_pynvml(pynvml)
            except NvmlError:
                pass             # the ctypes reader says why in its own words, or works
    return open_ctypes(names)


def open_ctypes(names: tuple = LIBRARY_NAMES) -> Nvml:
    """NVML through ctypes (module doc)."""
    lib = None
    last = ""
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError as exc:
            last = str(exc)
    if lib is None:
        raise NvmlError(f"no NVIDIA management library ({names[0]}: {last or 'not found'})")
    init = getattr(lib, "nvmlInit_v2", None) or getattr(lib, "nvmlInit", None)
    if init is None:
        raise NvmlError("libnvidia-ml has no nvmlInit")
    rc = init()
    if rc != NVML_SUCCESS:
        raise NvmlError(f"nvmlInit failed (NVML error {rc}: driver not loaded or no GPU)")
    try:
        nv = Nvml(lib)
    except NvmlError:
        lib.nvmlShutdown()
        raise
    if nv.count == 0:
        nv.close()
        raise NvmlError("NVML sees no GPU")
    return nv
