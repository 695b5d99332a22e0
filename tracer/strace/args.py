"""Reading strace's argument text: fd decorations and top-level argument splitting.

Contract (pure functions, bounded memo caches only):
- ``parse_fd(text) -> (fd, kind, target)`` reads an fd argument as strace prints it, with or
  without -y/-yy decoration (``3</dev/nvidiactl<char 195:255>>``, ``16<anon_inode:[eventfd]>``,
  ``5<TCP:[127.0.0.1:8000->127.0.0.1:5000]>``, ``3</tmp/#12>(deleted)``, plain ``3``); kind is
  one of events/__init__.py's fd kinds.
- ``first_arg`` / ``split_args`` cut argument text at top-level ", " without splitting inside
  structs, arrays, strings or fd decorations. Every scan is one pass over the text, whatever
  it holds (unclosed ``<`` or quotes, floods of escaped quotes): time linear in its length.
- ``unescape`` reads strace's C escapes; ``exec_args`` the filename and argv of an execve.
"""
from __future__ import annotations

import codecs
import re
import warnings
from typing import Callable, Dict, List, Optional, Tuple

from ..events import STRING_LITERAL
from ..linux.fdtarget import fd_kind, strip_device

__all__ = ["FdInfo3", "parse_fd", "classify_target", "decoration_end", "first_arg",
           "py_first_arg", "split_args", "memo", "unescape", "exec_args"]

FdInfo3 = Tuple[Optional[int], Optional[str], Optional[str]]

_CACHE_MAX = 4096
# Longer texts are computed each time, never kept: a memo holds at most 4096 texts of 4 KiB
# (a hostile log of distinct 1 MB poll sets would otherwise fill memory through it).
MEMO_TEXT_MAX = 4096


class _Memo(dict):
    """A bounded memo for a pure str -> value function: ``memo[text]``. Hits are a plain dict
    lookup (the same fd, futex op or poll set recurs millions of times in a log)."""

    def __init__(self, fn: Callable[[str], object]) -> None:
        super().__init__()
        self.fn = fn

    def __missing__(self, text: str) -> object:
        v = self.fn(text)
        if len(text) <= MEMO_TEXT_MAX:
            if len(self) >= _CACHE_MAX:
                self.clear()
            self[text] = v
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
    It ends at the first '>' (not an arrow's) where the '<'s and '>'s since ``lt`` balance:
    one pass with a depth counter, from '>' to '>' (csrc/lines.c does the same per character).
    """
    depth = 0
    prev = lt
    j = args.find(">", lt + 1)
    while j >= 0:
        depth += args.count("<", prev, j)
        if args[j - 1] != "-":
            depth -= 1
            if depth == 0:
                return j + len(_DELETED) if args.startswith(_DELETED, j + 1) else j
        prev = j + 1
        j = args.find(">", prev)
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
    """py_first_arg, or its compiled twin (strace/fastpath.py)."""
    from .fastpath import compiled
    fast = compiled()
    if fast is None:
        return py_first_arg
    fast.set_fallback("first_arg", py_first_arg)
    return fast.first_arg


first_arg = _pick_first_arg()


# What split_args reads its text as, a token at a time at C speed: a run of text without a
# quote, a '<' or a ", " (its brackets counted in bulk), a comma that may split, a string
# (events.STRING_LITERAL's grammar), a decoration without another inside (arrows "->"
# allowed: decoration_end's rule), or any other '<' (decoration_end). A lookahead and its
# back-reference make a body possessive (3.11's *+ is buggy): no backtracking into it.
_SPLIT_TOKENS = re.compile(r"""
    (?P<run>(?=(?P<r>(?:[^<",]+|,(?!\ ))+))(?P=r))
  | (?P<comma>,\ )
  | (?P<str>"(?=(?P<body>(?:[^"\\]+|\\.)*))(?P=body)(?:"|\\?\Z))
  | (?P<simple><(?=(?P<dec>(?:[^<>-]+|-(?!>)|->)*))(?P=dec)>(?:\(deleted\))?)
  | (?P<lt><)""", re.X | re.S)


def split_args(args: str, most: int = -1) -> List[str]:
    """Split argument text on top-level ", " (not inside [], {}, () or fd ``<...>``, nor in a
    string), at most ``most`` times (str.split's maxsplit: the rest is the last piece). One
    pass over the text, a token at a time; an unclosed string or decoration runs to the end of
    the text, as one piece."""
    out: List[str] = []
    depth = 0
    start = 0
    pos: Optional[int] = 0
    while pos is not None:
        tokens, pos = _SPLIT_TOKENS.finditer(args, pos), None
        for m in tokens:
            kind = m.lastgroup
            if kind == "comma":
                if depth == 0:
                    if len(out) == most:
                        break
                    out.append(args[start:m.start()])
                    start = m.end()
            elif kind == "run":
                run = m.group()
                depth += (run.count("[") + run.count("{") + run.count("(")
                          - run.count("]") - run.count("}") - run.count(")"))
            elif kind == "lt":            # a decoration with another inside
                end = decoration_end(args, m.start())
                if end >= 0:
                    pos = end + 1         # tokens again after it
                break                     # (never closed: the rest is one piece)
    if start < len(args) or out:
        out.append(args[start:])
    return out


# --------------------------------------------------------------------------- strings


def unescape(text: str) -> str:
    """strace prints C escapes (\\n, \\33, \\x1b, \\"); argv is a command line, keep it readable."""
    if "\\" not in text:
        return text
    try:
        if _ODD_ESCAPE.search(text) is None:    # only escapes C knows: no warning to catch
            raw = codecs.escape_decode(text.encode("utf-8", "surrogateescape"))[0]
        else:
            with warnings.catch_warnings():     # "\/" and such: kept as they are, no warning
                warnings.simplefilter("ignore", DeprecationWarning)
                raw = codecs.escape_decode(text.encode("utf-8", "surrogateescape"))[0]
        return raw.decode("utf-8", "surrogateescape")  # type: ignore[union-attr]
    except (ValueError, UnicodeError):
        return text


# A backslash not followed by an escape that codecs.escape_decode reads without a warning.
_ODD_ESCAPE = re.compile(r"""\\(?![\\'"abfnrtv0-7x\n])""")
# The arguments of an execve kept (then "..."): a command line, not an unbounded list.
ARGV_MAX = 4096


def exec_args(args: str) -> Tuple[str, List[str]]:
    """``"/usr/bin/true", ["true", "arg1"], 0x7ffd /* 35 vars */`` -> (filename, argv); at
    most ``ARGV_MAX`` arguments, then "..." ."""
    m = STRING_LITERAL.search(args)
    if not m:
        return "", []
    filename = unescape(m.group(1))
    lb = args.find("[", m.end())
    if lb < 0:
        return filename, []
    argv: List[str] = []
    pos = lb + 1
    while True:
        m2 = STRING_LITERAL.match(args, pos)
        if not m2:
            break
        item = unescape(m2.group(1))
        if m2.group(2):                     # strace truncated this string (-s)
            item += "..."
        pos = m2.end()
        argv.append(item)
        if not args.startswith(", ", pos):
            break
        if len(argv) == ARGV_MAX:
            argv.append("...")
            break
        pos += 2
    return filename, argv
