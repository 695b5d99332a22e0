"""hangtrace's BPF programs, loaded by whichever loader can: what each needs (map sizes,
settings, cflags) is said here once for both.

Contract:
- ``load(name, loaders)`` -> (Program, notes): bpf/NAME.bpf.c through the first of
  ``loaders`` (default loader.preferred()) that can load here (how each loader takes it, and
  the fall back to BCC: its docstring). Raises ToolMissing (one line) when no loader can,
  OSError when the load failed.
- ``load_hangtrace(loaders)``: load("hangtrace", loaders), attached.
- ``load_cuda_calls(loaders)``: load("cuda_calls", loaders): its uprobes are attached by
  the caller (ebpf/cuda_uprobes.py).
"""
from __future__ import annotations

import ctypes as ct
from typing import Dict, List, Optional, Sequence, Tuple

from ....errors import ToolMissing
from . import layout as L
from .env import (CFLAGS, choose, compile_flags, describe_loader, pid_max,
                  loader_problems, setting_flags, settings)
from .loader import Program, preferred
from .source import bcc_text, object_path

__all__ = ["load", "load_hangtrace", "load_cuda_calls", "describe_loader"]   # (env's)

# Arrays indexed by pid: sized to the running kernel's pid_max at load.
_PID_ARRAYS = {"hangtrace": ("procs", "blocked", "cachecpu")}
# Programs whose entry points the caller attaches (uprobes, to a file it chooses).
_MANUAL = ("cuda_calls",)


def _libbpf(name: str) -> Program:
    from .core_loader import CoreProgram
    sizes: Dict[str, int] = {m: pid_max() for m in _PID_ARRAYS.get(name, ())}
    mirror = {n: ct.sizeof(c) for n, c in L.STRUCTS.items()} if name == "hangtrace" else {}
    return CoreProgram(str(object_path(name)), max_entries=sizes,
                       settings=settings(name),
                       attach=name not in _MANUAL, struct_sizes=mirror)


def _bcc(name: str) -> Program:
    from .bcc_loader import BccProgram
    flags = compile_flags() if name == "hangtrace" else [*CFLAGS, "-DHT_BCC",
                                                         *setting_flags(name)]
    return BccProgram(bcc_text(name), flags)


def load(name: str, loaders: Optional[Sequence[str]] = None) -> Tuple[Program, List[str]]:
    """bpf/NAME.bpf.c, loaded (module doc).
    Through the first loader that can (loader.choose): libbpf opens bpf/NAME.bpf.o
    (source.object_path) with the pid arrays sized to kernel.pid_max and the settings of
    env.settings() (an object whose structs differ from layout.py's is refused); BCC compiles
    source.bcc_text(NAME) with env.compile_flags(). When libbpf was chosen but its load fails (a
    verifier or CO-RE relocation this kernel rejects) and BCC is allowed and can load, BCC loads it
    and ``notes`` says why."""
    names = tuple(loaders or preferred())
    chosen, why = choose(names, objects=(name,))
    if chosen is None:
        raise ToolMissing(f"eBPF: {why}")
    if chosen == "bcc":
        return _bcc(name), []
    try:
        return _libbpf(name), []
    except OSError as exc:
        if "bcc" not in names or loader_problems(("bcc",), (name,))["bcc"] is not None:
            raise
        return _bcc(name), [f"libbpf could not load {object_path(name).name} ({exc}): "
                            "BCC compiled it instead"]


def load_hangtrace(loaders: Optional[Sequence[str]] = None) -> Tuple[Program, List[str]]:
    return load("hangtrace", loaders)


def load_cuda_calls(loaders: Optional[Sequence[str]] = None) -> Tuple[Program, List[str]]:
    return load("cuda_calls", loaders)

