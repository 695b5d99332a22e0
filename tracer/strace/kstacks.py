"""strace -k stack lines: the native stack of the call each thread is held in at the log's end.

Contract: ``KStacks`` keeps the frames that follow each thread's lines:
- ``frame(text, line)`` for each `` > LIB(FUNC+OFF) [ADDR]`` line (lines.py: kind 'info', args
  from ``>``): frames after a call's line are that call's, at most ``MAX_FRAMES``; after an
  exit's or a signal's they are dropped, but a fault's (``signal(...)``, a signal line's event:
  SIGSEGV... raised by the thread's own instruction) keeps them: where it faulted;
- ``native_stacks(cut_calls, tid_pid, ts, entered)``: a ``NativeStack`` (source "strace -k")
  for every thread whose last call the log ends in (convert.py ``cut_calls``) with the frames
  of that call's line, else its last fault's (source "strace -k, at SIGSEGV"). Frames are
  "FUNC (LIB)", "ADDR (LIB)" where strace named no function; ``libs`` the library's path.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from ..events import SignalDelivered
from ..events.stacks import NativeStack

__all__ = ["KStacks", "parse_frame", "MAX_FRAMES"]

MAX_FRAMES = 64
_CALL_KINDS = frozenset({"call", "unfinished", "cut", "resumed"})
_SI_CODE = re.compile(r"\bsi_code=([A-Z][A-Z0-9_]*)")


def parse_frame(text: str) -> Optional[Tuple[str, str]]:
    """``> /lib/x86_64-linux-gnu/libc.so.6(__lll_lock_wait+0x2d) [0x8f0ad]`` ->
    ("__lll_lock_wait (libc.so.6)", "/lib/x86_64-linux-gnu/libc.so.6"); None for a line
    that is no frame (strace's "unexpected_backtracing_error" too)."""
    body = text[1:].strip() if text.startswith(">") else ""
    k, b = body.rfind("("), body.rfind(" [")
    if k <= 0 or b < k or not body.endswith("]"):
        return None
    lib, inner, addr = body[:k], body[k + 1:body.rfind(")", k, b + 1)], body[b + 2:-1]
    func = inner.split("+", 1)[0]
    base = lib.rsplit("/", 1)[-1]
    return f"{func or addr} ({base})", lib


class KStacks:
    """The frames after each thread's call lines (module doc). ``frame``'s ``line`` is the
    converter's last line before it as (tid, kind, its line number), or None (a line made into an
    event elsewhere: batch.py's compiled path); a call's line is its call, entry or resumed half.
    ``native_stacks``'s ``entered`` is tid -> the line number its last call began at; an
    interrupted call: its resumed half and its frames, then the signal's copy, dropped."""

    def __init__(self) -> None:
        self._stacks: Dict[int, Tuple[int, List[Tuple[str, str]]]] = {}   # tid -> (line, frames)
        self._faults: Dict[int, Tuple[int, List[Tuple[str, str]], str]] = {}  # ... and signal

    def signal(self, ts: float, pid: int, tid: int, sig: Optional[str], si_pid: Optional[int],
               args: str, line: int) -> SignalDelivered:
        """The event of signal line ``line`` (``args``: its siginfo text); after a fault's,
        the frames below are where the thread faulted."""
        m = _SI_CODE.search(args)
        e = SignalDelivered(ts, pid, tid, sig or "", si_pid, m.group(1) if m else "")
        if e.is_fault:
            self._faults[tid] = (line, [], e.signal)
        return e

    def frame(self, text: str, line: Optional[Tuple[int, str, int]]) -> None:
        if line is None:
            return
        tid, kind, at = line
        fault = self._faults.get(tid)
        if kind == "signal" and fault is not None and fault[0] == at:
            frames = fault[1]
        elif kind in _CALL_KINDS:
            stack = self._stacks.get(tid)
            if stack is None or stack[0] != at:
                stack = self._stacks[tid] = (at, [])
            frames = stack[1]
        else:
            return
        if len(frames) < MAX_FRAMES:
            f = parse_frame(text)
            if f is not None:
                frames.append(f)

    def native_stacks(self, cut_calls: List[Tuple[int, str, str]], tid_pid: Dict[int, int],
                      ts: float, entered: Dict[int, int]) -> List[NativeStack]:
        out = []
        for tid, _, _ in cut_calls:
            stack = self._stacks.get(tid)
            source = "strace -k"
            if not (stack and stack[1] and stack[0] == entered.get(tid)):
                fault = self._faults.get(tid)
                if fault is None or not fault[1] or fault[0] > entered.get(tid, -1):
                    continue
                stack, source = (fault[0], fault[1]), f"strace -k, at {fault[2]}"
            out.append(NativeStack(ts, tid_pid.get(tid, tid), tid, [f for f, _ in stack[1]],
                                   [lib for _, lib in stack[1]], source))
        return out
