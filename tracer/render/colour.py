"""Whether what hangtrace prints has colours: ``--color=auto|always|never`` (every command that
prints colour) and the NO_COLOR convention (no-color.org), decided in one place.

Contract:
- ``MODES``: the option's values. ``set_mode(mode)``: the CLI sets it once per command
  (cli/options.py's ``color_option``); the default is "auto".
- ``wanted(tty)``: "always" -> True (also in a pipe, for ``less -R``, and over NO_COLOR: the
  command line wins over the environment), "never" -> False, "auto" -> a terminal and NO_COLOR
  unset or empty.
- ``console_options(tty)``: the keyword arguments of rich's Console for that choice.
Files a command writes (watch's REPORT.txt, ``-o``) never get colours: their callers do not ask.
"""
from __future__ import annotations

import os
from typing import Any, Dict

__all__ = ["MODES", "set_mode", "mode", "wanted", "console_options"]

MODES = ("auto", "always", "never")
_state = {"mode": "auto"}


def set_mode(value: str) -> None:
    """Set the colour mode (one of MODES; anything else is a ValueError)."""
    if value not in MODES:
        raise ValueError(f"colour mode {value!r} is not one of {', '.join(MODES)}")
    _state["mode"] = value


def mode() -> str:
    return _state["mode"]


def wanted(tty: bool) -> bool:
    """Whether to print colours on a stream that is (or is not) a terminal (module doc)."""
    if _state["mode"] == "always":
        return True
    if _state["mode"] == "never":
        return False
    return tty and not os.environ.get("NO_COLOR")


def console_options(tty: bool) -> Dict[str, Any]:
    """rich Console keyword arguments for the choice (module doc)."""
    if not wanted(tty):
        return {"color_system": None, "no_color": True}
    if tty:
        return {"no_color": False}
    return {"force_terminal": True, "color_system": "256", "no_color": False}
