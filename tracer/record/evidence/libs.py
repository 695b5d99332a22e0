"""Which versions of the GPU stack a process has loaded, from /proc/PID/maps.

Contract:
- ``read_loaded_libs(pids)`` -> one ``LoadedLibs`` per readable process (and an
  ``EvidenceNote`` per process whose maps could not be read), plus ``LoadedLibs`` with pid 0 for
  the NVIDIA kernel module when it is loaded. Known (``LIBRARIES``): libnccl, libcuda (the
  user-space driver), libcudart, torch, flashinfer, sgl-kernel, vLLM's compiled ops; each
  entry names where its version came from (``source``: see ``read_loaded_libs``).
- A mapped library is read through /proc/PID/map_files (the file mapped, not what its path
  names now); the files beside it as the process may read them (linux/target_files.py: in
  its own root, as its user). One file mapped by many processes is read once (``cache``).
- Never raises; a version that cannot be found is left out, with no guess.
"""
from __future__ import annotations

import os
import re
import time
from typing import Dict, Iterable, List, Optional, Tuple

from ...events.evidence import EvidenceNote, LoadedLibs
from ...linux import procfs
from ...linux.target_files import TargetFileRefused, list_target_dir, read_target_file
from . import elfver

__all__ = ["read_loaded_libs", "parse_maps", "identify", "may_map", "LIBRARIES", "NEEDLES",
           "read_driver_module"]

# name -> regex on the mapped path
LIBRARIES: List[Tuple[str, "re.Pattern[str]"]] = [
    ("nccl", re.compile(r"/libnccl\.so(\.[\d.]+)?$")),
    ("libcuda", re.compile(r"/libcuda\.so(\.[\d.]+)?$")),
    ("cudart", re.compile(r"/libcudart\.so(\.[\d.]+)?$")),
    ("torch", re.compile(r"/torch/(lib/libtorch_cuda\.so|lib/libtorch_cpu\.so|_C\.[^/]*\.so)$")),
    ("flashinfer", re.compile(r"/flashinfer[^/]*/.*\.so$")),
    ("sgl-kernel", re.compile(r"/sgl_kernel/[^/]*\.so$")),
    ("vllm", re.compile(r"/vllm/_[A-Za-z_]*C\.[^/]*\.so$")),
]
# name -> (package directory relative to site-packages, dist-info name prefixes, version files)
_PACKAGES: Dict[str, Tuple[str, Tuple[str, ...], Tuple[str, ...]]] = {
    "torch": ("torch", ("torch",), ("version.py",)),
    "flashinfer": ("flashinfer", ("flashinfer_python", "flashinfer"),
                   ("_build_meta.py", "version.py", "__about__.py")),
    "sgl-kernel": ("sgl_kernel", ("sgl_kernel",), ("version.py",)),
    "vllm": ("vllm", ("vllm",), ("_version.py", "version.py")),
    "nccl": ("nvidia/nccl", ("nvidia_nccl",), ()),
    "cudart": ("nvidia/cuda_runtime", ("nvidia_cuda_runtime",), ()),
}
_VERSION_LINE = re.compile(
    r"""^\s*(?:__version__|version)\s*(?::\s*str\s*)?=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""",
    re.MULTILINE)
_TORCH_CUDA = re.compile(r"""^cuda\s*(?::[^=\n]*)?=\s*['"]([^'"]+)['"]""", re.MULTILINE)
_FILE_VERSION = re.compile(r"\.so\.(\d+(?:\.\d+)+)$")
_FLASHINFER_CACHE = re.compile(r"/flashinfer/(\d+\.\d+\.\d+[^/]*)/")
_MAX_VERSION_FILE = 1 << 16

Cache = Dict[Tuple[str, str], Dict[str, str]]


