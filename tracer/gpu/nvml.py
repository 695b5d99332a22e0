"""Per-GPU readings from NVIDIA's management library (libnvidia-ml.so.1, shipped with the
driver), read through NVIDIA's own bindings: nvidia-ml-py (module ``pynvml``), a dependency.

Contract:
- ``open_nvml(module=None)``: an initialised reader (nvml_py.py's ``PyNvml``), or ``NvmlError``
  with one line: ``NO_DRIVER`` ("no NVIDIA driver ...") where the library or the driver is not
  there (``DRIVER_PATHS`` absent: nothing imported), else the bindings' words (init failed, no
  GPU), or that nvidia-ml-py cannot be imported. ``module`` replaces ``pynvml`` (tests).
- ``nvml_problem()``: why NVML cannot open here, found without opening it (those words), else
  None (``nvmlInit`` may still fail: a driver and library of different versions).
- ``Nvml`` is the reader's type, ``NVML_CLOCK_SM`` nvml.h's constant. Nothing here classifies.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
from typing import Any, Optional

from .nvml_common import NVML_CLOCK_SM, NvmlError
from .nvml_py import NO_DRIVER, PyNvml, open_pynvml

__all__ = ["NvmlError", "Nvml", "open_nvml", "nvml_problem", "NVML_CLOCK_SM", "NO_DRIVER",
           "DRIVER_PATHS"]

# the kernel module's (in a container's /proc too), and its control device (a sandbox that
# passes the device through without the module's /proc entries)
DRIVER_PATHS = ("/proc/driver/nvidia", "/dev/nvidiactl")

Nvml = PyNvml


LIBRARY = "libnvidia-ml.so.1"


def _no_driver() -> Optional[str]:
    if not any(os.path.exists(p) for p in DRIVER_PATHS):
        return f"{NO_DRIVER}: neither {' nor '.join(DRIVER_PATHS)} exists"
    return None


def nvml_problem() -> Optional[str]:
    """Why NVML cannot open here, without nvmlInit (module doc): 3 ms where it can, against
    30 ms for an open and a shutdown on a GPU host."""
    why = _no_driver()
    if why is not None:
        return why
    try:
        if importlib.util.find_spec("pynvml") is None:
            return "nvidia-ml-py cannot be imported (no module pynvml): pip install nvidia-ml-py"
    except (ImportError, ValueError) as exc:
        return f"nvidia-ml-py cannot be imported ({exc}): pip install nvidia-ml-py"
    try:
        ctypes.CDLL(LIBRARY)            # what pynvml loads first; nvmlInit talks to the driver
    except OSError as exc:
        return f"{NO_DRIVER}: {exc}"
    return None


def open_nvml(module: Optional[Any] = None) -> PyNvml:
    """NVML through nvidia-ml-py (module doc)."""
    nv = module
    if nv is None:
        why = _no_driver()                 # skip the import (7 ms here)
        if why is not None:
            raise NvmlError(why)
        try:
            import pynvml as nv  # noqa: WPS433 (a dependency: nvidia-ml-py)
        except Exception as exc:  # ImportError, or a broken install
            raise NvmlError(f"nvidia-ml-py cannot be imported ({exc}): pip install "
                            "nvidia-ml-py") from None
    return open_pynvml(nv)
