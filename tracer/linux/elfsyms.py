"""The function symbols of an ELF shared object, with the file offsets a uprobe attaches to.

Contract: ``function_symbols(path)`` -> {name: (address, file offset)} of every defined
STT_FUNC / STT_GNU_IFUNC symbol of .dynsym and .symtab (ELF64 little-endian) whose name ends
within ``MAX_NAME`` bytes, of at most ``MAX_SYMBOLS`` entries; the offset is what a uprobe takes;
a name listed twice keeps its .dynsym entry; aliases stay (the caller deduplicates). ValueError
for another file (or more symbols; open_mapped_file's refusals), OSError when unreadable,
Cancelled on a stop inside the walk (cancel.py). By hand (why: its docstring), cached (symcache).
``section_headers_problem(f)``: None when the section and program header tables an ELF header
claims fit the file and ``MAX_SECTIONS``, else why not: asked before pyelftools (which walks
every section claimed).
"""
from __future__ import annotations

import os
import struct
from typing import BinaryIO, Dict, List, Optional, Tuple

from . import cancel, symcache
from .target_files import TargetFileRefused, open_mapped_file

__all__ = ["function_symbols", "section_headers_problem", "MAX_BYTES", "MAX_SECTIONS"]

MAX_BYTES = 1 << 30                      # libcuda is ~100 MiB, a fat libnccl ~400 MiB
MAX_SECTIONS = 1 << 14                   # a shared object has ~40; pyelftools ~12 us each
MAX_SYMBOLS = 1 << 21                    # libLLVM-15 has ~100,000
MAX_NAME = 4096                          # bytes of one name (NUL excluded): longer ones skipped

_SHT_SYMTAB, _SHT_DYNSYM = 2, 11
_STT_FUNC, _STT_GNU_IFUNC = 2, 10
_SHN_UNDEF, _SHN_LORESERVE = 0, 0xFF00
_KIND = "functions"
_SHDR = struct.Struct("<IIQQQQIIQQ")     # Elf64_Shdr
_SYM = struct.Struct("<IBBHQQ")          # Elf64_Sym


def _sections(data: bytes) -> List[Tuple[int, ...]]:
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    if shentsize != _SHDR.size or shoff + shnum * shentsize > len(data):
        raise ValueError("ELF section headers out of the file")
    return [_SHDR.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]


def section_headers_problem(f: BinaryIO) -> Optional[str]:
    """None when the header tables of the ELF file ``f`` fit it (module doc), else why not.
    e_shnum 0 means section 0's sh_size counts them, e_shstrndx 0xFFFF its sh_link, e_phnum
    0xFFFF its sh_info (the ELF extended numbering)."""
    size = os.fstat(f.fileno()).st_size
    f.seek(0)
    head = f.read(64)
    if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
        return "not an ELF file"
    end = "<" if head[5] == 1 else ">"
    wide = head[4] == 2
    fields = struct.unpack_from(end + ("QQIHHHHHH" if wide else "IIIHHHHHH"), head,
                                0x20 if wide else 0x1C)
    phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, shstrndx = fields
    want = 64 if wide else 40
    if shoff and (shentsize != want or shoff + want > size):
        return "section headers out of the file"
    if shoff and (shnum == 0 or shstrndx == 0xFFFF or phnum == 0xFFFF):
        f.seek(shoff)
        sec0 = f.read(want)
        if len(sec0) < want:
            return "section headers out of the file"
        sh_size, sh_link, sh_info = struct.unpack_from(
            end + ("QII" if wide else "III"), sec0, 32 if wide else 20)
        shnum = sh_size if shnum == 0 else shnum
        shstrndx = sh_link if shstrndx == 0xFFFF else shstrndx
        phnum = sh_info if phnum == 0xFFFF else phnum
    if shnum > MAX_SECTIONS:
        return f"claims {shnum} sections (more than {MAX_SECTIONS})"
    if shoff + shnum * shentsize > size or (shnum and shstrndx >= shnum):
        return f"claims {shnum} sections, which the file does not hold"
    if phnum and (phoff + phnum * phentsize > size or phnum > MAX_SECTIONS):
        return f"claims {phnum} program headers, which the file does not hold"
    return None


def function_symbols(path: str) -> Dict[str, Tuple[int, int]]:
    """{name: (address, file offset)} of the functions ``path`` defines (module doc). The offset is
    the address's place in the file: its section's sh_offset + the distance from sh_addr. Why a
    second ELF reader beside pyelftools (versions, frame names): this one runs at attach, on
    libcuda, in the time before the probes are on. bench/elf_readers.py reads the same symbols both
    ways (same result): libLLVM-15.so.1 (112 MiB, 36,687 functions) 0.20 s here against 2.9-3.3 s
    with pyelftools, libc.so.6 0.006 s against 0.10 s (15-18x, 2-core VM, 2026-12-02).
    tests/unit/test_elfsyms.py checks that both agree on real libraries."""
    try:
        with open_mapped_file(path, max_bytes=MAX_BYTES) as f:
            key = symcache.file_key(os.fstat(f.fileno()))
            cached = _from_doc(symcache.load(_KIND, key))
            if cached is not None:
                return cached
            data = f.read(MAX_BYTES)
    except TargetFileRefused as exc:
        raise ValueError(f"{path}: {exc}") from None
    out = _read(data)
    symcache.store(_KIND, key, out)
    return out


def _from_doc(doc: object) -> Optional[Dict[str, Tuple[int, int]]]:
    """{name: (address, offset)} from a cache entry, or None when it is not one."""
    if not isinstance(doc, dict):
        return None
    out: Dict[str, Tuple[int, int]] = {}
    for name, v in cancel.checked(doc.items()):
        if not (isinstance(v, list) and len(v) == 2 and type(v[0]) is int
                and type(v[1]) is int and v[0] > 0 and v[1] >= 0 and name):
            return None
        out[name] = (v[0], v[1])
    return out


def _read(data: bytes) -> Dict[str, Tuple[int, int]]:
    """The functions of an ELF file's content (function_symbols)."""
    sections = _sections(data)
    out: Dict[str, Tuple[int, int]] = {}
    walked = 0
    for kind in (_SHT_DYNSYM, _SHT_SYMTAB):
        for sh in sections:
            if sh[1] != kind:
                continue
            _, _, _, _, off, size, link, _, _, entsize = sh
            if entsize != _SYM.size or link >= len(sections) or off + size > len(data):
                continue
            strtab_off = sections[link][4]
            strtab_end = min(strtab_off + sections[link][5], len(data))
            count = size // entsize
            if walked + count > MAX_SYMBOLS:
                raise ValueError(f"more than {MAX_SYMBOLS} symbols")
            walked += count
            for i in range(count):
                if i % cancel.EVERY == 0:
                    cancel.check()      # a stop inside the walk, not after (linux/cancel.py)
                name_off, info, _, shndx, value, _ = _SYM.unpack_from(data, off + i * entsize)
                if info & 0xF not in (_STT_FUNC, _STT_GNU_IFUNC) or not value \
                        or shndx == _SHN_UNDEF or shndx >= min(_SHN_LORESERVE, len(sections)):
                    continue
                # each name's end looked for in at most MAX_NAME bytes of its own table: a
                # NUL-less table made the lookup quadratic (3,000 names over 16 MB: minutes)
                start = strtab_off + name_off
                end = data.find(b"\0", start, min(start + MAX_NAME, strtab_end))
                if end < 0:
                    continue
                name = data[start:end].decode("utf-8", "replace")
                if name and name not in out:
                    sec = sections[shndx]
                    out[name] = (value, value - sec[3] + sec[4])
    return out
