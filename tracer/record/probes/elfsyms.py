"""Symbols of the files a process maps, for naming addresses (native frames, the GIL).

Contract:
- ``parse_maps(text)`` is pure: /proc/PID/maps lines -> ``Mapping`` (start, end, perms,
  offset, path) for file-backed mappings.
- ``load_bias(path, mappings)``: what to add to the file's symbol values to get addresses in
  the process (its docstring says how).
- ``symbols(path)``: the file's function and object symbols as a ``SymbolTable`` (cached per
  path, size and mtime); ``lookup(value)`` names a value only when it lies inside a symbol:
  an address in a stripped function gets no name, never a wrong one. Bounded (``MAX_SYMBOLS``,
  ``MAX_SECONDS``); files that cannot be read give an empty table and ``why``.
Needs pyelftools (a dependency); without it every table is empty with that reason.
"""
from __future__ import annotations

import bisect
import os
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

__all__ = ["Mapping", "parse_maps", "read_maps", "load_bias", "symbols", "SymbolTable",
           "MAX_SYMBOLS"]

MAX_SYMBOLS = 400_000
MAX_SECONDS = 3.0


@dataclass(frozen=True)
class Mapping:
    start: int
    end: int
    perms: str
    offset: int
    path: str


def parse_maps(text: str) -> List[Mapping]:
    """File-backed mappings of a /proc/PID/maps content (module doc)."""
    out = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        try:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            out.append(Mapping(lo, hi, parts[1], int(parts[2], 16),
                               parts[5].removesuffix(" (deleted)")))
        except ValueError:
            continue
    return out


def read_maps(pid: int) -> List[Mapping]:
    try:
        with open(f"/proc/{pid}/maps") as f:
            return parse_maps(f.read())
    except OSError:
        return []


@dataclass
class SymbolTable:
    """A file's function and object symbols; ``lookup(value)`` names a value only when it lies
    inside a symbol (value..value+size)."""
    path: str
    starts: List[int] = field(default_factory=list)
    ends: List[int] = field(default_factory=list)
    names: List[str] = field(default_factory=list)
    by_name: Dict[str, Tuple[int, int]] = field(default_factory=dict)
    first_load: int = 0              # page-aligned vaddr of the first PT_LOAD
    pie: bool = True                 # ET_DYN (a shared object or PIE executable)
    why: str = ""

    def lookup(self, value: int) -> Optional[Tuple[str, int]]:
        """(name, offset into it) of the symbol containing file value ``value``, or None."""
        i = bisect.bisect_right(self.starts, value) - 1
        if i >= 0 and value < self.ends[i]:
            return self.names[i], value - self.starts[i]
        return None


_CACHE: Dict[Tuple[str, int, float], SymbolTable] = {}


def symbols(path: str) -> SymbolTable:
    """The symbol table of ``path`` (module doc).
    Read from .symtab, else .dynsym; at most ``MAX_SYMBOLS`` symbols and ``MAX_SECONDS`` of reading
    per file."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return SymbolTable(path, why=f"{path}: {exc.strerror}")
    key = (path, st.st_size, st.st_mtime)
    if key not in _CACHE:
        _CACHE[key] = _read(path)
    return _CACHE[key]


def _read(path: str) -> SymbolTable:
    table = SymbolTable(path)
    try:
        from elftools.elf.elffile import ELFFile
        from elftools.common.exceptions import ELFError
    except ImportError:
        table.why = "pyelftools is not installed"
        return table
    rows: List[Tuple[int, int, str]] = []
    deadline = time.monotonic() + MAX_SECONDS
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            table.pie = elf["e_type"] == "ET_DYN"
            loads = [s for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
            if loads:
                align = max(int(loads[0]["p_align"]), 1)
                table.first_load = int(loads[0]["p_vaddr"]) & ~(align - 1)
            sec = elf.get_section_by_name(".symtab") or elf.get_section_by_name(".dynsym")
            for n, sym in enumerate(sec.iter_symbols() if sec is not None else ()):
                if n >= MAX_SYMBOLS or (n & 1023 == 0 and time.monotonic() > deadline):
                    table.why = f"{os.path.basename(path)}: symbols read in part (bounded)"
                    break
                if sym["st_info"]["type"] in ("STT_FUNC", "STT_OBJECT") and sym["st_value"] \
                        and sym["st_shndx"] != "SHN_UNDEF":
                    rows.append((int(sym["st_value"]), int(sym["st_size"]), sym.name))
    except (OSError, ELFError, ValueError, KeyError) as exc:
        table.why = f"{os.path.basename(path)}: not readable as ELF ({exc})"
        return table
    rows.sort()
    for start, size, name in rows:
        table.starts.append(start)
        table.ends.append(start + max(size, 1))
        table.names.append(name)
        table.by_name.setdefault(name, (start, size))
    return table


def load_bias(path: str, mappings: Sequence[Mapping]) -> Optional[int]:
    """The load bias of ``path`` in a process with ``mappings`` (module doc).
    0 for a non-PIE executable; for a shared object or PIE, the start of its mapping at file offset
    0 less the first PT_LOAD's page-aligned vaddr."""
    table = symbols(path)
    if not table.pie:
        return 0
    mine = [m for m in mappings if m.path == path]
    base = next((m.start for m in mine if m.offset == 0), None)
    return None if base is None else base - table.first_load
