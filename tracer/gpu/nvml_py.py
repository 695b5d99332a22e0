"""Per-GPU readings through NVIDIA's own Python bindings (``nvidia-ml-py``, module ``pynvml``,
a dependency of hangtrace).

Contract: ``open_pynvml(module)`` returns a ``PyNvml`` (``count``, ``uuids``, ``read(ts)``,
``health(ts, phase)``, ``close()``, ``binding``), or raises ``NvmlError`` with one line:
``NO_DRIVER`` when NVML's library is missing or the driver is not loaded (a machine without a
GPU), else init failed or no GPU. The readings are the same: utilization,
memory used/total, compute pids, board power, its enforced limit and SM clock, each None (or
[]) where NVML refuses; on GPUs with GPM (Hopper and newer) the SM activity between two reads
(``sm_active_pct``: NVML_GPM_METRIC_SM_UTIL over the interval; a device whose GPM calls fail
once is read without it from then on). The slower health counters are read by nvml_health.py
through the same bindings. nvml.py's ``open_nvml`` is the way in.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional

from ..events import GpuSample
from .nvml_common import NVML_CLOCK_SM, NvmlError

__all__ = ["PyNvml", "open_pynvml", "BINDING", "NO_DRIVER"]

BINDING = "nvidia-ml-py"
NO_DRIVER = "no NVIDIA driver (NVIDIA's management library, libnvidia-ml.so.1, is not loaded)"
# nvml.h: NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_LIBRARY_NOT_FOUND
_NO_DRIVER_CODES = (9, 12)


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
        self._gpm: dict = {}          # handle index -> the previous GPM sample (None: no GPM)

    @property
    def count(self) -> int:
        return len(self._handles)

    def _get(self, call: Callable[[], Any]) -> Optional[Any]:
        try:
            return call()
        except (self.nv.NVMLError, AttributeError):    # refused, or older bindings
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
            r.pid_mem = {int(p.pid): int(p.usedGpuMemory) for p in procs
                         if isinstance(getattr(p, "usedGpuMemory", None), int)
                         and 0 <= p.usedGpuMemory < 1 << 62}
            power = self._get(lambda: nv.nvmlDeviceGetPowerUsage(h))
            r.power_mw = int(power) if power is not None else None
            clock = self._get(lambda: nv.nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM))
            r.sm_clock_mhz = int(clock) if clock is not None else None
            limit = self._get(lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h))
            r.power_limit_mw = int(limit) if limit else None
            r.sm_active_pct = self._sm_active(i, h)
            out.append(r)
        return out

    def _sm_active(self, i: int, h: Any) -> Optional[float]:
        """GPM's SM activity since the previous read of GPU ``i`` (module doc)."""
        nv = self.nv
        if i in self._gpm and self._gpm[i] is None:
            return None
        try:
            if i not in self._gpm:
                support = nv.nvmlGpmQueryDeviceSupport(h)
                if not getattr(support, "isSupportedDevice", 0):
                    self._gpm[i] = None
                    return None
            sample = nv.nvmlGpmSampleAlloc()
            nv.nvmlGpmSampleGet(h, sample)
            prev, self._gpm[i] = self._gpm.get(i), sample
            if prev is None:
                return None
            get = nv.c_nvmlGpmMetricsGet_t()
            get.version = nv.NVML_GPM_METRICS_GET_VERSION
            get.numMetrics = 1
            get.sample1, get.sample2 = prev, sample
            get.metrics[0].metricId = nv.NVML_GPM_METRIC_SM_UTIL
            nv.nvmlGpmMetricsGet(get)
            nv.nvmlGpmSampleFree(prev)
            return round(float(get.metrics[0].value), 2)
        except Exception:      # no GPM here (old driver or bindings, a VM): never again
            self._gpm[i] = None
            return None

    def health(self, ts: float, phase: str = "") -> list:
        """One ``GpuHealth`` per GPU (nvml_health.py, through the same bindings)."""
        from .nvml_health import read_health
        return [read_health(self.nv, h, i, self.uuids[i], ts, phase)
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
        if getattr(exc, "value", None) in _NO_DRIVER_CODES:
            raise NvmlError(f"{NO_DRIVER}: {exc}") from None
        raise NvmlError(f"nvmlInit failed through nvidia-ml-py ({exc})") from None
    try:
        out = PyNvml(nv)
    except NvmlError:
        nv.nvmlShutdown()
        raise
    if out.count == 0:
        out.close()
        raise NvmlError("NVML sees no GPU")
    return out
