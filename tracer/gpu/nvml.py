"""Per-GPU readings from NVIDIA's management library (libnvidia-ml.so.1, shipped with the
driver), read through NVIDIA's own bindings: nvidia-ml-py (module ``pynvml``), a dependency.

Contract:
- ``open_nvml(module=None)`` returns an initialised reader (nvml_py.py's ``PyNvml``: ``count``,
  ``uuids``, ``read(ts)``, ``health(ts, phase)``, ``close()``, ``binding``) or raises
  ``NvmlError`` with one line saying why not: ``NO_DRIVER`` ("no NVIDIA driver ...") where the
  library or the driver is not there (``DRIVER_PATHS`` absent: nothing imported), else the
  bindings' own words (init failed, no GPU), or that nvidia-ml-py cannot be imported. ``module``
  replaces the imported ``pynvml`` (tests).
- ``Nvml`` is the reader's type (nvml_py.PyNvml), ``NVML_CLOCK_SM`` nvml.h's constant.
- Nothing here classifies; the analysis of readings is tracer/analysis/threads/gpu.py.
"""
from __future__ import annotations

import os
from typing import Any, Optional

from .nvml_common import NVML_CLOCK_SM, NvmlError
from .nvml_py import NO_DRIVER, PyNvml, open_pynvml

__all__ = ["NvmlError", "Nvml", "open_nvml", "NVML_CLOCK_SM", "NO_DRIVER", "DRIVER_PATHS"]

# the kernel module's (in a container's /proc too), and its control device (a sandbox that
# passes the device through without the module's /proc entries)
DRIVER_PATHS = ("/proc/driver/nvidia", "/dev/nvidiactl")

Nvml = PyNvml


def open_nvml(module: Optional[Any] = None) -> PyNvml:
    """NVML through nvidia-ml-py (module doc)."""
    nv = module
    if nv is None:
        if not any(os.path.exists(p) for p in DRIVER_PATHS):   # skip the import (7 ms here)
            raise NvmlError(f"{NO_DRIVER}: neither {' nor '.join(DRIVER_PATHS)} exists")
        try:
            import pynvml as nv  # noqa: WPS433 (a dependency: nvidia-ml-py)
        except Exception as exc:  # ImportError, or a broken install
            raise NvmlError(f"nvidia-ml-py cannot be imported ({exc}): pip install "
                            "nvidia-ml-py") from None
    return open_pynvml(nv)
