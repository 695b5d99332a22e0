"""Files a traced process names, read as root without letting it choose what root reads.

Contract: ``read_target_file(pid, path, max_bytes=, seconds=, owned=)`` and
``list_target_dir(pid, path, seconds=)`` read what ``pid`` names (a dump prefix, a source file)
as that process would see it: in its own root, no magic link, no link as the last component
(``_open_in_root``), a relative path from its working folder (``target_path``), in a thread
with its REAL user, group and groups as file-system ids, bounded in time (``_as_target``).
Nothing is read for a process whose ids differ or whose exec was AT_SECURE
(``privilege_refusal``: a setuid program names what a less privileged user chose).
``read_held_file(pid, fd, tail=)``: the last bytes of a file it holds open (/proc/PID/fd/FD).
``open_mapped_file(path, max_bytes=)``: a file it maps, by its /proc/PID/map_files entry.
Each accepts a regular file only, not on FUSE, of bounded size; else ``TargetFileRefused``.
"""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
import sys
import threading
from dataclasses import dataclass
from typing import BinaryIO, Callable, List, Optional, Tuple, TypeVar

from . import cancel, procfs
from .intparse import parse_uint

__all__ = ["read_target_file", "read_held_file", "list_target_dir", "open_mapped_file", "TargetFile",
           "TargetFileRefused", "target_creds", "privilege_refusal", "target_path"]

FUSE_SUPER_MAGIC = 0x65735546
_RESOLVE_NO_MAGICLINKS, _RESOLVE_IN_ROOT = 0x02, 0x10
# (openat2, setgroups, setfsuid, setfsgid) by machine; openat2 has one number everywhere
_SYSCALLS = {"x86_64": (437, 116, 122, 123), "aarch64": (437, 159, 151, 152)}
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
AT_NULL, AT_SECURE = 0, 23          # include/uapi/linux/auxvec.h
_AT_MAX = 64                        # every AT_ type the kernel writes is below it
T = TypeVar("T")


class TargetFileRefused(Exception):
    """A file the target names that is not read; ``str()`` is one line saying why."""


@dataclass
class TargetFile:
    data: bytes
    size: int
    mtime: float


@dataclass(frozen=True)
class Creds:
    uids: Tuple[int, ...]            # real, effective, saved, file-system
    gids: Tuple[int, ...]
    groups: Tuple[int, ...]


def target_creds(pid: int, root: str = "/proc") -> Optional[Creds]:
    """The credentials of ``pid`` from /proc/PID/status, or None when unreadable."""
    text = procfs.read_text(f"{root}/{pid}/status") or ""
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("Uid", "Gid", "Groups"):
            ids = [parse_uint(x, 10) for x in value.split()]
            if any(i is None or i > 0xFFFFFFFF for i in ids):
                return None
            fields[key] = tuple(ids)
    if len(fields.get("Uid", ())) != 4 or len(fields.get("Gid", ())) != 4:
        return None
    return Creds(fields["Uid"], fields["Gid"], fields.get("Groups", ()))  # type: ignore[arg-type]


def parse_at_secure(data: bytes) -> Optional[bool]:
    """AT_SECURE of an auxiliary vector (/proc/PID/auxv: (type, value) pairs of the process's
    word, 8 bytes or, for a 32-bit process, 4; AT_NULL ends it); None when it reads as
    neither. Pure."""
    for word in (8, 4):
        pairs = _aux_pairs(data, word)
        if pairs is not None:
            return bool(pairs.get(AT_SECURE, 0))
    return None


def _aux_pairs(data: bytes, word: int) -> Optional[dict]:
    step = 2 * word
    out = {}
    for at in range(0, len(data) - step + 1, step):
        kind = int.from_bytes(data[at:at + word], sys.byteorder)
        value = int.from_bytes(data[at + word:at + step], sys.byteorder)
        if kind == AT_NULL:
            return out
        if kind >= _AT_MAX:
            return None
        out[kind] = value
    return None


