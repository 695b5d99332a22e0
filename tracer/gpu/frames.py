"""Which frames of a stack belong to the GPU stack: NVIDIA's kernel driver in a kernel stack,
CUDA, NCCL, cuBLAS and friends in a native (user-space) stack.

Contract (pure, tables of real names):
- ``driver_frames(frames)``: the kernel frames (linux/kstack.py's "func+0x1a/0x2b0 [module]")
  that are NVIDIA's driver. A thread sleeping in one waits inside the GPU driver (not idle).
- ``gpu_call(frames, libs)``: the innermost native frame of a GPU library, as a ``GpuCall``:
  the API function when the frame names one (``cuStreamSynchronize``, ``ncclAllReduce``,
  ``cublasGemmEx``), else the library alone ("inside libcuda.so.1"). ``libs`` are the frames'
  file paths (events.stacks.NativeStack), "" for Python frames.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import List, Optional, Sequence

__all__ = ["driver_frames", "gpu_call", "GpuCall", "library_family"]

_DRIVER_MODULES = frozenset({"nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm",
                             "nvidia_peermem", "nvidia_fs"})
_DRIVER_FUNC = re.compile(r"^(nv_|nvidia_|uvm_|os_|rm_|_nv\d|nvkms_|nvUvm|osIoctl|nvlink_)")
_MODULE = re.compile(r"\[([\w-]+)\]\s*$")

# library file name (without version suffix) -> what it is
_FAMILIES = (
    (re.compile(r"^libcuda\.so"), "CUDA driver"),
    (re.compile(r"^libcudart\.so"), "CUDA runtime"),
    (re.compile(r"^libnccl\.so"), "NCCL"),
    (re.compile(r"^libcublasLt\.so"), "cuBLASLt"),
    (re.compile(r"^libcublas\.so"), "cuBLAS"),
    (re.compile(r"^libcudnn"), "cuDNN"),
    (re.compile(r"^libnvidia-ml\.so"), "NVML"),
    (re.compile(r"^libnvshmem"), "NVSHMEM"),
)
# API function names -> family (used when the library's name says nothing: static linking)
_API = (
    (re.compile(r"^p?nccl[A-Z]\w*$"), "NCCL"),
    (re.compile(r"^cublasLt[A-Z]\w*$"), "cuBLASLt"),
    (re.compile(r"^cublas[A-Z]\w*$"), "cuBLAS"),
    (re.compile(r"^cudnn[A-Z]\w*$"), "cuDNN"),
    (re.compile(r"^cuda[A-Z]\w*$"), "CUDA runtime"),
    (re.compile(r"^cu[A-Z]\w*$"), "CUDA driver"),
)


def _function(frame: str) -> str:
    return frame.split("+", 1)[0].split(" ", 1)[0]


def driver_frames(frames: Sequence[str]) -> List[str]:
    """The frames of ``frames`` that are NVIDIA's kernel driver: a frame of the nvidia, nvidia_uvm,
    nvidia_modeset, nvidia_drm or nvidia_peermem module, or a function named as
    open-gpu-kernel-modules names them (``nv_``, ``nvidia_``, ``uvm_``, ``os_``, ``rm_``,
    ``_nv0``...)."""
    out = []
    for f in frames:
        m = _MODULE.search(f)
        if (m and m.group(1) in _DRIVER_MODULES) or _DRIVER_FUNC.match(_function(f)):
            out.append(f)
    return out


def library_family(path: str) -> Optional[str]:
    """"CUDA driver" for .../libcuda.so.1, ... (None for a library that is no GPU library)."""
    name = os.path.basename(path)
    return next((fam for pat, fam in _FAMILIES if pat.match(name)), None)


@dataclass(frozen=True)
class GpuCall:
    family: str          # "CUDA driver", "NCCL", ...
    api: str             # "cuStreamSynchronize", or "" when no frame names the API
    library: str         # "libcuda.so.1" ("" when unknown)
    depth: int           # index of the frame, innermost 0

    def describe(self) -> str:
        lib = f", {self.library}" if self.library else ""
        if self.api:
            return f"{self.api} ({self.family}{lib})"
        return (f"inside {self.library or self.family} ({self.family}; no exported symbol "
                "names the function)")


def _api_family(func: str) -> Optional[str]:
    return next((fam for pat, fam in _API if pat.match(func)), None)


def gpu_call(frames: Sequence[str], libs: Sequence[str]) -> Optional[GpuCall]:
    """The innermost GPU-library frame, preferring one that names an API (module doc)."""
    first: Optional[GpuCall] = None
    for i, frame in enumerate(frames):
        path = libs[i] if i < len(libs) else ""
        if not path:            # a Python frame (py-spy interleaves them): not native
            continue
        fam = library_family(path)
        func = frame.split(" (", 1)[0].split("+", 1)[0]
        api_fam = _api_family(func) if not func.startswith("0x") else None
        lib = os.path.basename(path)
        if api_fam is not None and (fam is None or fam.startswith(api_fam[:4])
                                    or api_fam.startswith(fam[:4])):
            return GpuCall(fam or api_fam, func, lib, i)
        if fam is not None and first is None:
            first = GpuCall(fam, "", lib, i)
    return first