def parse_maps(text: str) -> List[Tuple[str, str]]:
    """(path, "dev:inode") of every file mapped, in order of first mapping, without repeats."""
    out: List[Tuple[str, str]] = []
    seen = set()
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        path = parts[5]
        if path.endswith(" (deleted)"):
            path = path[:-len(" (deleted)")]
        key = f"{parts[3]}:{parts[4]}"
        if (path, key) not in seen:
            seen.add((path, key))
            out.append((path, key))
    return out


# what a path ``LIBRARIES`` knows holds, by name: a maps text without any of a name's needles
# maps none of its libraries (a 2,000-process tree's maps are not split into lines for nothing)
NEEDLES: Dict[str, Tuple[str, ...]] = {
    "nccl": ("/libnccl.so",), "libcuda": ("/libcuda.so",), "cudart": ("/libcudart.so",),
    "torch": ("/torch/",), "flashinfer": ("/flashinfer",), "sgl-kernel": ("/sgl_kernel/",),
    "vllm": ("/vllm/",)}


def may_map(text: str, names: Iterable[str]) -> bool:
    """False when a maps ``text`` cannot hold a library of ``names`` (``NEEDLES``)."""
    return any(n in text for name in names for n in NEEDLES.get(name, ("/",)))


def identify(path: str) -> Optional[str]:
    for name, rx in LIBRARIES:
        if rx.search(path):
            return name
    return None


def _read_small(pid: int, path: str, root: str) -> Optional[str]:
    try:
        return read_target_file(pid, path, max_bytes=_MAX_VERSION_FILE, owned=False,
                                root=root).data.decode("utf-8", "replace")
    except TargetFileRefused:
        return None


def _package_root(path: str, pkg_dir: str) -> Optional[str]:
    """The site-packages directory of ``path`` (the one that holds ``pkg_dir``)."""
    i = path.rfind("/" + pkg_dir + "/")
    return path[:i] if i >= 0 else None


def _dist_version(pid: int, site: str, prefixes: Tuple[str, ...], root: str
                  ) -> Optional[Tuple[str, str]]:
    """(version, "dist-info name") of a distribution in ``site`` whose name starts with one of
    ``prefixes`` (nvidia_nccl_cu12-2.21.5.dist-info)."""
    try:
        names = list_target_dir(pid, site, root=root)
    except TargetFileRefused:
        return None
    for n in names:
        if not n.endswith(".dist-info"):
            continue
        dist, _, version = n[:-len(".dist-info")].rpartition("-")
        low = dist.lower().replace("-", "_").replace(".", "_")
        if any(low == p or low.startswith(p + "_") for p in prefixes):
            return version, n
    return None


def _package_version(name: str, path: str, pid: int, root: str) -> Optional[Dict[str, str]]:
    spec = _PACKAGES.get(name)
    if spec is None:
        return None
    pkg_dir, dists, files = spec
    site = _package_root(path, pkg_dir)
    if site is None:
        return None
    for fname in files:
        text = _read_small(pid, f"{site}/{pkg_dir}/{fname}", root)
        m = _VERSION_LINE.search(text or "")
        if m:
            out = {"version": m.group(1), "source": f"{pkg_dir}/{fname}"}
            cuda = _TORCH_CUDA.search(text or "") if name == "torch" else None
            if cuda:
                out["detail"] = f"cuda {cuda.group(1)}"
            return out
    found = _dist_version(pid, site, dists, root)
    if found:
        return {"version": found[0], "source": found[1]}
    return None


