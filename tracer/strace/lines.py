"""Parse one line of strace output into a ``StraceLine``; nothing else.

Contract:
- ``parse_line(text)`` is pure and never raises: it returns a ``StraceLine`` or ``None`` when the
  line is not strace output we understand (the caller counts those). Every common output shape
  is accepted (``parse_line``'s docstring).
- Argument text is returned raw (string literals included); scrubbing happens in decode.py.
- ``split_line(text)`` is the same parse as a plain tuple in ``StraceLine`` field order (the
  converter's hot path); when the compiled helper (tracer/strace/fastpath.py) is built it
  does the common shapes (complete, unfinished and resumed calls) and hands every other line to
  the Python parse, with identical results (tests compare the two on real logs).
- A call's entry alone is kind 'cut' (``_cut_entry``); ``glued_message(text)``: where strace's glued message begins.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Optional

from ..linux.intparse import is_digits, parse_c_int, parse_uint

__all__ = ["StraceLine", "glued_message", "parse_line", "split_line", "py_split_line", "KINDS", "FIELDS",
           "INTERRUPTED"]

KINDS = ("call", "unfinished", "resumed", "exited", "killed", "signal", "attached", "detached",
         "info", "cut")


@dataclass(slots=True)
class StraceLine:
    """One parsed strace line.

    kind: 'call' (complete syscall), 'unfinished' (entry half, ``<unfinished ...>``), 'resumed'
    (exit half, ``<... NAME resumed>``), 'exited' / 'killed' (``+++`` lines), 'signal'
    (``--- SIGxxx {...} ---``), 'attached' / 'detached' (``strace: Process N ...``), 'info',
    'cut' (the entry of a call whose line ends there, ``futex(0x4c, FUTEX_WAIT_PRIVATE, 2, NULL``:
    strace was stopped before it could finish the line or mark it ``<unfinished ...>``; a
    trailing ``^C``, the terminal's echo of Ctrl-C, is dropped).
    For 'resumed' lines ``args`` is only the text printed after the ``resumed>`` marker.
    """
    tid: Optional[int]
    ts: Optional[float]
    kind: str
    name: str = ""
    args: str = ""
    ret: Optional[int] = None
    err: Optional[str] = None
    ret_text: Optional[str] = None
    dur: Optional[float] = None
    status: Optional[int] = None       # exited: exit status
    signal: Optional[str] = None       # killed / signal: signal name
    core_dumped: bool = False
    si_pid: Optional[int] = None       # signal: sender pid when strace shows si_pid=
    time_of_day: bool = False          # ts came from -t/-tt: seconds since local midnight
    nr: Optional[int] = None           # strace -n: the syscall number printed before the name


FIELDS = tuple(StraceLine.__dataclass_fields__)   # the order of split_line's tuple


# A pid, tid or signal sender has at most 7 digits (PID_MAX_LIMIT 4194304); a longer number is
# not strace output (and int() refuses numbers of over 4,300 digits with ValueError).
_MAX_DIGITS = 10
_UNFINISHED = "<unfinished ...>"
# Printed when strace detaches (Ctrl-C) while a call of this thread is in flight: the entry half
# of a call that will never be resumed in this log; the thread is still inside it.
_DETACHED = "<detached ...>"

Fields = tuple   # (tid, ts, kind, name, args, ret, err, ret_text, dur, status, signal,
#                   core_dumped, si_pid, time_of_day, nr): StraceLine's fields in order

# The numbers of a line, as strace prints them and nothing else (csrc/lines.c checks the same
# shapes before it converts): ASCII digits, bounded lengths. float() and int() take far more
# ("1e5", "nan", " +1_0", "²"), and the two paths would each take a different part of it.
TS_TIME_OF_DAY, TS_SECONDS = 1, 2
RELATIVE_BELOW = 1e8      # s: a first TS_SECONDS time below it is a -r delta (-ttt: epoch, > 1973)
_TIME_OF_DAY = re.compile(r"[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,12})?")
_SECONDS = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,12})?")
_DURATION = re.compile(r"[0-9]{1,12}\.[0-9]{1,12}")
_RESULT = re.compile(r"-?[0-9]{1,20}|0x[0-9a-fA-F]{1,16}")
_SYSCALL_NAME = re.compile(r"[a-z_][a-z0-9_]{0,63}")
# The errors strace prints for a call a signal interrupted ("= ? ERESTARTSYS (To be
# restarted...)"): ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND, ERESTART_RESTARTBLOCK.
INTERRUPTED = "ERESTART"
_STACK_FRAME = " > "       # strace -k: " > /usr/lib/x86_64-linux-gnu/libc.so.6(poll+0x4f) [0xfc26f]"
_CTRL_C = "^C"            # the terminal's echo of Ctrl-C, glued to the line strace was writing
# what strace writes at Ctrl-C after that echo: its detach message, or with -d (strace 4) its
# debug line "cleanup: looking at pid N" before it
_CTRL_C_MESSAGES = ("Process ", "cleanup: looking at pid ")


def glued_message(text: str) -> int:
    """Where strace's own message begins inside a line it cut ("...SIGCHLDstrace: Process
    4024 attached", "...NULL^CProcess 3818 detached", "...^Ccleanup: looking at pid 7716": old
    strace at a terminal, -d's debug line), or -1.
    The message is ``strace: Process ...`` or, after the echo of Ctrl-C, ``Process ...``; the
    converter and the scan alike find it here."""
    k = text.find("strace: Process ")
    if k > 0:
        return k
    for message in _CTRL_C_MESSAGES:
        k = text.find(_CTRL_C + message)
        if k > 0:
            return k + 2
    return -1


def timestamp_shape(tok: str) -> int:
    """TS_TIME_OF_DAY (-t, -tt), TS_SECONDS (-ttt, -r) or 0: not a timestamp."""
    if _TIME_OF_DAY.fullmatch(tok):
        return TS_TIME_OF_DAY
    return TS_SECONDS if _SECONDS.fullmatch(tok) else 0


def is_duration(text: str, a: int, b: int) -> bool:
    """``text[a:b]`` is a -T duration ("0.000011")."""
    return _DURATION.fullmatch(text, a, b) is not None


def parse_result(tok: str) -> Optional[int]:
    """A result as strace prints it ("3", "-1", "0x7f3a2c000000"); None for anything else."""
    if _RESULT.fullmatch(tok) is None:
        return None
    return int(tok, 16) if tok[1:2] == "x" else int(tok)


def parse_line(text: str) -> Optional[StraceLine]:
    """Parse one line (a trailing newline is fine); None when it is not understood.
    Every common output shape is accepted: with or without a pid column (``1234 `` from ``-f -o``,
    ``[pid 1234] `` when strace writes to stderr, or none), with ``-t`` / ``-tt`` (time of day:
    ``ts`` is seconds since midnight and ``time_of_day`` is True so the converter can add a date),
    ``-ttt`` (epoch seconds) or no timestamp, with or without ``-T`` (``dur``), with or without
    ``-y`` / ``-yy`` fd decorations (kept verbatim in ``args``: decode.py reads them). ``strace
    -n`` syscall numbers (``[ 257] openat(...)``) are read into ``nr``; ``strace -k`` stack frames
    (`` > /lib/libc.so.6(poll+0x4f) [0xfc26f]``) are 'info' lines (no tid)."""
    t = split_line(text)
    return None if t is None else StraceLine(*t)


def py_split_line(text: str) -> Optional[Fields]:
    """The parse, in Python: StraceLine's fields as a tuple, or None.
    The parse works from both ends of the line instead of with one big regular expression: the head
    (pid, timestamp, syscall name) is split on spaces, the tail (``<dur>``, `` = result``) is found
    with ``rfind``; arguments are whatever lies between. That is both fast (1M lines in a few
    seconds) and robust against arguments that contain parentheses, quotes, ``=`` and ``<...>``."""
    s = text.rstrip("\r\n")
    if not s:
        return None
    if s.startswith(_STACK_FRAME):     # strace -k: a frame of the call or signal above
        return (None, None, "info", "", s[1:], None, None, None, None, None, None, False, None,
                False, None)
    tid: Optional[int] = None
    pos = 0
    c = s[0]
    if c == "[" and s.startswith("[pid "):
        # strace writing to stderr with -f: "[pid  1234] ..." (padded with spaces)
        end = s.find("]", 5)
        if end < 0 or end > 5 + _MAX_DIGITS:
            return None
        tid = parse_uint(s[5:end].strip(" "), _MAX_DIGITS)
        if tid is None:
            return None
        pos = end + 1
    elif "0" <= c <= "9":
        sp = s.find(" ")
        if sp < 0:
            return None
        tok = s[:sp]
        if is_digits(tok):         # a pid column; a timestamp has '.' or ':'
            if len(tok) > _MAX_DIGITS:
                return None
            tid = int(tok)
            pos = sp
    n = len(s)
    while pos < n and s[pos] == " ":
        pos += 1
    ts: Optional[float] = None
    tod = False
    if pos < n and "0" <= s[pos] <= "9":
        sp = s.find(" ", pos)
        if sp < 0:
            return None
        tok = s[pos:sp]
        shape = timestamp_shape(tok)
        if shape == TS_TIME_OF_DAY:     # -t "HH:MM:SS" or -tt "HH:MM:SS.ffffff"
            ts = int(tok[0:2]) * 3600 + int(tok[3:5]) * 60 + float(tok[6:])
            tod = True
        elif shape == TS_SECONDS:       # -ttt "1795950378.012864", -r "0.000123"
            ts = float(tok)
        else:
            return None
        if not 0.0 <= ts < 1e12:
            return None
        pos = sp + 1
        while pos < n and s[pos] == " ":
            pos += 1
    nr: Optional[int] = None
    if s.startswith("[", pos):
        # strace -n: "[ 257] openat(...)"; else a message like "[ Process PID=12 runs in ...]"
        end = s.find("] ", pos)
        nr = parse_uint(s[pos + 1:end].strip(" "), 6) if end > 0 else None
        if nr is None:
            return _parse_info(s[pos:], tid, ts, tod)
        pos = end + 2
    rest = s[pos:]
    if not rest:
        return None
    c = rest[0]
    if c == "<":
        # "<... futex resumed>) = 0 <0.1>"
        if not rest.startswith("<... "):
            return None
        e = rest.find(" resumed>", 5)
        if e < 0:
            return None
        return _parse_result(rest[e + 9:], tid, ts, tod, "resumed", rest[5:e], nr)
    if c == "+" or c == "-":
        return _parse_marker(rest, tid, ts, tod, nr)
    p = rest.find("(")
    if p <= 0:
        return _parse_info(rest, tid, ts, tod)
    name = rest[:p]
    if " " in name:
        return _parse_info(rest, tid, ts, tod)
    return _parse_result(rest[p + 1:], tid, ts, tod, "call", name, nr)


def _parse_result(body: str, tid: Optional[int], ts: Optional[float], tod: bool, kind: str,
                  name: str, nr: Optional[int]) -> Optional[Fields]:
    """``body`` is what follows ``name(`` (or ``resumed>``): ``args) = ret [extra] [<dur>]``."""
    if body[-4:] == "...>":
        if body.endswith(_UNFINISHED):
            args = body[:-16]
        elif body.endswith(_DETACHED):
            args = body[:-14]
        else:
            args = None
        if args is not None:
            # strace writes one separating space before "<unfinished ...>"
            if args.endswith(" "):
                args = args[:-1]
            # "<... poll resumed> <unfinished ...>" is resumed-then-cut; it always has "= ?"
            return (tid, ts, "unfinished", name, args, None, None, None, None, None, None,
                    False, None, tod, nr)
    dur: Optional[float] = None
    if body[-1:] == ">":
        i = body.rfind(" <")
        # else a decorated fd result like "= 3</etc/passwd>" without -T
        if i > 0 and is_duration(body, i + 2, len(body) - 1):
            dur = float(body[i + 2:-1])
            body = body[:i]
            if not dur < 1e9:
                return None
    eq = body.rfind(" = ")
    if eq < 0:
        return _cut_entry(body, tid, ts, tod, name, nr) if kind == "call" else None
    head = body[:eq].rstrip(" ")   # strace pads short calls to column 40: "brk(NULL)   = 0x.."
    if not head.endswith(")"):
        return None
    args = head[:-1]
    if kind == "resumed" and args == " " + _UNFINISHED:
        # "<... poll resumed> <unfinished ...>) = ?": the thread died inside the call
        args = ""
    retpart = body[eq + 3:]
    ret: Optional[int] = None
    err: Optional[str] = None
    ret_text: Optional[str] = None
    sp = retpart.find(" ")
    tok = retpart if sp < 0 else retpart[:sp]
    extra = "" if sp < 0 else retpart[sp + 1:]
    if tok != "?":
        lt = tok.find("<")
        if lt > 0:
            # "= 3</usr/lib/libm.so.6>" (a path may hold spaces: the decoration is the rest)
            ret_text = retpart[lt:]
            tok = tok[:lt]
            extra = ""
        ret = parse_result(tok)
        if ret is None:            # not a number strace prints (or longer than 64 bits)
            return None
    if extra:
        if extra[0] == "E":        # "-1 ENOENT (No such file ...)", "? ERESTARTSYS (...)"
            j = extra.find(" ")
            err = extra if j < 0 else extra[:j]
            if j > 0:
                ret_text = extra[j + 1:].strip("()")
        elif extra[0] == "(":      # "0 (Timeout)", "1 ([{fd=3, revents=POLLIN}])"
            ret_text = extra[1:-1] if extra[-1] == ")" else extra[1:]
            if ret == -1 and ret_text.startswith("errno "):   # errno strace cannot name
                err = ret_text
        else:
            ret_text = extra
    return (tid, ts, kind, name, args, ret, err, ret_text, dur, None, None, False, None, tod, nr)


def _cut_entry(body: str, tid: Optional[int], ts: Optional[float], tod: bool, name: str,
               nr: Optional[int]) -> Optional[Fields]:
    """A call's entry and nothing after it, or None: ``NAME(ARGS`` with no `` = `` result (the last
    line of a log whose strace was killed, or of a pasted ``strace -p`` session cut by Ctrl-C) is
    kind 'cut' when NAME is shaped like a syscall name and ARGS neither closes the call (``)``) nor
    holds strace's own message glued to it (``^CProcess N detached``: the converter splits those);
    anything else without a result is not understood, as before."""
    if body.endswith(_CTRL_C):
        body = body[:-2]
    if not _SYSCALL_NAME.fullmatch(name) or body.endswith(")") or body.endswith("...>") \
            or _CTRL_C in body or "Process " in body:
        return None
    return (tid, ts, "cut", name, body, None, None, None, None, None, None, False, None, tod, nr)


def _parse_marker(rest: str, tid: Optional[int], ts: Optional[float], tod: bool,
                  nr: Optional[int]) -> Optional[Fields]:
    """``+++ exited with 3 +++``, ``+++ killed by SIGKILL (core dumped) +++``, ``--- SIG.. ---``."""
    if rest.startswith("+++ ") and rest.endswith(" +++"):
        inner = rest[4:-4]
        if inner.startswith("exited with "):
            status = parse_c_int(inner[12:], 11)
            if status is None:
                return None
            return (tid, ts, "exited", "", "", None, None, None, None, status, None, False,
                    None, tod, nr)
        if inner.startswith("killed by "):
            sig = inner[10:]
            core = sig.endswith(" (core dumped)")
            if core:
                sig = sig[:-14]
            return (tid, ts, "killed", "", "", None, None, None, None, None, sig, core, None,
                    tod, nr)
        # "+++ superseded by execve in pid N +++": a non-leader thread exec'd and took over
        # the leader's pid; this tid is gone.
        return (tid, ts, "exited", "", "", None, None, inner, None, None, None, False, None,
                tod, nr)
    if rest.startswith("--- ") and rest.endswith(" ---"):
        inner = rest[4:-4]
        if not inner.startswith("SIG"):
            # "--- stopped by SIGSTOP ---" (group-stop notification)
            return (tid, ts, "info", "", inner, None, None, None, None, None, None, False, None,
                    tod, nr)
        sp = inner.find(" ")
        sig = inner if sp < 0 else inner[:sp]
        si_pid: Optional[int] = None
        k = inner.find("si_pid=")
        if k >= 0:
            e = k + 7
            while e < len(inner) and "0" <= inner[e] <= "9":
                e += 1
            if k + 7 < e <= k + 7 + _MAX_DIGITS:
                si_pid = int(inner[k + 7:e])
        return (tid, ts, "signal", "", inner[sp + 1:] if sp > 0 else "", None, None, None, None,
                None, sig, False, si_pid, tod, nr)
    return None


def _parse_info(rest: str, tid: Optional[int], ts: Optional[float],
                tod: bool) -> Optional[Fields]:
    """strace's own messages: ``strace: Process 12 attached``, ``... detached``, warnings."""
    msg = rest[8:] if rest.startswith("strace: ") else rest
    if msg.startswith("Process "):
        parts = msg.split()
        if len(parts) >= 3 and is_digits(parts[1]) and len(parts[1]) <= _MAX_DIGITS \
                and parts[2] in ("attached", "detached"):
            return (int(parts[1]), ts, parts[2], "", msg, None, None, None, None, None, None,
                    False, None, tod, None)
    if rest.startswith("strace: ") or rest.startswith("[ Process "):
        return (tid, ts, "info", "", msg, None, None, None, None, None, None, False, None, tod,
                None)
    return None


def _pick() -> "Callable[[str], Optional[Fields]]":
    from .fastpath import compiled
    fast = compiled()
    if fast is None:
        return py_split_line
    fast.set_fallback("split_line", py_split_line)   # for the lines C leaves
    return fast.split_line


split_line = _pick()
