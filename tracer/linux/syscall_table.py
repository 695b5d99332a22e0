"""System call numbers -> names, and decoding of /proc/PID/task/TID/syscall.

Contract:
- ``X86_64`` and ``AARCH64`` are complete number -> name tables, read from the data files
  tracer/data/syscalls-MACHINE.txt (where they come from is written at their top).
  ``syscall_name`` never raises: unknown numbers read "syscall_<nr>".
- ``parse_proc_syscall`` decodes one line of /proc/.../syscall (see proc(5)): "running",
  "-1 SP PC" (blocked, but not inside a system call: a page fault, a stop) or
  "NR A0 A1 A2 A3 A4 A5 SP PC" (all hex but NR). Returns None for empty or garbled text
  (the file is unreadable without ptrace access, and empty while the thread exits).
- ``syscall_number(name, machine)`` is the reverse lookup ("futex" -> 202 on x86_64, 98 on
  aarch64). What a blocked call waits on is blocking.py's.
"""
from __future__ import annotations

import platform
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Dict, Optional, Tuple

__all__ = ["X86_64", "AARCH64", "CurrentSyscall", "syscall_name", "syscall_table",
           "syscall_number", "parse_proc_syscall"]

DATA = Path(__file__).resolve().parents[1] / "data"


def _read_table(machine: str) -> Dict[int, str]:
    """tracer/data/syscalls-MACHINE.txt: "NR NAME" lines, "#" lines are comments."""
    table: Dict[int, str] = {}
    for line in (DATA / f"syscalls-{machine}.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            nr, name = line.split()
            table[int(nr)] = name
    return table


X86_64: Dict[int, str] = _read_table("x86_64")
AARCH64: Dict[int, str] = _read_table("aarch64")

_TABLES: Dict[str, Dict[int, str]] = {
    "x86_64": X86_64, "amd64": X86_64, "aarch64": AARCH64, "arm64": AARCH64,
}


def syscall_table(machine: Optional[str] = None) -> Dict[int, str]:
    """The table for ``machine`` (platform.machine() spelling); this host's when None."""
    return _TABLES.get((machine or platform.machine()).lower(), X86_64)


def syscall_name(nr: int, machine: Optional[str] = None) -> str:
    """Name of system call ``nr`` ("futex"), or "syscall_<nr>" when the table lacks it."""
    return syscall_table(machine).get(nr, f"syscall_{nr}")


@lru_cache(maxsize=64)
def syscall_number(name: str, machine: Optional[str] = None) -> Optional[int]:
    """The number of system call ``name`` on ``machine`` (this host's when None), or None."""
    for nr, n in syscall_table(machine).items():
        if n == name:
            return nr
    return None


@dataclass(frozen=True, slots=True)
class CurrentSyscall:
    """One decoded /proc/.../syscall line.

    ``kind`` is "running" (on CPU, in user space or kernel), "outside" (blocked but not in a
    system call: "-1 SP PC") or "syscall" (in call ``nr``; ``args`` are the six raw registers).
    """
    kind: str
    nr: Optional[int] = None
    name: Optional[str] = None
    args: Tuple[int, ...] = ()
    sp: Optional[int] = None
    pc: Optional[int] = None


def parse_proc_syscall(text: str, machine: Optional[str] = None) -> Optional[CurrentSyscall]:
    """Decode /proc/PID/task/TID/syscall content; None when empty or unparsable."""
    parts = text.split()
    if not parts:
        return None
    if parts[0] == "running":
        return CurrentSyscall("running")
    try:
        nr = int(parts[0])
        values = tuple(int(p, 16) for p in parts[1:])
    except ValueError:
        return None
    if nr == -1 and len(values) == 2:
        return CurrentSyscall("outside", sp=values[0], pc=values[1])
    if nr < 0 or len(values) != 8:
        return None
    return CurrentSyscall("syscall", nr, syscall_name(nr, machine), values[:6], values[6], values[7])
