"""strace -k stack lines: the native stack of the call each thread is held in at the log's end.

Contract: ``KStacks`` follows the lines the converter feeds:
- ``line(tid, kind)`` for every line of a thread (call, entry, resumed half, signal, exit;
  ``line(None, "")`` for lines made into events elsewhere, batch.py's compiled path): the
  frames that come next are that line's (strace -k prints a call's stack after its line,
  without a pid column); a signal's or an exit's frames belong to no call and are dropped;
- ``frame(text)`` for each `` > LIB(FUNC+OFF) [ADDR]`` line (lines.py: kind 'info', args from
  ``>``), at most ``MAX_FRAMES`` a stack;
- ``native_stacks(cut_calls, tid_pid, ts)``: a ``NativeStack`` (source "strace -k") for every
  thread whose last call the log ends in (convert.py ``cut_calls``) and whose frames followed
  that call's own line (an interrupted call: its resumed half and its frames, then the
  signal). Frames are "FUNC (LIB)" (the library's base name), "ADDR (LIB)" where strace named
  no function; ``libs`` the library's path, as the stack probes write them
  (vocab/stack_facts.py reads them alike).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..events.stacks import NativeStack

__all__ = ["KStacks", "parse_frame", "MAX_FRAMES"]

MAX_FRAMES = 64
_CALL_KINDS = frozenset({"call", "unfinished", "cut", "resumed"})


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
    """The frames after each thread's last line (module doc)."""

    def __init__(self) -> None:
        self._tid: Optional[int] = None          # whose line the next frames follow
        self._stacks: Dict[int, List[Tuple[str, str]]] = {}

    def line(self, tid: Optional[int], kind: str) -> None:
        if kind in _CALL_KINDS:
            if self._stacks:
                self._stacks.pop(tid, None)      # (a call's frames replace the one before)
            self._tid = tid
        else:
            self._tid = None

    def frame(self, text: str) -> None:
        if self._tid is None:
            return
        stack = self._stacks.setdefault(self._tid, [])
        if len(stack) < MAX_FRAMES:
            f = parse_frame(text)
            if f is not None:
                stack.append(f)

    def native_stacks(self, cut_calls: List[Tuple[int, str, str]], tid_pid: Dict[int, int],
                      ts: float) -> List[NativeStack]:
        out = []
        for tid, _, _ in cut_calls:
            stack = self._stacks.get(tid)
            if stack:
                out.append(NativeStack(ts, tid_pid.get(tid, tid), tid,
                                       [f for f, _ in stack], [lib for _, lib in stack],
                                       "strace -k"))
        return out
