"""Native frames of a blocked thread without stopping it: its pc and the return addresses found
on its user stack, named from the ELF symbols of the mapped files.

Contract:
- ``is_call_site(code)`` is pure: whether the bytes just before a candidate return address end
  with an x86-64 call instruction, the check that tells a return address from any other
  pointer into code.
- ``scan_thread(pid, tid, maps)`` -> one ``NativeStack`` (source "stack-scan") for a thread
  that sits in a system call or is blocked outside one; how it scans and what it names: its
  docstring. These are candidates, not an unwind: a stale return address left in a live frame
  shows too (the event says "stack-scan").
x86-64 only (the call encodings); elsewhere the pc alone is named.
"""
from __future__ import annotations

import bisect
import os
import platform
import re
import struct
import time
from typing import List, Optional, Sequence, Tuple

from ...events.stacks import NativeStack
from ...linux import procfs
from .elfsyms import Mapping, SymbolTable, load_bias, symbols

__all__ = ["is_call_site", "scan_thread", "SCAN_BYTES", "MAX_FRAMES", "NAMED"]

SCAN_BYTES = 32 << 10
MAX_FRAMES = 32
NAMED = re.compile(r"^(libc\.so|libpthread|libcuda\.so|libcudart|libnccl|libcublas|libcudnn|"
                   r"libpython|python[\d.]*$|ld-linux)")
X86 = platform.machine() in ("x86_64", "AMD64")


def is_call_site(code: bytes) -> bool:
    """``code``: the 7 bytes before a candidate return address (module doc). An instruction of
    length L that ends at the address starts at ``code[7 - L]``.
    The call encodings: ``e8 rel32``, ``ff /2`` through a register or memory."""
    if len(code) < 7:
        return False
    c = code
    rex = (0x40 <= c[3] <= 0x4F, 0x40 <= c[4] <= 0x4F)
    return (c[2] == 0xE8                                                  # call rel32
            or (c[1] == 0xFF and (c[2] == 0x15 or 0x90 <= c[2] <= 0x97 and c[2] != 0x94))
            or (c[0] == 0xFF and c[1] == 0x94)                            # *disp32(sib)
            or (c[5] == 0xFF and (0xD0 <= c[6] <= 0xD7 or 0x10 <= c[6] <= 0x17
                                  and c[6] not in (0x14, 0x15)))          # *%reg, *(%reg)
            or (rex[1] and c[5] == 0xFF and 0xD0 <= c[6] <= 0xD7)           # *%r8..%r15
            or (c[4] == 0xFF and 0x50 <= c[5] <= 0x57 and c[5] != 0x54)   # *disp8(%reg)
            or (c[3] == 0xFF and c[4] == 0x54)                            # *disp8(sib)
            or (rex[0] and c[4] == 0xFF and 0x50 <= c[5] <= 0x57))          # *disp8(%r8..)


def _regs(pid: int, tid: int) -> Tuple[Optional[int], Optional[int], str]:
    text = procfs.read_text(f"/proc/{pid}/task/{tid}/syscall")
    if text is None:
        return None, None, "/proc/PID/task/TID/syscall not readable (root or ptrace rights needed)"
    parts = text.split()
    if not parts or parts[0] == "running":
        return None, None, ("the thread was running: its registers cannot be read without "
                            "stopping it")
    try:
        return int(parts[-2], 16), int(parts[-1], 16), ""
    except (ValueError, IndexError):
        return None, None, f"unexpected /proc syscall line {text.strip()[:40]!r}"


class _Code:
    """The executable file mappings of a process, searchable by address."""

    def __init__(self, maps: Sequence[Mapping]) -> None:
        self.maps = list(maps)
        self.code = sorted((m for m in maps if "x" in m.perms), key=lambda m: m.start)
        self.starts = [m.start for m in self.code]
        self._bias: dict = {}
        self._tables: dict = {}

    def bias(self, path: str) -> Optional[int]:
        if path not in self._bias:
            self._bias[path] = load_bias(path, self.maps)
        return self._bias[path]

    def table(self, m: Mapping) -> SymbolTable:
        """The symbols of the file ``m`` maps, read through its map_files entry."""
        if m.path not in self._tables:
            self._tables[m.path] = symbols(m.path, m.file)
        return self._tables[m.path]

    def at(self, addr: int) -> Optional[Mapping]:
        i = bisect.bisect_right(self.starts, addr) - 1
        return self.code[i] if i >= 0 and addr < self.code[i].end else None


