"""Numbers in text that others wrote (strace logs, /proc, command lines, file names).

ASCII digits only, and a bounded length before ``int()``. Contract (pure, never raises):
- ``is_digits(text)``: one or more ASCII digits (``str.isdigit()`` says yes to more).
- ``parse_uint(text, most=ID_DIGITS)``: the value of ``is_digits`` text of at most ``most``
  digits; None for anything else.
- ``parse_c_int(text, most=24)``: an integer as strace prints it (decimal or ``0x`` hex, both
  bounded) of at most ``most`` characters, as ``int(text, 0)`` reads it; None otherwise.
- ``DIGIT``: the regex class of a digit for patterns whose numbers go to ``int()``
  (``\\d`` matches every Unicode decimal digit).
"""
from __future__ import annotations

import re
from typing import Optional

__all__ = ["DIGIT", "ID_DIGITS", "is_digits", "parse_uint", "parse_c_int"]

DIGIT = "[0-9]"
# A pid, tid, fd or inode number: PID_MAX_LIMIT is 4194304 (7 digits), inodes fit 10 digits
# on the machines seen; 20 digits hold any 64-bit value.
ID_DIGITS = 20
_C_INT = re.compile(r"-?(?:0[xX][0-9a-fA-F]{1,16}|0|[1-9][0-9]{0,19})")


def is_digits(text: str) -> bool:
    """One or more ASCII digits. ``str.isdigit()`` also says yes to ``²`` (which ``int()`` refuses:
    a pid column ``3¹540`` or ``Process ²5 attached`` made the import fail) and to ``٣`` (which
    ``int()`` reads as 3); neither is a number strace or the kernel prints."""
    return text.isascii() and text.isdigit()


def parse_uint(text: str, most: int = ID_DIGITS) -> Optional[int]:
    """The value of ``is_digits`` text of at most ``most`` digits; None for anything else (no sign,
    no spaces, no underscores: ``int()`` takes ``" +1_0"``)."""
    if 0 < len(text) <= most and text.isascii() and text.isdigit():
        return int(text)
    return None


def parse_c_int(text: str, most: int = 24) -> Optional[int]:
    """An integer as strace prints it: decimal of at most 20 digits with an optional ``-``, or
    ``0x`` and at most 16 hex digits (no longer one is a 64-bit value, and ``int()`` of hex has no
    digit limit), of at most ``most`` characters, as ``int(text, 0)`` reads it; None otherwise."""
    if len(text) > most or _C_INT.fullmatch(text) is None:
        return None
    return int(text, 0)