def _version_of(name: str, path: str, pid: int, mapped: Optional[str] = None,
                root: str = "/proc") -> Dict[str, str]:
    """{"version", "detail"?, "source"} of library ``name`` at ``path`` as ``pid`` sees it
    (``mapped``: the file itself, /proc/PID/map_files/RANGE)."""
    if name == "nccl" and mapped:
        found = elfver.nccl_version(mapped)
        if found:
            return {"version": found[0], "detail": found[1],
                    "source": "ELF .rodata \"NCCL version\" string"}
    m = _FILE_VERSION.search(path)
    full = m.group(1) if m else ""
    if name == "libcuda" and full:
        return {"version": full, "source": "file name"}
    if name in ("nccl", "cudart") and full.count(".") >= 2:
        return {"version": full, "source": "file name"}
    if name == "flashinfer":
        c = _FLASHINFER_CACHE.search(path)
        if c:
            return {"version": c.group(1), "source": "JIT cache path"}
    pkg = _package_version(name, path, pid, root)
    if pkg:
        return pkg
    if full:
        return {"version": full, "source": "file name (major version only)"}
    return {}


def mapped_files(text: str, pid: int, root: str) -> Dict[str, str]:
    """{"dev:inode": /proc/PID/map_files/RANGE} of the first mapping of each file: the very
    file the process maps, whatever its path names now."""
    out: Dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            out.setdefault(f"{parts[3]}:{parts[4]}", f"{root}/{pid}/map_files/{parts[0]}")
    return out


def libs_of(pid: int, root: str = "/proc", cache: Optional[Cache] = None
            ) -> Optional[List[Dict[str, str]]]:
    """Known libraries mapped by ``pid`` with their versions; None when maps is unreadable."""
    try:
        with open(f"{root}/{pid}/maps", "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    out: List[Dict[str, str]] = []
    if not may_map(text, NEEDLES):
        return out
    cache = {} if cache is None else cache
    names = set()
    mapped = mapped_files(text, pid, root)
    for path, key in parse_maps(text):
        name = identify(path)
        if name is None or name in names:
            continue
        names.add(name)
        ck = (path, key)
        if ck not in cache:
            cache[ck] = _version_of(name, path, pid, mapped.get(key), root)
        entry = {"name": name, "path": path}
        entry.update(cache[ck])
        out.append(entry)
    return out


def read_driver_module(sys_root: str = "/sys", ts: Optional[float] = None
                       ) -> Optional[LoadedLibs]:
    """The NVIDIA kernel module's version (pid 0), None when the module is not loaded."""
    text = procfs.read_text(f"{sys_root}/module/nvidia/version")
    if not text or not text.strip():
        return None
    return LoadedLibs(ts=time.time() if ts is None else ts, pid=0, libs=[
        {"name": "nvidia.ko", "version": text.strip(), "path": "",
         "source": "/sys/module/nvidia/version"}])


def read_loaded_libs(pids: Iterable[int], root: str = "/proc", sys_root: str = "/sys",
                     ts: Optional[float] = None) -> list:
    """``LoadedLibs`` per process (module doc), the kernel module's, and notes.
    Where each version comes from (``source``):

    - NCCL: the "NCCL version" string in .rodata (elfver.py, pyelftools), else the file name
    (libnccl.so.2.21.5), else the pip distribution that installed it (nvidia_nccl_cu12-2.21.5);

    - libcuda: its file name (libcuda.so.580.159.04: the driver version);

    - libcudart: the file name when it has the full version, else the pip distribution, else the
    file name's major version;

    - Python packages: their version file (torch/version.py, vllm/_version.py, ...), else the
    ``*.dist-info`` directory beside the package; flashinfer's JIT cache path carries its version
    too (~/.cache/flashinfer/0.2.5/...);

    - the kernel module: /sys/module/nvidia/version."""
    now = time.time() if ts is None else ts
    cache: Cache = {}
    out: list = []
    for pid in pids:
        libs = libs_of(pid, root, cache)
        if libs is None:
            if os.path.exists(f"{root}/{pid}"):
                out.append(EvidenceNote(ts=now, what="libs", pid=pid,
                                        why="maps not readable (run as root or as its owner)"))
            continue
        out.append(LoadedLibs(ts=now, pid=pid, libs=libs))
    drv = read_driver_module(sys_root, now)
    if drv is not None:
        out.append(drv)
    return out