def _mapping(maps: Sequence[Mapping], addr: int) -> Optional[Mapping]:
    for m in maps:
        if m.start <= addr < m.end:
            return m
    return None


def _name(addr: int, code: _Code) -> Tuple[str, str]:
    m = code.at(addr) or _mapping(code.maps, addr)
    maps = code.maps
    if m is None:
        return f"0x{addr:x}", ""
    lib = os.path.basename(m.path)
    bias = code.bias(m.path) if NAMED.match(lib) else None
    if bias is not None:
        hit = code.table(m).lookup(addr - bias)
        if hit is not None:
            return f"{hit[0]}+0x{hit[1]:x} ({lib})", m.path
    base = next((x.start for x in maps if x.path == m.path and x.offset == 0), m.start)
    return f"0x{addr:x} ({lib}+0x{addr - base:x})", m.path


def _pread(fd: int, size: int, at: int) -> bytes:
    try:
        return os.pread(fd, size, at)
    except (OSError, OverflowError, ValueError):
        return b""


def scan_thread(pid: int, tid: int, maps: Sequence[Mapping],
                now: Optional[float] = None, regions: Optional[List[Mapping]] = None
                ) -> NativeStack:
    """The native frames of one thread (module doc); ``regions``: every mapping of the
    process (``all_mappings``), read once per process by a caller that scans many threads.
    /proc/PID/task/TID/syscall gives the thread's sp and pc (a running thread's registers cannot be
    read without stopping it: ``error`` says so). It reads at most ``SCAN_BYTES`` of the stack
    upwards from sp through /proc/PID/mem (read-only, pread: the thread never stops) and keeps at
    most ``MAX_FRAMES`` words that point just after a call in an executable mapping. Symbols are
    read only for the files worth naming cheaply (``NAMED``: libc, the CUDA, NCCL and cuBLAS
    libraries, libpython and the executable); other frames are "0x7f..+0x1a2 (libfoo.so)"."""
    ts = time.time() if now is None else now
    sp, pc, why = _regs(pid, tid)
    if sp is None or pc is None:
        return NativeStack(ts=ts, pid=pid, tid=tid, source="stack-scan", error=why)
    code = _Code(maps)
    frames, libs = [], []
    name, lib = _name(pc, code)
    frames.append(name)
    libs.append(lib)
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        return NativeStack(ts=ts, pid=pid, tid=tid, frames=frames, libs=libs,
                           source="stack-scan", error=f"/proc/PID/mem: {exc.strerror}")
    try:
        stack = _mapping(regions if regions is not None else all_mappings(pid), sp)
        top = min(sp + SCAN_BYTES, stack.end if stack else sp + SCAN_BYTES)
        data = _pread(fd, max(0, top - sp), sp) if X86 else b""
        for (word,) in struct.iter_unpack("<Q", data[:len(data) // 8 * 8]):
            if code.at(word) is None or not is_call_site(_pread(fd, 7, word - 7)):
                continue
            name, lib = _name(word, code)
            frames.append(name)
            libs.append(lib)
            if len(frames) >= MAX_FRAMES:
                break
    finally:
        os.close(fd)
    return NativeStack(ts=ts, pid=pid, tid=tid, frames=frames, libs=libs, source="stack-scan")


def all_mappings(pid: int) -> List[Mapping]:
    """Every mapping (anonymous ones too: thread stacks), for finding the stack's end."""
    text = procfs.read_text(f"/proc/{pid}/maps") or ""
    out = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        try:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
        except (ValueError, IndexError):
            continue
        out.append(Mapping(lo, hi, parts[1] if len(parts) > 1 else "", 0,
                           parts[5] if len(parts) > 5 else ""))
    return out
