"""The optional compiled helpers (tracer/tracefile/csrc/, module ``_fast``) and how to get them.

Contract:
- ``compiled()`` is the ``_fast`` extension module when it is built for this interpreter from
  the C sources in csrc/ (the module carries their hash), else None; callers
  then use the pure-Python twins, which are the reference (tests compare both on real logs and
  traces). ``HANGTRACE_PURE=1`` in the environment forces the pure-Python path.
- ``status()`` says in words which path is in use and why (bench/, doctor).
scripts/build_fast.py builds the module with the machine's own C compiler (scripts/setup.sh
runs it); nothing requires it.
"""
from __future__ import annotations

import hashlib
import importlib
import os
from types import ModuleType
from typing import Optional, Tuple

__all__ = ["compiled", "status"]

_CSRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc")
_state: dict = {}


def compiled() -> Optional[ModuleType]:
    if "module" not in _state:
        _state["module"], _state["why"] = _load()
    return _state["module"]


def status() -> str:
    compiled()
    return _state["why"]


def _load() -> Tuple[Optional[ModuleType], str]:
    if os.environ.get("HANGTRACE_PURE", "") not in ("", "0"):
        return None, "pure Python (HANGTRACE_PURE is set)"
    try:
        mod = importlib.import_module("tracer.tracefile._fast")
    except ImportError:
        return None, "pure Python (compiled helpers not built: python scripts/build_fast.py)"
    try:
        want = source_hash(_CSRC)
    except OSError:
        want = getattr(mod, "SOURCE_HASH", "")      # an installed copy without the sources
    if getattr(mod, "SOURCE_HASH", None) != want:
        return None, ("pure Python (the compiled helpers were built from another version of "
                      "csrc/: python scripts/build_fast.py)")
    return mod, "compiled helpers (tracer/tracefile/csrc/)"


def source_hash(csrc: str) -> str:
    """The sha1 of the C sources in ``csrc``, as scripts/build_fast.py computes it."""
    h = hashlib.sha1()
    for name in sorted(n for n in os.listdir(csrc) if n.endswith((".c", ".h"))):
        with open(os.path.join(csrc, name), "rb") as f:
            h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()[:16]
