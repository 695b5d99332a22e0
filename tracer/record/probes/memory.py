"""Memory the traced processes bring in: page faults per thread, resident size, bytes read
from storage and the residency of their largest mapped files, at the start and the end; and,
from the same per-thread reads, each thread's CPU time (what strace's timing cannot measure).

Contract: ``memory_start_probe`` and ``memory_end_probe`` are session probes (``EndProbe``):
one ``MemoryProgress`` per readable process (phase "start" / "end"), read by ``read_memory``
(what it reads, and when smaps is read: its docstring; the files of the ``MAX_FILE_PROCESSES``
largest processes only: ``read_tree_memory``). Only /proc is read, never a mapped
file's content; a process gone or unreadable gives an event whose ``why`` says so.
"""
from __future__ import annotations

import os
import time
from typing import Dict, List, Tuple

from ...events.evidence import MemoryProgress
from ...linux import procfs

__all__ = ["memory_start_probe", "memory_end_probe", "read_memory", "read_tree_memory",
           "parse_smaps_files"]

MIN_FILE = 16 << 20
MAX_FILES = 16
MAX_SMAPS = 32 << 20
MAX_FILE_PROCESSES = 32     # processes whose mapped files a probe reads: the largest by RSS
_HEX = frozenset("0123456789abcdef")    # how a mapping's header line starts (its address)


def parse_smaps_files(text: str) -> Dict[str, Tuple[int, str]]:
    """{path: (resident bytes summed over its mappings, the first mapping's address range)}
    of the regular files in an smaps text."""
    out: Dict[str, Tuple[int, str]] = {}
    path = ""
    for line in text.splitlines():
        # only a line that starts as an address can be a mapping's header ("Key: value"
        # lines start upper-case): the others are not split (half of a 2,000-process probe)
        head = line.split(None, 5) if line[:1] in _HEX else None
        if head and "-" in head[0] and not head[0].endswith(":"):
            path = head[5] if len(head) == 6 and head[5].startswith("/") else ""
            if path.endswith(" (deleted)"):
                path = path[:-len(" (deleted)")]
            if path and path not in out:
                out[path] = (0, head[0])
        elif path and line.startswith("Rss:"):
            kb = line.split()
            if len(kb) >= 2 and kb[1].isdigit():
                rss, rng = out[path]
                out[path] = (rss + int(kb[1]) * 1024, rng)
    return out


def _big_files(pid: int, root: str) -> Dict[str, int]:
    """{path: size} of the regular files of at least MIN_FILE bytes in /proc/PID/maps."""
    data = procfs.read_bytes(f"{root}/{pid}/maps") or b""
    sizes: Dict[str, int] = {}
    for line in data.decode("utf-8", "replace").splitlines():
        head = line.split(None, 5)
        if len(head) < 6 or not head[5].startswith("/"):
            continue
        path = head[5][:-len(" (deleted)")] if head[5].endswith(" (deleted)") else head[5]
        if path in sizes:
            continue
        try:
            sizes[path] = os.stat(f"{root}/{pid}/map_files/{head[0]}").st_size
        except OSError:
            sizes[path] = -1
    return {p: n for p, n in sizes.items() if n >= MIN_FILE}


def _files(pid: int, root: str) -> List[Tuple[str, int, int]]:
    big = _big_files(pid, root)
    if not big:
        return []
    data = procfs.read_bytes(f"{root}/{pid}/smaps") or b""
    found = []
    for path, (rss, rng) in parse_smaps_files(data[:MAX_SMAPS].decode("utf-8", "replace")
                                              ).items():
        if path not in big:
            continue
        try:
            size = os.stat(f"{root}/{pid}/map_files/{rng}").st_size
        except OSError:
            continue
        if size >= MIN_FILE:
            found.append((path, rss, size))
    return sorted(found, key=lambda f: -f[2])[:MAX_FILES]  # type: ignore[operator]


def read_memory(pid: int, phase: str, root: str = "/proc", files: bool = True) -> MemoryProgress:
    """One ``MemoryProgress`` of ``pid``: every thread's minor and major faults and CPU time
    (/proc/PID/task/TID/stat) and, with several threads, its storage reads (task/TID/io), RSS
    and read_bytes (/proc/PID/status, io), and the ``MAX_FILES``
    largest regular files it maps of at least ``MIN_FILE`` bytes with the bytes of each resident in
    its mappings (/proc/PID/smaps, at most ``MAX_SMAPS`` bytes read; the file's size from
    /proc/PID/map_files: the mapped file itself, never its content). smaps (the kernel walks every
    page table for it) is read only when /proc/PID/maps shows a file of at least ``MIN_FILE``
    bytes: most processes of a big tree map none (2,000 forked Python workers: 1.2 ms a process
    less). ``files`` False: no maps or smaps read (``files`` left empty)."""
    ev = MemoryProgress(ts=time.time(), pid=pid, phase=phase)
    tids = procfs.list_tids(pid, root)
    for tid in tids:
        st = procfs.read_stat(pid, tid, root)
        if st is not None:
            ev.faults[tid] = (st.minflt, st.majflt)
            ev.cpu[tid] = round((st.utime + st.stime) / procfs.TICKS_HZ, 2)
        if len(tids) > 1:
            read = procfs.read_io_field(f"{root}/{pid}/task/{tid}/io", "read_bytes")
            if read is not None:
                ev.reads[tid] = read
    if not ev.faults:
        ev.why = "gone" if not procfs.pid_exists(pid, root) else "thread stats not readable"
        return ev
    status = procfs.read_text(f"{root}/{pid}/status") or ""
    for line in status.splitlines():
        if line.startswith("VmRSS:") and line.split()[1:2] and line.split()[1].isdigit():
            ev.rss_bytes = int(line.split()[1]) * 1024
    io = procfs.read_io(pid, root)
    ev.read_bytes = io.read_bytes if io is not None else None
    if files:
        ev.files = _files(pid, root)
    return ev


def read_tree_memory(pids: List[int], phase: str, root: str = "/proc") -> List[MemoryProgress]:
    """``read_memory`` of each pid, the mapped files (maps, smaps) of the ``MAX_FILE_PROCESSES``
    largest by RSS only: every Python process maps libpython (23 MB), and reading the smaps of
    each of 1,000 forked workers took 8 s before the window opened (issue 46 item 9)."""
    evs = [read_memory(pid, phase, root, files=False) for pid in pids]
    read = sorted((ev for ev in evs if ev.faults), key=lambda ev: -(ev.rss_bytes or 0))
    for ev in read[:MAX_FILE_PROCESSES]:
        ev.files = _files(ev.pid, root)
    return evs


def memory_start_probe(pids: List[int], analyzer: object = None) -> List[MemoryProgress]:
    """Session probe at the start of a recording (module doc)."""
    return read_tree_memory(pids, "start")


def memory_end_probe(pids: List[int], analyzer: object = None) -> List[MemoryProgress]:
    """Session probe at the end of a recording (module doc)."""
    return read_tree_memory(pids, "end")


memory_start_probe.__name__ = "memory (start)"
memory_end_probe.__name__ = "memory (end)"
