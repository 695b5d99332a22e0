"""linux/symcache.py and its two users (record/probes/elfsyms.symbols, linux/elfsyms
.function_symbols): a library's symbols read once and kept across runs by the opened file's
identity; a corrupt, foreign or misplaced entry is as none; the directory bounded; no temporary
file left behind. Real ELF files of this machine (the interpreter, libc)."""
from __future__ import annotations

import os
import shutil
import stat

import pytest

from tracer.linux import elfsyms as raw
from tracer.linux import symcache
from tracer.record.probes import elfsyms

PYTHON = os.path.realpath("/proc/self/exe")


def _libc() -> str:
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        if "/libc.so" in path or "/libc-" in path:
            return path
    pytest.skip("no libc mapped")
    return ""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    where = tmp_path / "symbols"
    monkeypatch.setenv("HANGTRACE_SYMBOL_CACHE", str(where))
    monkeypatch.setattr(elfsyms, "_CACHE", {})
    return where


def _entries(where) -> list:
    return sorted(p for p in os.listdir(where) if p.endswith(".json.z")) if where.exists() else []


def test_a_table_read_once_is_read_from_the_cache_in_the_next_run(cache, monkeypatch):
    first = elfsyms.symbols(PYTHON)
    assert first.names and not first.why and len(_entries(cache)) == 1
    elfsyms._CACHE.clear()                       # the next run: a new process
    monkeypatch.setattr(elfsyms, "_read", lambda path, f: pytest.fail("read again"))
    again = elfsyms.symbols(PYTHON)
    assert (again.starts, again.ends, again.names, again.sizes) == \
        (first.starts, first.ends, first.names, first.sizes)
    assert (again.first_load, again.pie, again.by_name) == \
        (first.first_load, first.pie, first.by_name)
    value = first.starts[len(first.starts) // 2]
    assert again.lookup(value) == first.lookup(value)


def test_function_symbols_are_kept_across_runs(cache, monkeypatch):
    libc = _libc()
    first = raw.function_symbols(libc)
    assert first and len(_entries(cache)) == 1
    monkeypatch.setattr(raw, "_read", lambda data: pytest.fail("read again"))
    assert raw.function_symbols(libc) == first


def _corrupt_each(where, data: bytes) -> None:
    for name in _entries(where):
        with open(os.path.join(where, name), "wb") as f:
            f.write(data)


@pytest.mark.parametrize("damage", [b"", b"not zlib", __import__("zlib").compress(b"[1, 2"),
                                    __import__("zlib").compress(b'{"version": 1}')])
def test_a_corrupt_entry_is_ignored_and_read_again(cache, damage):
    first = elfsyms.symbols(PYTHON)
    _corrupt_each(cache, damage)
    elfsyms._CACHE.clear()
    again = elfsyms.symbols(PYTHON)
    assert again.names == first.names and again.by_name == first.by_name


def test_a_hostile_entry_of_the_right_key_but_wrong_shape_is_ignored(cache):
    first = elfsyms.symbols(PYTHON)
    key = symcache.file_key(os.stat(PYTHON))
    # unsorted starts, a negative size: a table that would name addresses wrongly
    symcache.store(elfsyms._KIND, key, {"starts": [9, 1], "sizes": [1, -4], "names": ["a", "b"],
                                        "first_load": 0, "pie": True})
    elfsyms._CACHE.clear()
    assert elfsyms.symbols(PYTHON).names == first.names
    symcache.store(raw._KIND, symcache.file_key(os.stat(_libc())), {"memcpy": ["x", 1]})
    assert "memcpy" in raw.function_symbols(_libc())


def test_the_key_is_the_opened_file_s_identity_not_its_name(cache, tmp_path):
    lib = tmp_path / "libfake.so"
    shutil.copy(PYTHON, lib)
    first = elfsyms.symbols(str(lib))
    shutil.copy(_libc(), tmp_path / "other.so")
    os.replace(tmp_path / "other.so", lib)        # another file under the same name
    elfsyms._CACHE.clear()
    now = elfsyms.symbols(str(lib))
    assert now.names != first.names and len(_entries(cache)) == 2
    with open(lib, "r+b") as f:                   # the same inode, rewritten in place
        f.seek(0, 2)
        f.write(b"\0")
    elfsyms._CACHE.clear()
    elfsyms.symbols(str(lib))
    assert len(_entries(cache)) == 3


def test_a_cache_directory_others_may_write_or_a_link_is_not_used(tmp_path, monkeypatch):
    where = tmp_path / "symbols"
    where.mkdir()
    os.chmod(where, 0o777)
    monkeypatch.setenv("HANGTRACE_SYMBOL_CACHE", str(where))
    symcache.store("k", "key", {"a": 1})
    assert symcache.load("k", "key") is None and os.listdir(where) == []
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    monkeypatch.setenv("HANGTRACE_SYMBOL_CACHE", str(link))
    symcache.store("k", "key", {"a": 1})
    assert os.listdir(real) == []
    monkeypatch.setenv("HANGTRACE_SYMBOL_CACHE", "")
    assert symcache.cache_dir() is None


def test_an_entry_of_another_key_is_not_taken(cache):
    symcache.store("k", "key-1", [1, 2, 3])
    assert symcache.load("k", "key-1") == [1, 2, 3]
    (name,) = _entries(cache)
    os.replace(os.path.join(cache, name), os.path.join(cache, "other"))
    symcache.store("k", "key-2", [4])
    (name2,) = _entries(cache)
    os.replace(os.path.join(cache, "other"), os.path.join(cache, name2))  # key-1's, as key-2's
    assert symcache.load("k", "key-2") is None


def test_the_directory_is_bounded_and_keeps_no_temporary_file(cache, monkeypatch):
    monkeypatch.setattr(symcache, "MAX_TOTAL_BYTES", 3000)
    blob = os.urandom(900).hex()                  # incompressible: about 1 KiB an entry
    for k in range(8):
        symcache.store("k", f"key-{k}", blob)
    names = os.listdir(cache)
    total = sum(os.path.getsize(os.path.join(cache, n)) for n in names)
    assert total <= 3000 and 1 <= len(names) < 8
    assert not [n for n in names if not n.endswith(".json.z")]
    assert symcache.load("k", "key-7") == blob     # the newest kept
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700


def test_an_entry_over_the_bound_is_not_kept(cache, monkeypatch):
    monkeypatch.setattr(symcache, "MAX_ENTRY_BYTES", 100)
    symcache.store("k", "key", os.urandom(200).hex())
    assert _entries(cache) == []
