"""Symbol tables kept across runs by the identity of the file they were read from: a library's
symbols are read once (pyelftools takes about 1 s on a libpython with full symbols).

Contract:
- ``file_key(st)``: an opened file's identity from its ``os.fstat`` (its docstring); the
  caller takes it from the file opened through /proc/PID/map_files, never from a path.
- ``load(kind, key)`` -> the JSON value stored, or None (no entry; a corrupt, foreign or too
  large one; a cache directory that is not this user's own). ``store(kind, key, value)``
  writes it atomically (outputs.replacing), at most ``MAX_ENTRY_BYTES`` an entry and
  ``MAX_TOTAL_BYTES`` in all (least recently used out first). Neither raises; callers check
  the value's shape. Where: ``cache_dir``.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import zlib
from typing import Any, Optional

from ..errors import OutputError
from ..outputs import replacing

__all__ = ["file_key", "load", "store", "cache_dir", "MAX_ENTRY_BYTES", "MAX_TOTAL_BYTES",
           "VERSION"]

VERSION = 1
MAX_ENTRY_BYTES = 16 << 20       # compressed; a libLLVM's 37k functions take about 0.5 MiB
MAX_TOTAL_BYTES = 128 << 20
_MAX_INFLATED = 256 << 20


def file_key(st: os.stat_result) -> str:
    """The identity of the file ``st`` describes: device, inode, size, mtime and ctime in
    nanoseconds (a file rewritten in place has another mtime; one whose mtime was set back
    has another ctime, which no user can set). What a target names is never trusted: the
    caller stats what it maps (target_files.open_mapped_file)."""
    return (f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:"
            f"{getattr(st, 'st_ctime_ns', 0)}")


def cache_dir() -> Optional[str]:
    """``$HANGTRACE_SYMBOL_CACHE`` (empty: no cache), else ``$XDG_CACHE_HOME/hangtrace/symbols``,
    else ``~/.cache/hangtrace/symbols``, made 0700 if missing; None where there is none to
    use (not absolute, not a directory of this user's own, a link, writable by others)."""
    where = os.environ.get("HANGTRACE_SYMBOL_CACHE")
    if where is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                ".cache")
        where = os.path.join(base, "hangtrace", "symbols")
    if not where or not os.path.isabs(where):
        return None
    try:
        os.makedirs(where, mode=0o700, exist_ok=True)
        st = os.lstat(where)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        return None                      # a link, or a directory others may write into
    return where


def _entry(where: str, kind: str, key: str) -> str:
    digest = hashlib.sha256(f"{VERSION}\0{kind}\0{key}".encode()).hexdigest()[:32]
    return os.path.join(where, f"{kind}-{digest}.json.z")


def load(kind: str, key: str) -> Optional[Any]:
    """The value stored for (``kind``, ``key``), or None (module doc)."""
    where = cache_dir()
    if where is None:
        return None
    path = _entry(where, kind, key)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() \
                or st.st_size > MAX_ENTRY_BYTES:
            return None
        with os.fdopen(fd, "rb") as f:
            fd = -1
            raw = f.read(MAX_ENTRY_BYTES + 1)
        inflate = zlib.decompressobj()
        text = inflate.decompress(raw, _MAX_INFLATED)
        if inflate.unconsumed_tail or not inflate.eof:
            return None
        doc = json.loads(text)
    except (OSError, zlib.error, ValueError, RecursionError):
        return None
    finally:
        if fd >= 0:
            os.close(fd)
    if not isinstance(doc, dict) or doc.get("version") != VERSION or doc.get("kind") != kind \
            or doc.get("key") != key:
        return None
    try:
        os.utime(path, follow_symlinks=False)    # recently used: pruned last
    except OSError:
        pass
    return doc.get("value")


def store(kind: str, key: str, value: Any) -> None:
    """Keep ``value`` for (``kind``, ``key``) (module doc)."""
    where = cache_dir()
    if where is None:
        return
    try:
        data = zlib.compress(json.dumps({"version": VERSION, "kind": kind, "key": key,
                                         "value": value}, separators=(",", ":")).encode(), 1)
    except (TypeError, ValueError):
        return
    if len(data) > MAX_ENTRY_BYTES:
        return
    try:
        with replacing(_entry(where, kind, key), text=False) as f:
            f.write(data)
    except (OSError, OutputError):
        return
    _prune(where)


def _prune(where: str) -> None:
    """The least recently used entries removed until the directory holds at most
    ``MAX_TOTAL_BYTES``."""
    try:
        entries = []
        with os.scandir(where) as it:
            for d in it:
                if d.name.endswith(".json.z") and d.is_file(follow_symlinks=False):
                    st = d.stat(follow_symlinks=False)
                    entries.append((st.st_mtime_ns, st.st_size, d.path))
    except OSError:
        return
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= MAX_TOTAL_BYTES:
            break
        try:
            os.unlink(path)
            total -= size
        except OSError:
            pass
