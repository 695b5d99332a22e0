"""Native frames without py-spy (issue 24): x86-64 call-site check on real encodings, maps
parsing, ELF symbols and where _PyRuntime lies (checked against ctypes' own lookup)."""
from __future__ import annotations

import ctypes
import os
import platform

import pytest

from tracer.record.probes.elfsyms import load_bias, parse_maps, read_maps, symbols
from tracer.record.probes.pyruntime import python_runtime
from tracer.record.probes.stackscan import is_call_site


def _before(insn: bytes) -> bytes:
    """The 7 bytes before a return address that follows ``insn``."""
    return (b"\x90" * 7 + insn)[-7:]


@pytest.mark.parametrize("insn, call", [
    (bytes.fromhex("e8 10 20 30 40"), True),          # call rel32
    (bytes.fromhex("ff 15 00 10 00 00"), True),       # call *0x1000(%rip)
    (bytes.fromhex("ff 94 24 80 00 00 00"), True),    # call *0x80(%rsp)
    (bytes.fromhex("ff 90 18 01 00 00"), True),       # call *0x118(%rax)
    (bytes.fromhex("ff d0"), True),                   # call *%rax
    (bytes.fromhex("41 ff d3"), True),                # call *%r11
    (bytes.fromhex("ff 13"), True),                   # call *(%rbx)
    (bytes.fromhex("ff 50 08"), True),                # call *0x8(%rax)
    (bytes.fromhex("ff 54 24 08"), True),             # call *0x8(%rsp)
    (bytes.fromhex("41 ff 50 10"), True),             # call *0x10(%r8)
    (bytes.fromhex("48 89 c7"), False),               # mov %rax,%rdi
    (bytes.fromhex("c3"), False),                     # ret
    (bytes.fromhex("ff e0"), False),                  # jmp *%rax
    (bytes.fromhex("e9 10 20 30 40"), False),         # jmp rel32
    (b"", False),
])
def test_is_call_site(insn, call):
    assert is_call_site(_before(insn) if insn else b"") is call


MAPS = """00400000-0041f000 r--p 00000000 fe:00 260811                             /usr/bin/python3.11
0041f000-006d2000 r-xp 0001f000 fe:00 260811                             /usr/bin/python3.11
01a9c000-01c8f000 rw-p 00000000 00:00 0                                  [heap]
7f35584dc000-7f35584e2000 r--p 00000000 fe:00 337398                     /usr/lib/x86_64-linux-gnu/libc.so.6
7f35584e2000-7f35584f3000 r-xp 00006000 fe:00 337398                     /usr/lib/x86_64-linux-gnu/libc.so.6 (deleted)
7ffc31d74000-7ffc31d95000 rw-p 00000000 00:00 0                          [stack]
"""


def test_parse_maps_keeps_file_mappings():
    maps = parse_maps(MAPS)
    assert [(m.path, m.offset) for m in maps] == [
        ("/usr/bin/python3.11", 0), ("/usr/bin/python3.11", 0x1f000),
        ("/usr/lib/x86_64-linux-gnu/libc.so.6", 0), ("/usr/lib/x86_64-linux-gnu/libc.so.6", 0x6000)]
    assert maps[1].perms == "r-xp" and maps[0].start == 0x400000


@pytest.mark.skipif(platform.system() != "Linux", reason="/proc")
def test_pyruntime_address_is_the_interpreters_own():
    want = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
    rt = python_runtime(os.getpid())
    assert not rt.error, rt.error
    assert rt.addr == want and rt.size > 1000


def test_symbols_name_only_inside_a_symbol():
    libc = next((m.path for m in read_maps(os.getpid()) if "libc.so" in m.path), None)
    if libc is None:
        pytest.skip("no libc mapped")
    table = symbols(libc)
    start, size = table.by_name["getpid"]
    assert table.lookup(start + 1)[0] in ("getpid", "__getpid")
    bias = load_bias(libc, read_maps(os.getpid()))
    real = ctypes.cast(ctypes.CDLL(None).getpid, ctypes.c_void_p).value
    assert bias is not None and real - bias == start
