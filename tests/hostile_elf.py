"""Hostile ELF files a target may map under a library's name (issue 46 item 5), built in bytes.

- ``symbol_bomb(n_symbols, strtab_bytes)``: an ELF64 shared object whose .dynsym holds
  ``n_symbols`` defined functions, every name starting in one string table of ``strtab_bytes``
  bytes with no NUL in it: a reader that looks each name's end up over the whole table is
  quadratic.
- ``named_symbol_bomb(n_symbols)``: an ELF64 shared object of ``n_symbols`` defined functions,
  each with a short name of its own (``cuX0000000``...): every bound holds (names end at once,
  far fewer than 2**21 symbols), so only a stop inside the walk ends it early.
- ``section_count_bomb(claimed)``: a 4 KiB ELF64 file whose header says e_shnum 0, so that
  section 0's sh_size (``claimed``, e.g. 2**40) counts the sections, which the file cannot hold.
"""
from __future__ import annotations

import struct

__all__ = ["symbol_bomb", "named_symbol_bomb", "section_count_bomb"]

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")


def _ehdr(shoff: int, shnum: int, shstrndx: int) -> bytes:
    ident = b"\x7fELF\x02\x01\x01" + bytes(9)
    return _EHDR.pack(ident, 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, _SHDR.size, shnum, shstrndx)


def symbol_bomb(n_symbols: int, strtab_bytes: int) -> bytes:
    """Sections: null, .text (PROGBITS at 0x1000), .dynsym (n_symbols), .dynstr (NUL-less),
    .shstrtab."""
    shstr = b"\0.text\0.dynsym\0.dynstr\0.shstrtab\0"
    text_off, text_size = 0x1000, 0x1000
    syms = _SYM.pack(0, 0, 0, 0, 0, 0) + b"".join(
        _SYM.pack(i * 7 % max(strtab_bytes - 1, 1), 0x12, 0, 1, text_off + (i % 0x1000), 1)
        for i in range(n_symbols))
    sym_off = text_off + text_size
    str_off = sym_off + len(syms)
    shstr_off = str_off + strtab_bytes
    sh_off = (shstr_off + len(shstr) + 7) & ~7
    shdrs = [
        _SHDR.pack(0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        _SHDR.pack(1, 1, 6, text_off, text_off, text_size, 0, 0, 16, 0),
        _SHDR.pack(7, 11, 2, sym_off, sym_off, len(syms), 3, 1, 8, _SYM.size),
        _SHDR.pack(15, 3, 2, str_off, str_off, strtab_bytes, 0, 0, 1, 0),
        _SHDR.pack(23, 3, 0, 0, shstr_off, len(shstr), 0, 0, 1, 0),
    ]
    out = bytearray(_ehdr(sh_off, len(shdrs), 4))
    out += bytes(text_off - len(out)) + b"\xc3" * text_size + syms + b"A" * strtab_bytes + shstr
    out += bytes(sh_off - len(out)) + b"".join(shdrs)
    return bytes(out)


def named_symbol_bomb(n_symbols: int) -> bytes:
    """Sections as ``symbol_bomb``'s, the string table holding a name per symbol."""
    shstr = b"\0.text\0.dynsym\0.dynstr\0.shstrtab\0"
    text_off, text_size = 0x1000, 0x1000
    width = 11                                  # b"cuX%07d\0"
    strtab = b"\0" + b"".join(b"cuX%07d\0" % i for i in range(n_symbols))
    syms = bytearray(_SYM.size * (n_symbols + 1))
    for i in range(n_symbols):
        _SYM.pack_into(syms, _SYM.size * (i + 1), 1 + i * width, 0x12, 0, 1,
                       text_off + (i % text_size), 1)
    sym_off = text_off + text_size
    str_off = sym_off + len(syms)
    shstr_off = str_off + len(strtab)
    sh_off = (shstr_off + len(shstr) + 7) & ~7
    shdrs = [
        _SHDR.pack(0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        _SHDR.pack(1, 1, 6, text_off, text_off, text_size, 0, 0, 16, 0),
        _SHDR.pack(7, 11, 2, sym_off, sym_off, len(syms), 3, 1, 8, _SYM.size),
        _SHDR.pack(15, 3, 2, str_off, str_off, len(strtab), 0, 0, 1, 0),
        _SHDR.pack(23, 3, 0, 0, shstr_off, len(shstr), 0, 0, 1, 0),
    ]
    out = bytearray(_ehdr(sh_off, len(shdrs), 4))
    out += bytes(text_off - len(out)) + b"\xc3" * text_size + syms + strtab + shstr
    out += bytes(sh_off - len(out)) + b"".join(shdrs)
    return bytes(out)


def section_count_bomb(claimed: int = 1 << 40, size: int = 4096) -> bytes:
    """e_shnum 0 and e_shstrndx SHN_XINDEX: section 0's sh_size and sh_link say the count and
    the names' section; ``claimed`` sections of 64 bytes do not fit ``size`` bytes."""
    sh_off = 64
    sec0 = _SHDR.pack(0, 0, 0, 0, 0, claimed, 1, 0, 0, 0)
    out = _ehdr(sh_off, 0, 0xFFFF) + sec0
    return out + bytes(size - len(out))
