"""/proc/locks, parsed: who holds which file lock and who waits for it.

Contract: ``parse_locks(text)`` is pure and returns one ``LockLine`` per line it understands,
skipping the others. Kernel facts (fs/locks.c, lock_get_status): a line is
``ID: KIND ADVISORY|MANDATORY READ|WRITE|UNLCK PID MAJ:MIN:INODE START END``, KIND being FLOCK,
POSIX, OFDLCK, LEASE, BREAKING, ACCESS or DELEG; a waiter's line is the same with ``->`` after
the id (``1: -> FLOCK ADVISORY WRITE 1231 fe:00:8118310 0 EOF``) and follows the lock it waits
for, whose line has the same id. An OFD lock shows pid -1; the inode is the file's st_ino, as
/proc/PID/fdinfo/FD's ``ino:`` shows it. ``read_locks(root)`` reads the file (empty when it
cannot be read).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List

__all__ = ["LockLine", "parse_locks", "read_locks"]

_LINE = re.compile(r"^(\d{1,10}):\s+(->\s+)?([A-Z]{1,10})\s+([A-Z]{1,10})\s+([A-Z]{1,10})\s+"
                   r"(-?\d{1,10})\s+([0-9a-f]{1,8}:[0-9a-f]{1,8}):(\d{1,20})\s")


@dataclass(frozen=True)
class LockLine:
    lock_id: int
    waiting: bool
    kind: str            # FLOCK, POSIX, OFDLCK, ...
    mode: str            # ADVISORY, MANDATORY
    access: str          # READ, WRITE, UNLCK
    pid: int             # -1 for an OFD lock
    dev: str             # "fe:00"
    inode: int


def parse_locks(text: str) -> List[LockLine]:
    out: List[LockLine] = []
    for line in text.splitlines():
        m = _LINE.match(line.strip() + " ")
        if m is None:
            continue
        out.append(LockLine(int(m.group(1)), bool(m.group(2)), m.group(3), m.group(4),
                            m.group(5), int(m.group(6)), m.group(7), int(m.group(8))))
    return out


def read_locks(root: str = "/proc") -> List[LockLine]:
    try:
        with open(f"{root}/locks", encoding="ascii", errors="replace") as f:
            return parse_locks(f.read(1 << 22))
    except OSError:
        return []
