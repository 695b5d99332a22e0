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


# Hostile files a target maps as a library (issue 46 item 5), bounded in CPU time; each bound is
# far above what the bounded reader takes (milliseconds) and far below what main took.
def _cpu(fn, *args):
    import time
    t = time.process_time()
    out = fn(*args)
    return out, time.process_time() - t


def test_a_nul_less_string_table_is_read_in_linear_time(tmp_path):
    """3,000 functions over a 4 MB string table with no NUL: main looked each name's end up over
    the whole table (find, slice, decode: 14 s of CPU here); each name is looked for within
    MAX_NAME bytes of its table now (no name ends there: none is kept)."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from hostile_elf import symbol_bomb
    p = tmp_path / "libcuda.so.1"
    p.write_bytes(symbol_bomb(3000, 4 << 20))
    out, cpu = _cpu(function_symbols, str(p))
    assert out == {} and cpu < 2.0


def test_a_claimed_section_count_is_bounded_before_pyelftools(tmp_path):
    """A 4 KB libnccl.so.2, extended to 64 MB sparse, whose section 0 claims 2**40 sections
    (e_shnum 0): pyelftools walked a million of them for each name lookup (about 12 s of CPU in
    each of the two readers on main); refused from its header now, in both."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from hostile_elf import section_count_bomb
    from tracer.linux.elfsyms import section_headers_problem
    from tracer.record.evidence.elfver import NCCL_RE, section_search
    from tracer.record.probes.elfsyms import _read
    p = tmp_path / "libnccl.so.2"
    with open(p, "wb") as f:
        f.write(section_count_bomb(1 << 40))
        f.truncate(64 << 20)
    with open(p, "rb") as f:
        assert "claims 1099511627776 sections" in section_headers_problem(f)
        table, cpu = _cpu(_read, str(p), f)
    assert "claims 1099511627776 sections" in table.why and not table.names and cpu < 2.0
    found, cpu = _cpu(section_search, str(p), ".rodata", NCCL_RE)
    assert found is None and cpu < 2.0


def test_real_libraries_have_header_tables_that_fit():
    from tracer.linux.elfsyms import section_headers_problem
    for lib in ("/usr/lib/x86_64-linux-gnu/libc.so.6", "/bin/sh"):
        if Path(lib).exists():
            with open(lib, "rb") as f:
                assert section_headers_problem(f) is None
