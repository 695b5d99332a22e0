"""Which mount an open file lives on, and which process serves a FUSE mount: read from /proc only.

Contract:
- pure: ``parse_mountinfo(text)`` -> ``Mount``s (id, "MAJ:MIN", mount point, fstype, source: the
  NFS server's "host:/export", the FUSE daemon's name; octal escapes undone, bad lines skipped);
  ``parse_fdinfo(text)`` -> an fdinfo's fields (``mnt_id``, ``fuse_connection``);
  ``fuse_connection(dev)`` -> the connection number /sys/fs/fuse/connections/N and a /dev/fuse
  fd's fdinfo use (the kernel's dev_t); ``fs_kind(fstype)`` -> fuse, network, device, local.
- ``mount_of_fd(pid, fd)`` (fdinfo's mnt_id in the process's mountinfo), ``fuse_servers(conn)``
  (the processes with an fd on /dev/fuse for ``conn``) and ``fuse_users(pids)`` (those with an
  fd on a FUSE mount's file or on /dev/fuse) read /proc's links, fdinfo and mountinfo, never a
  file or a mount (a hung FUSE or NFS mount would hang the reader).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Tuple

__all__ = ["Mount", "parse_mountinfo", "parse_fdinfo", "fuse_connection", "fs_kind",
           "mount_of_fd", "fuse_servers", "fuse_users", "on_mounts", "read_fdinfo",
           "mount_of_path", "mapped_files", "FUSE_DEVICE", "PAGE_FAULT_FD", "MAX_SCAN"]

FUSE_DEVICE = "/dev/fuse"
PAGE_FAULT_FD = -1              # FileMount's fd of a page fault on a mapped file (no fd)
MAX_SCAN = 4096                 # processes whose fds fuse_servers looks at, at most
_OCTAL = re.compile(r"\\([0-7]{3})")
_NETWORK = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "lustre", "9p", "glusterfs", "gfs2",
            "ocfs2", "beegfs", "gpfs", "afs", "virtiofs", "orangefs", "pvfs2", "wekafs", "davfs")
_DEVICE = ("sysfs", "debugfs", "proc", "devtmpfs", "tracefs", "configfs", "securityfs",
           "efivarfs")


@dataclass(frozen=True)
class Mount:
    """One line of mountinfo (module doc)."""
    mount_id: int
    dev: str                 # "0:40"
    root: str
    mountpoint: str
    fstype: str              # "fuse", "fuse.sshfs", "nfs4", "ext4", ...
    source: str              # "server:/export", "sshfs#user@host:", "/dev/sda1", ...

    @property
    def kind(self) -> str:
        return fs_kind(self.fstype)


def _unescape(s: str) -> str:
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), s)


def parse_mountinfo(text: str) -> List[Mount]:
    """Mounts of one mountinfo text (module doc). A line: "ID PARENT MAJ:MIN ROOT MOUNTPOINT
    OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS"."""
    out: List[Mount] = []
    for line in text.splitlines():
        parts = line.split()
        try:
            sep = parts.index("-", 6)
        except ValueError:
            continue
        if len(parts) < sep + 3 or not parts[0].isdigit() or ":" not in parts[2]:
            continue
        out.append(Mount(int(parts[0]), parts[2], _unescape(parts[3]), _unescape(parts[4]),
                         parts[sep + 1], _unescape(parts[sep + 2])))
    return out


def parse_fdinfo(text: str) -> Dict[str, str]:
    """The "key:\\tvalue" lines of an fdinfo file (module doc); later lines (an epoll's tfd
    lines, an inotify's) only the first of a key kept."""
    out: Dict[str, str] = {}
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        if colon and key and " " not in key.strip() and key.strip() not in out:
            out[key.strip()] = value.strip()
    return out


def fuse_connection(dev: str) -> Optional[int]:
    """"0:40" -> 40: a FUSE connection is named by the mount's device number (module doc)."""
    major, colon, minor = dev.partition(":")
    if not colon or not major.isdigit() or not minor.isdigit():
        return None
    return (int(major) << 20) | int(minor)


def fs_kind(fstype: str) -> str:
    """"fuse" (fuse, fuse.sshfs, fuseblk), "network", "device" or "local" (module doc)."""
    base = fstype.split(".", 1)[0]
    if base in ("fuse", "fuseblk"):
        return "fuse"
    if base in _NETWORK or fstype in _NETWORK:
        return "network"
    if base in _DEVICE:
        return "device"
    return "local"


