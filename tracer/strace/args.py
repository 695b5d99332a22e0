"""Reading strace's argument text: fd decorations and top-level argument splitting.

Contract (pure functions, bounded memo caches only):
- ``parse_fd(text) -> (fd, kind, target)`` reads an fd argument as strace prints it, with or
  without -y/-yy decoration (``3</dev/nvidiactl<char 195:255>>``, ``16<anon_inode:[eventfd]>``,
  ``5<TCP:[127.0.0.1:8000->127.0.0.1:5000]>``, ``3</tmp/#12>(deleted)``, plain ``3``); kind is
  one of events.py's fd kinds.
- ``first_arg`` / ``split_args`` cut argument text at top-level ", " without splitting inside
  structs, arrays, strings or fd decorations.
- ``unescape`` reads strace's C escapes; ``exec_args`` the filename and argv of an execve.
"""
from __future__ import annotations

import codecs
import re
import warnings
from typing import Callable, List, Optional, Tuple

from ..linux.fdtarget import fd_kind, strip_device

__all__ = ["FdInfo3", "parse_fd", "classify_target", "decoration_end", "first_arg",
           "py_first_arg", "split_args", "memo", "unescape", "exec_args"]

FdInfo3 = Tuple[Optional[int], Optional[str], Optional[str]]

_CACHE_MAX = 4096


class _Memo(dict):
    """A bounded memo for a pure str -> value function: ``memo[text]``. Hits are a plain dict
    lookup (the same fd, futex op or poll set recurs millions of times in a log)."""

    def __init__(self, fn: Callable[[str], object]) -> None:
        super().__init__()
        self.fn = fn

    def __missing__(self, text: str) -> object:
        if len(self) >= _CACHE_MAX:
            self.clear()
        v = self[text] = self.fn(text)
        return v


def memo(fn: Callable[[str], object]) -> Callable[[str], object]:
    """Decorator form of ``_Memo`` for the public helpers (callable like the function)."""
    return _Memo(fn).__getitem__


# --------------------------------------------------------------------------- fds
def classify_target(target: str) -> Tuple[Optional[str], str]:
    """(kind, target) of an fd from its -y/-yy decoration text (without the outer ``<>``):
    the kind from linux/fdtarget.py, the target without -yy's device numbers."""
    return fd_kind(target), strip_device(target)[0]


_classify = _Memo(classify_target).__getitem__


def parse_fd(text: str) -> FdInfo3:
    """``"3</dev/nvidiactl<char 195:255>>"`` -> (3, "nvidiactl", "/dev/nvidiactl")."""
    text = text.strip()
    lt = text.find("<")
    if lt < 0:
        try:
            return int(text), None, None
        except ValueError:
            return None, None, None
    try:
        fd: Optional[int] = int(text[:lt])
    except ValueError:           # AT_FDCWD</srv>: a directory, but not an fd number
        fd = None
    deleted = text.endswith(">" + _DELETED)
    if deleted:
        text = text[:-len(_DELETED)]
    inner = text[lt + 1:-1] if text.endswith(">") else text[lt + 1:]
    kind, target = _classify(inner)  # type: ignore[misc]
    return fd, kind, (target + " (deleted)" if deleted else target)


_parse_fd_cached = _Memo(parse_fd).__getitem__


_DELETED = "(deleted)"


def decoration_end(args: str, lt: int) -> int:
    """Index of the last character of the fd decoration that opens at ``args[lt] == '<'``.

    Decorations nest (``3</dev/nvidiactl<char 195:255>>``), hold ``->`` between socket ends
    (``5<TCP:[1.2.3.4:5->6.7.8.9:10]>``), and strace 6 prints an unlinked file
    as ``3</tmp/#123>(deleted)``: the suffix belongs to the decoration. -1 when unterminated.
    """
    # Candidate ends are the '>'s after lt; the first one where the '<'s and '>'s between are
    # balanced closes it (str.find/count run in C: this is on the hot path of every fd call).
    j = args.find(">", lt)
    while j != -1:
        seg = args[lt:j + 1]
        if seg.count("<") == seg.count(">") - seg.count("->"):
            if args.startswith(_DELETED, j + 1):
                j += len(_DELETED)
            return j
        j = args.find(">", j + 1)
    return -1


def py_first_arg(args: str) -> str:
    """The first argument's text; a decorated fd may contain ", " and "->" inside its ``<>``."""
    comma = args.find(", ")
    lt = args.find("<")
    if lt < 0 or (0 <= comma < lt):
        return args if comma < 0 else args[:comma]
    end = decoration_end(args, lt)
    return args if end < 0 else args[:end + 1]


def _pick_first_arg() -> Callable[[str], str]:
    """py_first_arg, or its compiled twin (tracefile/fastpath.py)."""
    from ..tracefile.fastpath import compiled
    fast = compiled()
    if fast is None:
        return py_first_arg
    fast.set_fallback("first_arg", py_first_arg)
    return fast.first_arg


first_arg = _pick_first_arg()


def split_args(args: str) -> List[str]:
    """Split argument text on top-level ", " (not inside [], {}, () or fd ``<...>``)."""
    out: List[str] = []
    depth = 0
    start = 0
    i = 0
    n = len(args)
    while i < n:
        c = args[i]
        if c in "[{(":
            depth += 1
        elif c in "]})":
            depth -= 1
        elif c == "<":
            end = decoration_end(args, i)     # skip an fd decoration as a whole
            if end >= 0:
                i = end + 1
                continue
        elif c == '"':
            j = i + 1
            while j < n and args[j] != '"':
                j += 2 if args[j] == "\\" else 1
            i = j + 1
            continue
        elif c == "," and depth == 0 and args.startswith(", ", i):
            out.append(args[start:i])
            start = i + 2
            i += 2
            continue
        i += 1
    if start < n or out:
        out.append(args[start:])
    return out


# --------------------------------------------------------------------------- strings
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def unescape(text: str) -> str:
    """strace prints C escapes (\\n, \\33, \\x1b, \\"); argv is a command line, keep it readable."""
    if "\\" not in text:
        return text
    try:
        with warnings.catch_warnings():     # "\/" and such: kept as they are, no warning
            warnings.simplefilter("ignore", DeprecationWarning)
            raw = codecs.escape_decode(text.encode("utf-8", "surrogateescape"))[0]
        return raw.decode("utf-8", "surrogateescape")  # type: ignore[union-attr]
    except (ValueError, UnicodeError):
        return text


def exec_args(args: str) -> Tuple[str, List[str]]:
    """``"/usr/bin/true", ["true", "arg1"], 0x7ffd /* 35 vars */`` -> (filename, argv)."""
    m = _STRING.search(args)
    if not m:
        return "", []
    filename = unescape(m.group(1))
    lb = args.find("[", m.end())
    if lb < 0:
        return filename, []
    argv: List[str] = []
    pos = lb + 1
    while True:
        m2 = _STRING.match(args, pos)
        if not m2:
            break
        item = unescape(m2.group(1))
        pos = m2.end()
        if args.startswith("...", pos):     # strace truncated this string (-s)
            item += "..."
            pos += 3
        argv.append(item)
        if not args.startswith(", ", pos):
            break
        pos += 2
    return filename, argv