def privilege_refusal(pid: int, creds: Optional[Creds], root: str = "/proc") -> Optional[str]:
    """Why nothing ``pid`` names is read (module doc); None when it may be read. Its user or
    group ids differ (real, effective, saved, file-system: a setuid or setgid program, or one
    that changed its effective id for a while), its exec was AT_SECURE (setuid, setgid, file
    capabilities: the kernel's own word that the caller had fewer rights), or, for a
    privileged reader, its auxiliary vector does not read. What such a process names came from
    the less privileged user; gdb and py-spy open no file it names either."""
    if creds is None:
        return f"the credentials of pid {pid} are not readable"
    if len(set(creds.uids)) > 1 or len(set(creds.gids)) > 1:
        return (f"pid {pid} runs with user ids {'/'.join(map(str, creds.uids))} and group ids "
                f"{'/'.join(map(str, creds.gids))} (real/effective/saved/file-system: a setuid "
                "or setgid program): hangtrace reads no file it names")
    try:
        with open(f"{root}/{pid}/auxv", "rb") as f:
            secure = parse_at_secure(f.read(1 << 16))
    except OSError as exc:
        if os.geteuid() != 0:
            return None             # the kernel checks this user's own rights anyway
        return f"pid {pid}'s auxiliary vector: {exc.strerror} (setuid or not, it cannot tell)"
    if secure is None and os.geteuid() == 0:
        return f"pid {pid}'s auxiliary vector does not read (setuid or not, it cannot tell)"
    if secure:
        return (f"pid {pid} runs a program started AT_SECURE (setuid, setgid or file "
                "capabilities): hangtrace reads no file it names")
    return None


def target_path(pid: int, path: str, root: str = "/proc") -> str:
    """``path`` as ``pid`` names it, absolute in its own root: a relative one is joined to its
    working folder (/proc/PID/cwd, as seen in its root /proc/PID/root); TargetFileRefused
    when the working folder cannot be told (gone, deleted, outside its root)."""
    if path.startswith("/"):
        return path
    try:
        cwd = os.readlink(f"{root}/{pid}/cwd")
        top = os.readlink(f"{root}/{pid}/root")
    except OSError as exc:
        raise TargetFileRefused(f"pid {pid}'s working folder: {exc.strerror}") from None
    if not cwd.startswith("/") or cwd.endswith(" (deleted)"):
        raise TargetFileRefused(f"pid {pid}'s working folder is gone")
    if top != "/":
        if cwd != top and not cwd.startswith(top.rstrip("/") + "/"):
            raise TargetFileRefused(f"pid {pid}'s working folder is outside its root")
        cwd = cwd[len(top.rstrip("/")):] or "/"
    return os.path.join(cwd, path)       # ".." and links: resolved by the kernel, in its root


_libc: Optional[ctypes.CDLL] = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc


def _syscall(nr: int, *args: object) -> int:
    ret = _lib().syscall(ctypes.c_long(nr), *args)
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return ret


def _numbers() -> Tuple[int, int, int, int]:
    nrs = _SYSCALLS.get(platform.machine().lower())
    if nrs is None:
        raise TargetFileRefused(f"no system call numbers for {platform.machine()}")
    return nrs


def _become(creds: Creds) -> Tuple[int, int, List[int]]:
    """This thread takes the target's real user and group ids and its groups as file-system
    credentials (module doc: a process whose ids differ is refused before); returns what to
    restore."""
    _, nr_groups, nr_fsuid, nr_fsgid = _numbers()
    before = (os.geteuid(), os.getegid(), os.getgroups())
    if before[0] != 0:          # not privileged: the kernel checks our own rights
        return before
    groups = (ctypes.c_uint * max(1, len(creds.groups)))(*creds.groups)
    _syscall(nr_groups, ctypes.c_size_t(len(creds.groups)), groups)
    _syscall(nr_fsgid, ctypes.c_uint(creds.gids[0]))
    _syscall(nr_fsuid, ctypes.c_uint(creds.uids[0]))
    # setfsuid answers the previous id whatever happens: ask again with an id it refuses
    if _syscall(nr_fsuid, ctypes.c_uint(0xFFFFFFFF)) != creds.uids[0]:
        raise TargetFileRefused("could not take the target's file-system user id")
    return before