def _read(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as f:
            return f.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return None


def read_fdinfo(pid: int, fd: int, root: str = "/proc") -> Dict[str, str]:
    text = _read(f"{root}/{pid}/fdinfo/{fd}")
    return parse_fdinfo(text) if text is not None else {}


def mount_of_fd(pid: int, fd: int, root: str = "/proc") -> Optional[Mount]:
    """The mount fd ``fd`` of ``pid`` is on (fdinfo's mnt_id in the process's mountinfo)."""
    mnt = read_fdinfo(pid, fd, root).get("mnt_id", "")
    text = _read(f"{root}/{pid}/mountinfo") if mnt.isdigit() else None
    if text is None:
        return None
    return next((m for m in parse_mountinfo(text) if m.mount_id == int(mnt)), None)


def _fd_links(pid: int, root: str) -> List[Tuple[int, str]]:
    """(fd, what its /proc link names) for each open fd of ``pid`` still there when read."""
    try:
        names = os.listdir(f"{root}/{pid}/fd")
    except OSError:
        return []
    out = []
    for name in names:
        try:
            out.append((int(name), os.readlink(f"{root}/{pid}/fd/{name}")))
        except (OSError, ValueError):
            continue
    return out


def _fuse_fds(pid: int, root: str) -> Iterable[int]:
    return [fd for fd, link in _fd_links(pid, root) if link == FUSE_DEVICE]


def fuse_servers(conn: int, pids: Optional[Iterable[int]] = None,
                 root: str = "/proc") -> Dict[int, List[int]]:
    """pid -> its fds on /dev/fuse for connection ``conn`` (fdinfo "fuse_connection"), over
    ``pids`` or every process of this host (at most ``MAX_SCAN``). A kernel whose fdinfo lacks
    the field (before 6.x) gives every /dev/fuse holder, with the fds marked -1: the caller
    cannot tell which mount each serves."""
    if pids is None:
        try:
            pids = sorted(int(n) for n in os.listdir(root) if n.isdigit())
        except OSError:
            return {}
    out: Dict[int, List[int]] = {}
    for i, pid in enumerate(pids):
        if i >= MAX_SCAN:
            break
        for fd in _fuse_fds(pid, root):
            got = read_fdinfo(pid, fd, root).get("fuse_connection")
            if got is None:
                out.setdefault(pid, []).append(-1)
            elif got.isdigit() and int(got) == conn:
                out.setdefault(pid, []).append(fd)
    return out


def on_mounts(path: str, mountpoints: Iterable[str]) -> bool:
    """``path`` lies on one of ``mountpoints`` (itself, or under it: "/mnt/w/x" on "/mnt/w",
    never "/mnt/wx")."""
    return any(path == m or path.startswith(m.rstrip("/") + "/") for m in mountpoints)


def _links(pid: int, root: str) -> List[str]:
    return [link for _, link in _fd_links(pid, root)]


def fuse_users(pids: Iterable[int], root: str = "/proc") -> List[int]:
    """Those of ``pids`` holding an fd on /dev/fuse (a daemon) or on a file of a FUSE mount
    their mountinfo lists (module doc). Each mount namespace's mountinfo is parsed once."""
    fuse_by_text: Dict[str, List[str]] = {}
    out = []
    for pid in pids:
        text = _read(f"{root}/{pid}/mountinfo") or ""
        if text not in fuse_by_text:
            fuse_by_text[text] = [m.mountpoint for m in parse_mountinfo(text)
                                  if m.kind == "fuse"]
        points = fuse_by_text[text]
        if any(t == FUSE_DEVICE or (points and on_mounts(t, points))
               for t in _links(pid, root)):
            out.append(pid)
    return out


def mount_of_path(path: str, mounts: List[Mount]) -> Optional[Mount]:
    """The mount ``path`` (absolute, resolved: as /proc/PID/maps shows it) lies on: the last
    listed of those with the longest mount point over it (a later mount hides an earlier)."""
    best: Optional[Mount] = None
    for m in mounts:
        if on_mounts(path, [m.mountpoint]) and (
                best is None or len(m.mountpoint) >= len(best.mountpoint)):
            best = m
    return best


def mapped_files(maps_text: str) -> List[str]:
    """The files a /proc/PID/maps text maps, in order, each once (" (deleted)" kept off)."""
    out: List[str] = []
    for line in maps_text.splitlines():
        head = line.split(None, 5)
        if len(head) == 6 and head[5].startswith("/"):
            path = head[5].removesuffix(" (deleted)")
            if path not in out:
                out.append(path)
    return out
