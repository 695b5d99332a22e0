"""Per-GPU readings through NVIDIA's own Python bindings (``nvidia-ml-py``, module ``pynvml``),
which most GPU environments have installed.

Contract: ``open_pynvml(module)`` returns a ``PyNvml`` with the interface of nvml.py's ``Nvml``
(``count``, ``uuids``, ``read(ts)``, ``health(ts, phase)``, ``close()``, ``binding``), or raises
``NvmlError`` with one line (init failed, no GPU). The readings are the same: utilization,
memory used/total, compute pids, board power and SM clock, each None (or []) where NVML
refuses. The slower health counters are read by nvml_health.py with the same calls, on the
library the bindings loaded (``pynvml.nvmlLib``). nvml.py's ``open_nvml`` prefers this module
when ``pynvml`` imports, and falls back to its own ctypes reader.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional

from ..events import GpuSample
from .nvml_common import NVML_CLOCK_SM, NvmlError

__all__ = ["PyNvml", "open_pynvml", "BINDING"]

BINDING = "nvidia-ml-py"


def _text(v: Any) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


class PyNvml:
    """An initialised NVML through pynvml (module doc)."""

    binding = BINDING

    def __init__(self, nv: Any) -> None:
        self.nv = nv
        try:
            n = nv.nvmlDeviceGetCount()
            self._handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        except nv.NVMLError as exc:
            raise NvmlError(f"NVML: {exc}") from None
        self.uuids = [self._get(lambda h=h: _text(nv.nvmlDeviceGetUUID(h))) or ""
                      for h in self._handles]

    @property
    def count(self) -> int:
        return len(self._handles)

    def _get(self, call: Callable[[], Any]) -> Optional[Any]:
        try:
            return call()
        except self.nv.NVMLError:
            return None

    def read(self, ts: float) -> List[GpuSample]:
        nv = self.nv
        out = []
        for i, h in enumerate(self._handles):
            r = GpuSample(ts=ts, gpu=i, uuid=self.uuids[i])
            util = self._get(lambda: nv.nvmlDeviceGetUtilizationRates(h))
            r.util_pct = int(util.gpu) if util is not None else None
            mem = self._get(lambda: nv.nvmlDeviceGetMemoryInfo(h))
            if mem is not None:
                r.mem_used, r.mem_total = int(mem.used), int(mem.total)
            procs = self._get(lambda: nv.nvmlDeviceGetComputeRunningProcesses(h)) or []
            r.pids = sorted({int(p.pid) for p in procs})
            power = self._get(lambda: nv.nvmlDeviceGetPowerUsage(h))
            r.power_mw = int(power) if power is not None else None
            clock = self._get(lambda: nv.nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM))
            r.sm_clock_mhz = int(clock) if clock is not None else None
            out.append(r)
        return out

    def health(self, ts: float, phase: str = "") -> list:
        """One ``GpuHealth`` per GPU (nvml_health.py, on the library pynvml loaded)."""
        from .nvml_health import read_health
        lib = getattr(self.nv, "nvmlLib", None)
        if lib is None:
            return []
        return [read_health(lib, h, i, self.uuids[i], ts, phase, self._error)
                for i, h in enumerate(self._handles)]

    def _error(self, rc: int) -> str:
        try:
            return _text(self.nv.nvmlErrorString(rc))
        except Exception:  # an unknown code: its number
            return f"error {rc}"

    def close(self) -> None:
        if self.nv is not None:
            try:
                self.nv.nvmlShutdown()
            except self.nv.NVMLError:
                pass
            finally:
                self.nv = None


def open_pynvml(nv: Any) -> PyNvml:
    """Initialise NVML through the ``pynvml`` module ``nv`` (module doc)."""
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        raise NvmlError(f"nvmlInit failed through nvidia-ml-py ({exc}: driver not loaded "
                        "or no GPU)") from None
    try:
        out = PyNvml(nv)
    except NvmlError:
        nv.nvmlShutdown()
        raise
    if out.count == 0:
        out.close()
        raise NvmlError("NVML sees no GPU")
    return out