def _restore(before: Tuple[int, int, List[int]]) -> None:
    _, nr_groups, nr_fsuid, nr_fsgid = _numbers()
    if before[0] != 0:
        return
    _syscall(nr_fsuid, ctypes.c_uint(before[0]))
    _syscall(nr_fsgid, ctypes.c_uint(before[1]))
    groups = (ctypes.c_uint * max(1, len(before[2])))(*before[2])
    _syscall(nr_groups, ctypes.c_size_t(len(before[2])), groups)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


def _open_in_root(root_fd: int, path: str, flags: int) -> int:
    """``path`` opened below ``root_fd``: resolved inside the process's own root (openat2 with
    ``RESOLVE_IN_ROOT`` from /proc/PID/root: a chrooted or containerized target's absolute links
    stay in its root), with no magic links and no link as the last component (``O_NOFOLLOW``),
    opened ``O_NONBLOCK`` by the callers (a FIFO or a device never blocks the open); where openat2
    is missing, no link at all (``_open_without_links``)."""
    rel = path.lstrip("/") or "."
    how = _OpenHow(flags, 0, _RESOLVE_IN_ROOT | _RESOLVE_NO_MAGICLINKS)
    try:
        return _syscall(_numbers()[0], ctypes.c_int(root_fd), os.fsencode(rel),
                        ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
    except OSError as exc:
        if exc.errno not in (errno.ENOSYS, errno.EPERM):
            raise
    return _open_without_links(root_fd, rel, flags)


def _open_without_links(root_fd: int, rel: str, flags: int) -> int:
    """The fallback without openat2: each component opened with O_NOFOLLOW, no ``..``."""
    parts = [p for p in rel.split("/") if p and p != "."]
    if ".." in parts:
        raise OSError(errno.EXDEV, "'..' in a path the target names")
    fd = os.dup(root_fd)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                          dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1] if parts else ".", flags, dir_fd=fd)
    finally:
        os.close(fd)


def _is_fuse(fd: int) -> bool:
    buf = ctypes.create_string_buffer(256)          # struct statfs; f_type comes first
    if _lib().fstatfs(ctypes.c_int(fd), buf) != 0:
        return False
    return ctypes.c_long.from_buffer(buf).value == FUSE_SUPER_MAGIC


