"""PyTorch Flight Recorder dumps of the traced ranks, read at the end of a recording.

Contract: ``flight_recorder_probe(pids, analyzer)`` is an ``EndProbe``. For each traced process
whose environment enables the Flight Recorder (``TORCH_NCCL_TRACE_BUFFER_SIZE`` or
``TORCH_FR_BUFFER_SIZE`` > 0), the dump file prefixes it names (``TORCH_FR_DUMP_TEMP_FILE``,
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``, else torch's default ``/tmp/nccl_trace_rank_``) are
looked up in that process's own view of the filesystem (/proc/PID/root: a container's /tmp
is not the host's), and every ``<prefix><rank>`` file there is read (tracefile/fr_dump.py:
plain data only, bounded) into one ``FlightRecorderDump`` event; a dump that appeared during
the recording is read like one written before (the analysis compares its time with the
window's). ``pid`` is the process whose RANK is the file's rank, else the one whose
environment named the prefix. Nothing is asked of the ranks: hangtrace never triggers a dump.
A process whose environment cannot be read or names no file gives no event.
"""
from __future__ import annotations

import os
import time
from typing import Dict, List, Optional, Tuple

from ...events.stacks import FlightRecorderDump
from ...linux import procfs
from ...tracefile.fr_dump import read_dump, rank_of

__all__ = ["flight_recorder_probe", "dump_files", "DEFAULT_PREFIX", "ENV"]

DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"
SIZE_VARS = ("TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE")
PREFIX_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
ENV = SIZE_VARS + PREFIX_VARS + ("RANK",)
MAX_FILES = 1024


def _enabled(env: Dict[str, str]) -> bool:
    for name in SIZE_VARS:
        try:
            if int(env.get(name, "0").strip() or 0) > 0:
                return True
        except ValueError:
            continue
    return False


def dump_files(pid: int, env: Dict[str, str], root: str = "/proc"
               ) -> List[Tuple[str, str, Optional[int]]]:
    """(path to read, path as the process names it, rank) of the dumps ``pid``'s environment
    points to (module doc)."""
    prefixes = [env[v] for v in PREFIX_VARS if env.get(v)] or [DEFAULT_PREFIX]
    out = []
    for prefix in dict.fromkeys(prefixes):
        seen_as = prefix if prefix.startswith("/") else os.path.join("/", prefix)
        real = f"{root}/{pid}/root{seen_as}"
        folder, base = os.path.split(real)
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for n in names:
            rest = n[len(base):]
            if n.startswith(base) and rest.isdigit():
                out.append((os.path.join(folder, n), os.path.join(os.path.dirname(seen_as), n),
                            rank_of(n, base)))
    return out[:MAX_FILES]


def flight_recorder_probe(pids: List[int], analyzer: object = None) -> List[FlightRecorderDump]:
    """EndProbe (session.py): the Flight Recorder dumps of ``pids`` (module doc)."""
    envs = {pid: procfs.read_environ_vars(pid, ENV) for pid in pids}
    ranks: Dict[int, int] = {}
    for pid, env in envs.items():
        if env.get("RANK", "").strip().isdigit():
            ranks.setdefault(int(env["RANK"]), pid)
    files: Dict[str, Tuple[str, Optional[int], int]] = {}
    for pid, env in sorted(envs.items()):
        if not _enabled(env):
            continue
        for real, seen_as, rank in dump_files(pid, env):
            owner = ranks.get(rank, pid) if rank is not None else pid
            files.setdefault(seen_as, (real, rank, owner))
    now = time.time()
    out = []
    for seen_as, (real, rank, owner) in sorted(files.items()):
        d = read_dump(real, rank, owner, now)
        d.path = seen_as
        out.append(d)
    return out


flight_recorder_probe.__name__ = "flight recorder"
