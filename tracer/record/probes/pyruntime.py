"""Where CPython keeps its runtime state (and so the main interpreter's GIL) in a process.

Contract: ``python_runtime(pid)`` -> one ``PythonRuntime`` event: the absolute address and size
of the ``_PyRuntime`` symbol of the python executable or libpython the process maps, from the
file's ELF symbols (elfsyms.py) and its load address in /proc/PID/maps; ``error`` says why not
(the maps unreadable, no such symbol: not CPython 3.7+, or a stripped build). Only files are
read (/proc/PID/maps and the ELF file on disk): the target is never touched.
The GIL (mutex, conditions) of the main interpreter lies inside ``_PyRuntime`` in CPython 3.9
to 3.14 (``_PyRuntime.ceval.gil`` before 3.12, ``_PyRuntime._main_interpreter._gil`` since):
a futex a thread waits on at an address inside it is the GIL's (analysis/vocab/stack_facts.py).
"""
from __future__ import annotations

import os
import re
import time
from typing import Optional

from ...events.stacks import PythonRuntime
from .elfsyms import load_bias, read_maps, symbols

__all__ = ["python_runtime"]

_PY_FILE = re.compile(r"(^python[\d.]*$|^libpython[\d.]+\w*\.so)")
SYMBOL = "_PyRuntime"


def python_runtime(pid: int, now: Optional[float] = None) -> PythonRuntime:
    ts = time.time() if now is None else now
    maps = read_maps(pid)
    if not maps:
        return PythonRuntime(ts=ts, pid=pid, error="/proc/PID/maps not readable")
    files = list(dict.fromkeys(m.path for m in maps if _PY_FILE.match(os.path.basename(m.path))))
    for path in sorted(files, key=lambda p: "libpython" not in p):   # libpython first
        table = symbols(path, next(m.file for m in maps if m.path == path))
        found = table.by_name.get(SYMBOL)
        bias = load_bias(path, maps) if found else None
        if found and bias is not None:
            return PythonRuntime(ts=ts, pid=pid, addr=bias + found[0], size=found[1],
                                 binary=path)
    names = ", ".join(os.path.basename(p) for p in files) or "no python binary mapped"
    return PythonRuntime(ts=ts, pid=pid, error=f"no {SYMBOL} symbol in {names} "
                         "(not CPython 3.7 or later, or a stripped build)")