def _as_target(pid: int, creds: Optional[Creds], seconds: float, work: Callable[[int], T],
               root: str) -> T:
    """``work(root_fd)`` in a thread of its own with ``pid``'s credentials, bounded in time.
    The open and the read run in that thread with the target's real ids as file-system
    credentials (fsuid, fsgid, groups: per thread on Linux), so root reads only what the target's
    user may read; the thread is given ``seconds`` in all (open included). Nothing is read for a
    process ``privilege_refusal`` refuses."""
    why = privilege_refusal(pid, creds, root)
    if why is not None:
        raise TargetFileRefused(why)
    assert creds is not None
    try:
        root_fd = os.open(f"{root}/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise TargetFileRefused(f"pid {pid}'s root: {exc.strerror}") from None
    box: List[object] = []

    def run() -> None:
        try:
            before = _become(creds)
            try:
                box.append(("ok", work(root_fd)))
            finally:
                _restore(before)
        except (OSError, TargetFileRefused) as exc:
            box.append(("error", exc))
        finally:
            os.close(root_fd)

    t = threading.Thread(target=run, name="hangtrace-target-file", daemon=True)
    t.start()
    cancel.join(t, seconds)     # a stop raises cancel.Cancelled; the thread ends by its bound
    if not box:
        raise TargetFileRefused(f"no answer within {seconds:g} s")
    kind, value = box[0]  # type: ignore[misc]
    if kind == "ok":
        return value  # type: ignore[return-value]
    if isinstance(value, OSError):
        raise TargetFileRefused(_os_reason(value)) from None
    raise value  # type: ignore[misc]


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link (not followed)"
    if exc.errno == errno.EXDEV:
        return "leaves the target's root"
    return exc.strerror or str(exc)


def read_target_file(pid: int, path: str, *, max_bytes: int, seconds: float = 2.0,
                     owned: bool = True, root: str = "/proc") -> TargetFile:
    """The content of ``path`` as ``pid`` names it (module doc).
    Only a regular file is accepted, not on FUSE, and with ``owned`` (files the target writes) only
    one owned by the target's real uid; at most ``max_bytes`` are read. A relative ``path`` is
    looked up from its working folder (``target_path``)."""
    path = target_path(pid, path, root)
    creds = target_creds(pid, root)

    def work(root_fd: int) -> TargetFile:
        assert creds is not None                  # _as_target refuses a process without them
        fd = _open_in_root(root_fd, path, _OPEN_FLAGS)
        try:
            st = _checked(fd)
            if owned and creds.uids[0] and st.st_uid != creds.uids[0]:
                raise TargetFileRefused(f"owned by uid {st.st_uid}, not by the process "
                                        f"(uid {creds.uids[0]})")
            if st.st_size > max_bytes:
                raise TargetFileRefused(f"{st.st_size} bytes: larger than the bound of "
                                        f"{max_bytes} bytes")
            chunks, left = [], max_bytes + 1
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            data = b"".join(chunks)
            if len(data) > max_bytes:
                raise TargetFileRefused(f"grew past the bound of {max_bytes} bytes")
            return TargetFile(data, st.st_size, st.st_mtime)
        finally:
            os.close(fd)

    return _as_target(pid, creds, seconds, work, root)


def _checked(fd: int) -> os.stat_result:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise TargetFileRefused("not a regular file")
    if _is_fuse(fd):
        raise TargetFileRefused("on a FUSE file system (the target may serve it)")
    return st


def read_held_file(pid: int, fd: int, *, tail: int, seconds: float = 2.0,
                   root: str = "/proc") -> TargetFile:
    """The last ``tail`` bytes of the file ``pid`` holds open as ``fd`` (module doc);
    ``size`` is the file's size when read."""
    def work(root_fd: int) -> TargetFile:
        f = os.open(f"{root}/{pid}/fd/{fd}", _OPEN_FLAGS & ~os.O_NOFOLLOW)
        try:
            st = _checked(f)
            data = os.pread(f, tail, max(0, st.st_size - tail)) if tail > 0 else b""
            return TargetFile(data, st.st_size, st.st_mtime)
        finally:
            os.close(f)

    return _as_target(pid, target_creds(pid, root), seconds, work, root)


def open_mapped_file(path: str, *, max_bytes: int, fallback: Optional[str] = None) -> BinaryIO:
    """``path`` (/proc/PID/map_files/RANGE: the file mapped, whatever its name in /proc/PID/maps
    says now) opened for reading: never blocking (``O_NONBLOCK``), a regular file not on FUSE, of
    at most ``max_bytes``. ``fallback`` (the name in maps) is opened with the same checks only
    where map_files is refused to an unprivileged caller, who reads with its own rights anyway."""
    flags = _OPEN_FLAGS & ~os.O_NOFOLLOW         # map_files entries are links to follow
    try:
        fd = os.open(path, flags)
    except PermissionError:
        if fallback is None or os.geteuid() == 0:
            raise
        fd = os.open(fallback, _OPEN_FLAGS)
    try:
        st = _checked(fd)
        if st.st_size > max_bytes:
            raise TargetFileRefused(f"{st.st_size} bytes: larger than the bound of "
                                    f"{max_bytes} bytes")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def list_target_dir(pid: int, path: str, *, seconds: float = 2.0, root: str = "/proc"
                    ) -> List[str]:
    """The names in folder ``path`` as ``pid`` names it (module doc's resolution; a relative
    one from its working folder)."""
    path = target_path(pid, path, root)

    def work(root_fd: int) -> List[str]:
        fd = _open_in_root(root_fd, path, _OPEN_FLAGS | os.O_DIRECTORY)
        try:
            return sorted(os.listdir(fd))
        finally:
            os.close(fd)

    return _as_target(pid, target_creds(pid, root), seconds, work, root)
