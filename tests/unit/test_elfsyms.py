"""The function symbols a uprobe attaches to (tracer/linux/elfsyms.py), from real shared
objects built here: names, addresses, and file offsets that hold the function's code even
where the code is not at its file offset."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tracer.linux.elfsyms import function_symbols

LIB = Path(__file__).resolve().parents[2] / "fixtures" / "scenarios" / "lib" / "fake_libcuda.c"
NAMES = {"cuStreamBeginCapture", "cuStreamBeginCapture_v2", "cuStreamEndCapture",
         "cuGraphLaunch"}


def _build(tmp_path: Path, name: str, *ldflags: str) -> Path:
    out = tmp_path / name
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(out), str(LIB), *ldflags],
                   check=True)
    return out


def _nm(path: Path) -> dict:
    out = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True,
                         text=True, check=True).stdout
    return {p[2]: int(p[0], 16) for p in (ln.split() for ln in out.splitlines())
            if len(p) == 3 and p[1] in "Tt"}


def test_names_and_addresses_are_the_ones_nm_lists(tmp_path):
    lib = _build(tmp_path, "libcuda.so.1")
    syms = function_symbols(str(lib))
    assert NAMES <= set(syms)
    nm = _nm(lib)
    for name in NAMES:
        assert syms[name][0] == nm[name], name


def test_offsets_point_at_the_code_where_addresses_and_offsets_differ(tmp_path):
    plain = _build(tmp_path, "plain.so")
    moved = _build(tmp_path, "moved.so", "-Wl,--section-start=.text=0x400000")
    a, b = function_symbols(str(plain)), function_symbols(str(moved))
    pdata, mdata = plain.read_bytes(), moved.read_bytes()
    for name in NAMES:
        (_, poff), (maddr, moff) = a[name], b[name]
        assert maddr >= 0x400000 and moff < len(mdata) and maddr != moff
        assert mdata[moff:moff + 8] == pdata[poff:poff + 8], name


def test_libc_exports_its_functions_with_their_offsets():
    libc = "/lib/x86_64-linux-gnu/libc.so.6"
    if not Path(libc).exists():
        pytest.skip("no x86_64 glibc here")
    syms = function_symbols(libc)
    assert {"malloc", "write", "pthread_create"} <= set(syms)


@pytest.mark.parametrize("data,why", [
    (b"#!/bin/sh\n", "not a 64-bit little-endian ELF"),
    (b"\x7fELF", "not a 64-bit little-endian ELF"),
    (b"\x7fELF\x01\x01\x01" + bytes(60), "not a 64-bit little-endian ELF"),
    (b"\x7fELF\x02\x01\x01" + bytes(33) + b"\xff" * 8 + bytes(20), "out of the file"),
])
def test_bad_files_raise_one_value_error(tmp_path, data, why):
    p = tmp_path / "bad.so"
    p.write_bytes(data)
    with pytest.raises(ValueError, match=why):
        function_symbols(str(p))


def test_the_same_symbols_as_pyelftools_reads(tmp_path):
    """The hand-written reader (kept for its speed at attach: bench/elf_readers.py) gives what
    pyelftools gives, on a library built here and on this machine's libc."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from elf_readers import pyelftools_function_symbols
    libs = [_build(tmp_path, "libcuda.so.1"),
            _build(tmp_path, "moved.so", "-Wl,--section-start=.text=0x400000")]
    libs += [Path(p) for p in ("/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6")
             if Path(p).exists()][:1]
    for lib in libs:
        mine = function_symbols(str(lib))
        assert mine and mine == pyelftools_function_symbols(str(lib)), lib
