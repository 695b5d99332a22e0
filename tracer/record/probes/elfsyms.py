"""Symbols of the files a process maps, for naming addresses (native frames, the GIL).

Contract:
- ``parse_maps(text, pid=None)`` is pure: /proc/PID/maps lines -> ``Mapping`` (start, end,
  perms, offset, path, and with ``pid`` the mapping's /proc/PID/map_files entry) per file mapping.
- ``load_bias(path, mappings)``: what to add to the file's symbol values to get addresses in
  the process (its docstring says how).
- ``symbols(path, file=)``: the file's function and object symbols as a ``SymbolTable``, read
  from ``file`` (the map_files entry: the inode mapped, never what the name in maps is now),
  cached in the process and across runs (``_cached``); ``lookup(value)`` names a value only
  inside a symbol. Bounded (``MAX_SYMBOLS``, ``MAX_SECONDS``, ``MAX_BYTES``, header tables that
  fit: linux/elfsyms.section_headers_problem); a file not read: an empty table and ``why``.
"""
from __future__ import annotations

import bisect
import os
import time
from dataclasses import dataclass, field
from typing import BinaryIO, Dict, List, Optional, Sequence, Tuple

from ...linux import cancel, symcache
from ...linux.elfsyms import section_headers_problem
from ...linux.target_files import TargetFileRefused, open_mapped_file

__all__ = ["Mapping", "parse_maps", "read_maps", "load_bias", "symbols", "SymbolTable",
           "MAX_SYMBOLS"]

MAX_SYMBOLS = 400_000
MAX_SECONDS = 3.0
MAX_BYTES = 2 << 30


@dataclass(frozen=True)
class Mapping:
    start: int
    end: int
    perms: str
    offset: int
    path: str
    file: str = ""                   # /proc/PID/map_files/START-END, where the pid is known

    @property
    def opened(self) -> str:
        """What to open to read the mapped file: its map_files entry, else its name."""
        return self.file or self.path


def parse_maps(text: str, pid: Optional[int] = None) -> List[Mapping]:
    """File-backed mappings of a /proc/PID/maps content (module doc)."""
    out = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        try:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            out.append(Mapping(lo, hi, parts[1], int(parts[2], 16),
                               parts[5].removesuffix(" (deleted)"),
                               "" if pid is None else f"/proc/{pid}/map_files/{lo:x}-{hi:x}"))
        except ValueError:
            continue
    return out


def read_maps(pid: int) -> List[Mapping]:
    try:
        with open(f"/proc/{pid}/maps") as f:
            return parse_maps(f.read(), pid)
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
    sizes: List[int] = field(default_factory=list)     # st_size as read (0 for some)
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


_CACHE: Dict[Tuple[int, int, int, int], SymbolTable] = {}
_KIND = "elf-symbols"


def symbols(path: str, file: str = "") -> SymbolTable:
    """The symbol table of the file named ``path`` in maps, read from ``file`` (module doc).
    Read from .symtab, else .dynsym; at most ``MAX_SYMBOLS`` symbols and ``MAX_SECONDS`` of reading
    per file."""
    try:
        f = open_mapped_file(file or path, max_bytes=MAX_BYTES, fallback=path if file else None)
    except OSError as exc:
        return SymbolTable(path, why=f"{path}: {exc.strerror or exc}")
    except TargetFileRefused as exc:
        return SymbolTable(path, why=f"{path}: {exc}")
    with f:
        st = os.fstat(f.fileno())
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if key not in _CACHE:
            _CACHE[key] = _cached(path, f, symcache.file_key(st))
        return _CACHE[key]


def _cached(path: str, f: BinaryIO, key: str) -> SymbolTable:
    """The table of the opened file ``f``: from the cache across runs (linux/symcache.py: by
    the identity of ``f``, never its name) when it holds a sound one, else read and kept
    there when read whole."""
    table = _from_doc(path, symcache.load(_KIND, key))
    if table is not None:
        return table
    table = _read(path, f)
    if not table.why:
        symcache.store(_KIND, key, {"starts": table.starts, "sizes": table.sizes,
                                    "names": table.names, "first_load": table.first_load,
                                    "pie": table.pie})
    return table


