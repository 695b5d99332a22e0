"""PyTorch Flight Recorder dumps of the traced ranks, read at the end of a recording.

Contract: ``flight_recorder_probe(pids, analyzer)`` is an ``EndProbe``: for each traced process
whose environment enables the Flight Recorder, the dump files it names (``dump_files``; a
relative prefix from its working folder) are read as that process may read them
(linux/target_files.py; ``SECONDS`` for the whole probe) and parsed (tracefile/fr_dump.py) into
one ``FlightRecorderDump`` event each; a file refused, or each prefix of a process nothing is
read for (a setuid program), is an event whose ``error`` says why. ``pid`` is the process whose
RANK is the file's rank, else the one that named the prefix. hangtrace never triggers a dump.
Numbers in the environment are read by linux/intparse.py (``RANK=²`` is no rank).
"""
from __future__ import annotations

import os
import time
from typing import Dict, List, Optional, Tuple

from ...events.stacks import FlightRecorderDump
from ...linux import cancel, procfs
from ...linux.intparse import is_digits, parse_uint
from ...linux.target_files import (TargetFileRefused, list_target_dir, privilege_refusal,
                                   read_target_file, target_creds, target_path)
from ...tracefile.fr_dump import dump_from_bytes, rank_of
from ...tracefile.fr_pickle import MAX_BYTES

__all__ = ["flight_recorder_probe", "dump_files", "DEFAULT_PREFIX", "ENV"]

DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"
SIZE_VARS = ("TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE")
PREFIX_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
ENV = SIZE_VARS + PREFIX_VARS + ("RANK",)
MAX_FILES = 1024
SECONDS = 5.0


def _enabled(env: Dict[str, str]) -> bool:
    return any((parse_uint(env.get(name, "").strip()) or 0) > 0 for name in SIZE_VARS)


def _prefixes(env: Dict[str, str]) -> List[str]:
    return list(dict.fromkeys([env[v] for v in PREFIX_VARS if env.get(v)] or [DEFAULT_PREFIX]))


def dump_files(pid: int, env: Dict[str, str], root: str = "/proc", seconds: float = 2.0
               ) -> List[Tuple[str, Optional[int]]]:
    """(path as the process names it, rank) of the dumps ``pid``'s environment points to.
    The Flight Recorder is enabled by ``TORCH_NCCL_TRACE_BUFFER_SIZE`` or ``TORCH_FR_BUFFER_SIZE``
    > 0; the files are every ``<prefix><rank>`` of the prefixes it names
    (``TORCH_FR_DUMP_TEMP_FILE``, ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``, else torch's default
    ``/tmp/nccl_trace_rank_``; a relative one from the process's working folder)."""
    out = []
    for prefix in _prefixes(env):
        try:
            folder, base = os.path.split(target_path(pid, prefix, root))
            names = list_target_dir(pid, folder, seconds=seconds, root=root)
        except TargetFileRefused:
            continue
        for n in names:
            if n.startswith(base) and is_digits(n[len(base):]):
                out.append((os.path.join(folder, n), rank_of(n, base)))
    return out[:MAX_FILES]


def flight_recorder_probe(pids: List[int], analyzer: object = None,
                          root: str = "/proc") -> List[FlightRecorderDump]:
    """EndProbe (session.py): the Flight Recorder dumps of ``pids`` (module doc).
    Each file is read inside the process's own root, no link followed, a regular file it owns,
    bounded in size and time (linux/target_files.py); at most ``MAX_FILES`` in all, none once
    the probe's ``SECONDS`` are spent (each left is an event that says so)."""
    deadline = time.monotonic() + SECONDS
    envs = {pid: procfs.read_environ_vars(pid, ENV, root) for pid in pids}
    ranks: Dict[int, int] = {}
    for pid, env in envs.items():
        rank = parse_uint(env.get("RANK", "").strip())
        if rank is not None:
            ranks.setdefault(rank, pid)
    files: Dict[str, Tuple[int, Optional[int], int]] = {}
    out = []
    for pid, env in sorted(envs.items()):
        cancel.check()          # a stop inside the probe (linux/cancel.py), not after it
        if not _enabled(env) or time.monotonic() >= deadline:
            continue
        creds = target_creds(pid, root)
        why = privilege_refusal(pid, creds, root) if creds is not None else None
        if why is not None:
            out += [FlightRecorderDump(ts=time.time(), path=prefix, pid=pid,
                                       error=f"not read: {why}") for prefix in _prefixes(env)]
            continue
        for seen_as, rank in dump_files(pid, env, root, _left(deadline)):
            owner = ranks.get(rank, pid) if rank is not None else pid
            files.setdefault(seen_as, (pid, rank, owner))
    now = time.time()
    for seen_as, (reader, rank, owner) in sorted(files.items())[:MAX_FILES]:
        ev = FlightRecorderDump(ts=now, path=seen_as, rank=rank, pid=owner)
        cancel.check()
        if time.monotonic() >= deadline:
            ev.error = f"not read: the probe's {SECONDS:g} s were spent"
            out.append(ev)
            continue
        try:
            got = read_target_file(reader, seen_as, max_bytes=MAX_BYTES,
                                   seconds=_left(deadline), owned=True, root=root)
        except TargetFileRefused as exc:
            ev.error = f"not read: {exc}"
        else:
            ev.mtime, ev.size = got.mtime, got.size
            dump_from_bytes(got.data, ev)
        out.append(ev)
    return out


def _left(deadline: float) -> float:
    return max(0.05, min(2.0, deadline - time.monotonic()))


flight_recorder_probe.__name__ = "flight recorder"
