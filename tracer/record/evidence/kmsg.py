"""NVIDIA driver lines (NVRM: Xid ..., "fallen off the bus") from the kernel log, /dev/kmsg.

Contract:
- ``read_nvrm_lines(since)`` -> ``KernelLog`` with the matching lines logged at or after
  ``since`` (epoch seconds), oldest first, at most ``MAX_LINES`` (the newest are kept); read
  in part (``MAX_RECORDS`` records or ``MAX_SECONDS``), ``why`` says so. It never raises: no
  /dev/kmsg (a container), no permission (kernel.dmesg_restrict=1 without CAP_SYSLOG) and
  the like give no lines and ``why``.
- ``parse_record(data)`` is pure: one /dev/kmsg record -> (usec since boot, message) or None
  (the record format and its clock: its docstring).
"""
from __future__ import annotations

import errno
import os
import re
import time
from typing import Callable, List, Optional, Tuple

from ...events.evidence import KernelLog

__all__ = ["read_nvrm_lines", "scan_records", "parse_record", "is_nvrm_line", "KMSG"]

KMSG = "/dev/kmsg"
MAX_RECORDS = 200_000
MAX_SECONDS = 2.0
MAX_LINES = 200
_NVRM = re.compile(r"NVRM: (Xid\b|.*fallen off the bus|.*RmInitAdapter failed|.*GPU (is )?lost)",
                   re.IGNORECASE)


def parse_record(data: bytes) -> Optional[Tuple[int, str]]:
    """(usec since boot, message) of one /dev/kmsg record, None when it is not one.
    Record format (Documentation/ABI/testing/dev-kmsg): "prio,seq,usec,flags[,...];message" and a
    newline, followed by " KEY=value" continuation lines; one read() returns one record, EPIPE
    means records were overwritten before they were read (reading goes on from the next one).
    Timestamps: the record's usec is local_clock() since boot, which like CLOCK_MONOTONIC stops
    during suspend; epoch = now - (monotonic now - usec)."""
    head, sep, rest = data.partition(b";")
    if not sep:
        return None
    fields = head.split(b",")
    try:
        usec = int(fields[2])
    except (IndexError, ValueError):
        return None
    message = rest.split(b"\n", 1)[0]
    return usec, message.decode("utf-8", "replace")


def is_nvrm_line(message: str) -> bool:
    return bool(_NVRM.search(message))


def _why_open(exc: OSError, path: str) -> str:
    if exc.errno == errno.ENOENT:
        return f"no {path} here (a container without the kernel log?)"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return (f"no permission to read {path} (needs root or CAP_SYSLOG when "
                "kernel.dmesg_restrict=1)")
    return f"cannot open {path}: {exc.strerror or exc}"


def scan_records(read: Callable[[], bytes], log: KernelLog, since: Optional[float],
                 wall: float, mono_now: float, max_records: int = MAX_RECORDS,
                 max_seconds: float = MAX_SECONDS) -> None:
    """Read records with ``read()`` (one record per call, BlockingIOError at the end, OSError
    EPIPE for records overwritten before they were read) into ``log`` (``parse_record``)."""
    lines: List[Tuple[float, str]] = []
    overwritten = 0
    deadline = time.monotonic() + max_seconds
    while True:
        if log.scanned >= max_records or time.monotonic() > deadline:
            log.why = (f"read in part: stopped after {log.scanned} records "
                       f"({max_seconds:g} s / {max_records} records bound)")
            break
        try:
            data = read()
        except BlockingIOError:
            break
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                overwritten += 1
                continue
            if exc.errno == errno.EINVAL:    # a record longer than the buffer: skip it
                continue
            log.why = f"reading {log.source} failed: {exc.strerror or exc}"
            break
        if not data:
            break
        log.scanned += 1
        rec = parse_record(data)
        if rec is None or not is_nvrm_line(rec[1]):
            continue
        ts = wall - (mono_now - rec[0] / 1e6)
        if since is not None and ts < since:
            continue
        lines.append((round(ts, 3), rec[1]))
    if overwritten and not log.why:
        log.why = f"{overwritten} records were overwritten while being read"
    log.lines = lines[-MAX_LINES:]


def read_nvrm_lines(since: Optional[float], path: str = KMSG, *,
                    max_records: int = MAX_RECORDS, max_seconds: float = MAX_SECONDS
                    ) -> KernelLog:
    """NVRM lines since ``since`` (module doc).
    It opens /dev/kmsg non-blocking, reads the ring buffer from its oldest record until EAGAIN, and
    stops at ``MAX_RECORDS`` records or ``MAX_SECONDS``: ``why`` then says the log was read in
    part."""
    wall = time.time()
    mono_now = time.clock_gettime(time.CLOCK_MONOTONIC)
    log = KernelLog(ts=wall, source=path, since=since)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        log.why = _why_open(exc, path)
        return log
    try:
        scan_records(lambda: os.read(fd, 8192), log, since, wall, mono_now, max_records,
                     max_seconds)
    finally:
        os.close(fd)
    return log