def _from_doc(path: str, doc: object) -> Optional[SymbolTable]:
    """A SymbolTable from a cache entry, or None when the entry is not one (its shape, its
    types, its order: a damaged or hostile entry is read as none)."""
    if not isinstance(doc, dict):
        return None
    starts, sizes, names = doc.get("starts"), doc.get("sizes"), doc.get("names")
    first, pie = doc.get("first_load"), doc.get("pie")
    if not (isinstance(starts, list) and isinstance(sizes, list) and isinstance(names, list)
            and len(starts) == len(sizes) == len(names) <= MAX_SYMBOLS
            and type(first) is int and type(pie) is bool
            and all(type(v) is int and v >= 0 for v in starts)
            and all(type(v) is int and v >= 0 for v in sizes)
            and all(type(v) is str for v in names)
            and all(a <= b for a, b in zip(starts, starts[1:]))):
        return None
    table = SymbolTable(path, first_load=first, pie=pie)
    table.starts, table.sizes, table.names = starts, sizes, names
    table.ends = [s + max(n, 1) for s, n in zip(starts, sizes)]
    for start, size, name in zip(starts, sizes, names):
        table.by_name.setdefault(name, (start, size))
    return table


def _read(path: str, f: BinaryIO) -> SymbolTable:
    table = SymbolTable(path)
    try:
        from elftools.elf.elffile import ELFFile
        from elftools.elf.sections import SymbolTableSection
        from elftools.common.exceptions import ELFError
    except ImportError:
        table.why = "pyelftools is not installed"
        return table
    rows: List[Tuple[int, int, str]] = []
    deadline = time.monotonic() + MAX_SECONDS
    try:
        problem = section_headers_problem(f)
        if problem is not None:
            table.why = f"{os.path.basename(path)}: not readable as ELF ({problem})"
            return table
        f.seek(0)
        elf = ELFFile(cancel.CheckedReader(f, deadline))
        table.pie = elf["e_type"] == "ET_DYN"
        loads = [s for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
        if loads:
            align = max(int(loads[0]["p_align"]), 1)
            table.first_load = int(loads[0]["p_vaddr"]) & ~(align - 1)
        # by name, of the symbol table type: a section a file names .symtab may be any
        sec = next((x for x in (elf.get_section_by_name(".symtab"),
                                elf.get_section_by_name(".dynsym"))
                    if isinstance(x, SymbolTableSection)), None)
        for n, sym in enumerate(sec.iter_symbols() if sec is not None else ()):
            if n >= MAX_SYMBOLS or time.monotonic() > deadline:
                table.why = f"{os.path.basename(path)}: symbols read in part (bounded)"
                break
            if sym["st_info"]["type"] in ("STT_FUNC", "STT_OBJECT") and sym["st_value"] \
                    and sym["st_shndx"] != "SHN_UNDEF":
                rows.append((int(sym["st_value"]), int(sym["st_size"]), sym.name))
    except (OSError, ELFError, ValueError, KeyError) as exc:
        table.why = f"{os.path.basename(path)}: not readable as ELF ({exc})"
        return table
    except cancel.Cancelled:    # inside a name's read (CheckedReader): a stop, or the time
        if cancel.stopping():
            raise
        table.why = f"{os.path.basename(path)}: symbols read in part (bounded)"
    rows.sort()
    for start, size, name in rows:
        table.starts.append(start)
        table.ends.append(start + max(size, 1))
        table.sizes.append(size)
        table.names.append(name)
        table.by_name.setdefault(name, (start, size))
    return table


def load_bias(path: str, mappings: Sequence[Mapping]) -> Optional[int]:
    """The load bias of ``path`` in a process with ``mappings`` (module doc).
    0 for a non-PIE executable; for a shared object or PIE, the start of its mapping at file offset
    0 less the first PT_LOAD's page-aligned vaddr."""
    mine = [m for m in mappings if m.path == path]
    table = symbols(path, mine[0].file if mine else "")
    if not table.pie:
        return 0
    base = next((m.start for m in mine if m.offset == 0), None)
    return None if base is None else base - table.first_load
