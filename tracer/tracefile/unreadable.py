"""What a recording that could not write its trace (a full disk) leaves behind.

Contract: ``drop_unreadable(path)`` removes the file at ``path`` when it does not read as a trace
(0 bytes, a header cut short: nothing a user could analyze, only something that looks like a
recording); a trace that reads, even one cut after its header (it reads up to where it
stopped), is kept, and so is standard output ("-"). It never raises.
"""
from __future__ import annotations

import contextlib
import os

from ..errors import HangtraceError
from .format import not_a_trace

__all__ = ["drop_unreadable"]


def drop_unreadable(path: str) -> None:
    """Remove ``path`` when it does not read as a trace (module doc)."""
    if path == "-":
        return
    try:
        unreadable = not_a_trace(path) is not None
    except HangtraceError:          # cut inside its header, or gone
        unreadable = True
    if unreadable:
        with contextlib.suppress(OSError):
            os.unlink(path)
