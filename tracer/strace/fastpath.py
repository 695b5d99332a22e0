"""The optional compiled helpers (module ``_fast``): of the strace importer (tracer/strace/csrc/:
line parser, first pass, complete calls made events), of the trace reader for the analysis
(tracefile/csrc/rows.c: call rows read in place) and of the accumulator (analysis/accumulate/
csrc/: calls into statistics), and how to get them. codec.py (msgspec) writes trace rows.

Contract:
- ``compiled()`` is the ``_fast`` extension module when it is built for this interpreter from
  the C sources in csrc/ (the module carries their hash), else None; callers then use the
  pure-Python twins, the reference (tests compare both); ``HANGTRACE_PURE=1`` forces those.
- ``status()`` says in words which path is in use and why (bench/, doctor).
- ``source_files(package_dir)``, ``source_hash(package_dir)``: what setup.py compiles, and
  its hash.
"""
from __future__ import annotations

import glob
import hashlib
import importlib
import os
from types import ModuleType
from typing import List, Optional, Tuple

__all__ = ["compiled", "status", "source_files", "source_hash"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))      # tracer/
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
        mod = importlib.import_module("tracer.strace._fast")
    except ImportError:
        return None, ("pure Python (compiled helpers not built: the pure py3-none-any wheel, "
                      "or no C compiler when it was installed; in a checkout: python "
                      "scripts/build_fast.py)")
    try:
        want = source_hash(_PACKAGE) if source_files(_PACKAGE) else \
            getattr(mod, "SOURCE_HASH", "")      # an installed copy: no sources beside it
    except OSError:
        want = getattr(mod, "SOURCE_HASH", "")
    if getattr(mod, "SOURCE_HASH", None) != want:
        return None, ("pure Python (the compiled helpers were built from another version of "
                      "csrc/: python scripts/build_fast.py)")
    return mod, f"compiled helpers ({os.path.basename(mod.__file__ or '_fast')})"


def source_files(package_dir: str) -> List[str]:
    """The C sources and headers of the compiled helpers: every ``csrc/*.c`` and ``*.h`` under
    ``package_dir``, sorted by their path relative to it."""
    found = glob.glob(os.path.join(package_dir, "**", "csrc", "*.[ch]"), recursive=True)
    return sorted(found, key=lambda p: os.path.relpath(p, package_dir))


def source_hash(package_dir: str) -> str:
    """The sha1 of ``source_files(package_dir)`` (relative path, NUL, content, for each).
    setup.py compiles ``source_files`` with that hash (the install builds the module;
    scripts/build_fast.py rebuilds it in the source tree)."""
    h = hashlib.sha1()
    for path in source_files(package_dir):
        with open(path, "rb") as f:
            h.update(os.path.relpath(path, package_dir).encode() + b"\0" + f.read())
    return h.hexdigest()[:16]
