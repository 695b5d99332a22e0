"""A wait(2) status word (what a zombie's /proc/PID/stat field 52 holds, what waitpid returns),
decoded in ONE place for every layer: the backends' exit events, the analyzer's "exited with
status 3", the snapshot's process line.

Contract (pure):
- ``decode_wait_status(code)`` -> (exit status or None, signal name or None, core dumped);
- ``describe_wait_status(code)`` -> "exited with status 3" / "killed by SIGKILL" /
  "killed by SIGSEGV (core dumped)".
Kernel facts: a normal exit keeps its status in bits 8-15 with the low 7 bits zero; a death by
signal keeps the signal number in the low 7 bits and 0x80 when a core was dumped.
"""
from __future__ import annotations

import signal
from typing import Optional, Tuple

__all__ = ["decode_wait_status", "describe_wait_status", "signal_name"]


def signal_name(sig: int) -> str:
    """SIGKILL for 9; SIG<n> for a number Python does not name."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"SIG{sig}"


def decode_wait_status(code: int) -> Tuple[Optional[int], Optional[str], bool]:
    """(exit status, signal name, core dumped) from a wait(2) status word (module doc)."""
    sig = code & 0x7F
    if sig == 0:
        return (code >> 8) & 0xFF, None, False
    return None, signal_name(sig), bool(code & 0x80)


def describe_wait_status(code: int) -> str:
    """The words for a wait(2) status (module doc)."""
    status, sig, core = decode_wait_status(code)
    if sig is None:
        return f"exited with status {status}"
    return f"killed by {sig}" + (" (core dumped)" if core else "")
