"""Where the BPF programs are, as each loader takes them: the CO-RE objects (libbpf) and the
C text (BCC). One source, bpf/NAME.bpf.c with its ht_*.bpf.h parts (bpf/ht_dialect.bpf.h
says how the two loaders differ).

Contract:
- ``BPF_DIR``: the C sources. ``object_path(name)`` is the ONE place that says where the
  built object of bpf/NAME.bpf.c is; a package that ships the objects elsewhere changes this
  function only.
- ``bcc_text(name)``: bpf/NAME.bpf.c as BCC compiles it (its docstring says how); a map call
  the rewrite does not know is named by ``libbpf_calls_left(text)`` (the tests require none).
Pure: reads files only.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import List

from ....resources import bpf_dir

__all__ = ["BPF_DIR", "object_path", "source_path", "bcc_text", "libbpf_calls_left"]

BPF_DIR = bpf_dir()          # bpf/ in a checkout, tracer/bpf installed (tracer/resources.py)


def source_path(name: str) -> Path:
    """bpf/NAME.bpf.c."""
    return BPF_DIR / f"{name}.bpf.c"


def object_path(name: str) -> Path:
    """The CO-RE object built from bpf/NAME.bpf.c: NAME.bpf.o beside the source, as
    scripts/build_bpf.py builds it (a checkout, a compiled wheel, an sdist's install), else
    ``<machine>/NAME.bpf.o`` under it (the pure wheel's, one folder per architecture: setup.py),
    for this machine's ``uname -m`` only. The flat path when neither exists."""
    flat = BPF_DIR / f"{name}.bpf.o"
    arch = BPF_DIR / os.uname().machine / f"{name}.bpf.o"
    return arch if not flat.exists() and arch.exists() else flat


_PART = re.compile(r'^#include "(ht_\w+\.bpf\.h)"$', re.M)
_ARG = r"([^,()]+(?:\([^()]*\))?[^,()]*)"          # one argument: sizeof(x) at most nested once
_REWRITES = [
    (re.compile(r"bpf_map_lookup_elem\(&(\w+),\s*"), r"\1.lookup("),
    (re.compile(r"bpf_map_delete_elem\(&(\w+),\s*"), r"\1.delete("),
    (re.compile(rf"bpf_map_update_elem\(&(\w+),\s*{_ARG},\s*{_ARG},\s*BPF_ANY\)"),
     r"\1.update(\2, \3)"),
    (re.compile(rf"bpf_map_update_elem\(&(\w+),\s*{_ARG},\s*{_ARG},\s*BPF_NOEXIST\)"),
     r"\1.insert(\2, \3)"),
    (re.compile(rf"bpf_ringbuf_reserve\(&(\w+),\s*{_ARG},\s*0\)"), r"\1.ringbuf_reserve(\2)"),
]
_LEFT = re.compile(r"bpf_map_\w+_elem\(&\w+|bpf_ringbuf_reserve\(&\w+")


def _spliced(text: str, depth: int = 0) -> str:
    if depth > 4:
        raise ValueError("bpf/: parts include each other too deeply")
    return _PART.sub(lambda m: _spliced((BPF_DIR / m.group(1)).read_text(), depth + 1), text)


def bcc_text(name: str = "hangtrace") -> str:
    """The program as BCC compiles it: every ``#include "ht_*.bpf.h"`` spliced in (BCC rewrites map
    calls in the main text only) and libbpf's map calls rewritten into BCC's method calls (table in
    ht_dialect.bpf.h). A map call the rewrite does not know is left as it is, and
    ``libbpf_calls_left(text)`` names it."""
    text = _spliced(source_path(name).read_text())
    for pattern, repl in _REWRITES:
        text = pattern.sub(repl, text)
    return text


def libbpf_calls_left(text: str) -> List[str]:
    """libbpf map calls in ``text`` that BCC would not understand."""
    return _LEFT.findall(text)
