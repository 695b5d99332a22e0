"""What an input path names, told once from the file system and the file's first line.

Contract: ``open_input(path, dumps=True)`` returns an ``Input`` whose ``kind`` is
- ``FR_DUMPS``: a directory of PyTorch Flight Recorder dumps (when ``dumps``: ``analyze --fr``
  reads its dumps elsewhere and takes the directory as strace -ff files);
- ``FF_SET``: another directory, or a name no file has (strace -ff -o PREFIX writes PREFIX.TID);
- ``TRACE``: a hangtrace trace, one that starts as one (its reader says what is broken), a FIFO
  (read once, by the trace reader) or a path whose stat fails otherwise (the reader says why);
- ``STRACE_LOG``: any other regular file, with ``why``, the line saying why it is no trace
  (what ``analyze`` says when the strace importer cannot read it either).
A file that cannot be opened raises BadInput, a trace broken in its header CorruptTrace.
"""
from __future__ import annotations

import enum
import os
import stat
from dataclasses import dataclass
from typing import Optional

from ..tracefile.format import not_a_trace
from ..tracefile.fr_dump import find_dumps

__all__ = ["Input", "InputKind", "open_input"]


class InputKind(enum.Enum):
    TRACE = "trace"
    STRACE_LOG = "strace log"
    FF_SET = "strace -ff files"
    FR_DUMPS = "Flight Recorder dumps"


@dataclass(frozen=True)
class Input:
    path: str
    kind: InputKind
    why: Optional[str] = None      # STRACE_LOG: why it is no trace


def open_input(path: str, dumps: bool = True) -> Input:
    """What ``path`` is (module doc)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return Input(path, InputKind.FF_SET)
    except OSError:
        return Input(path, InputKind.TRACE)
    if stat.S_ISDIR(mode):
        kind = InputKind.FR_DUMPS if dumps and find_dumps(path) else InputKind.FF_SET
        return Input(path, kind)
    if not stat.S_ISREG(mode):
        return Input(path, InputKind.TRACE)
    why = not_a_trace(path)
    return Input(path, InputKind.TRACE if why is None else InputKind.STRACE_LOG, why)
