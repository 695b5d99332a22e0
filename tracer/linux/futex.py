"""futex(2) operations: the one decoder of op words and strace's op text.

Contract (pure, never raises):
- ``decode_op(word)`` -> ``FutexOp`` for the raw op argument (a register read from /proc, a BPF
  record): the command without FUTEX_PRIVATE_FLAG / FUTEX_CLOCK_REALTIME, and those flags.
- ``parse_op_text(text)`` -> ``FutexOp`` for strace's rendering: symbolic, raw (-X raw) or
  verbose.
- ``FutexOp.is_wait`` / ``is_wake``: whether a thread sleeps in it / wakes others with it;
  ``timeout_is_absolute``: for the waits that take a timeout, whether the kernel reads an
  absolute deadline (every one but FUTEX_WAIT, whose timeout is relative: futex(2)).
Kernel facts (include/uapi/linux/futex.h): commands 0..13 below; FUTEX_PRIVATE_FLAG 128,
FUTEX_CLOCK_REALTIME 256; the command is ``op & 127``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .intparse import parse_c_int

__all__ = ["FutexOp", "decode_op", "parse_op_text", "COMMANDS", "WAIT_COMMANDS",
           "WAKE_COMMANDS", "PRIVATE_FLAG", "CLOCK_REALTIME"]

COMMANDS = ("WAIT", "WAKE", "FD", "REQUEUE", "CMP_REQUEUE", "WAKE_OP", "LOCK_PI", "UNLOCK_PI",
            "TRYLOCK_PI", "WAIT_BITSET", "WAKE_BITSET", "WAIT_REQUEUE_PI", "CMP_REQUEUE_PI",
            "LOCK_PI2")
PRIVATE_FLAG = 128
CLOCK_REALTIME = 256
CMD_MASK = 127
# Commands a thread sleeps in; each takes a timeout (argument 4, a struct timespec pointer).
WAIT_COMMANDS = frozenset({"WAIT", "WAIT_BITSET", "LOCK_PI", "LOCK_PI2", "WAIT_REQUEUE_PI"})
# Commands that wake (or hand a lock to) waiters.
WAKE_COMMANDS = frozenset({"WAKE", "WAKE_BITSET", "WAKE_OP", "UNLOCK_PI", "REQUEUE",
                           "CMP_REQUEUE", "CMP_REQUEUE_PI"})
PI_COMMANDS = frozenset({"LOCK_PI", "LOCK_PI2"})


@dataclass(frozen=True)
class FutexOp:
    name: str              # "WAIT_BITSET"; "OP_<n>" for a command this table lacks
    private: bool = False
    realtime: bool = False

    @property
    def is_wait(self) -> bool:
        return self.name in WAIT_COMMANDS

    @property
    def is_wake(self) -> bool:
        return self.name in WAKE_COMMANDS

    @property
    def is_pi(self) -> bool:
        return self.name in PI_COMMANDS

    @property
    def timeout_is_absolute(self) -> bool:
        return self.is_wait and self.name != "WAIT"


@lru_cache(maxsize=256)
def decode_op(word: int) -> FutexOp:
    """The op argument's value (module doc)."""
    cmd = word & CMD_MASK
    name = COMMANDS[cmd] if cmd < len(COMMANDS) else f"OP_{cmd}"
    return FutexOp(name, bool(word & PRIVATE_FLAG), bool(word & CLOCK_REALTIME))


def parse_op_text(text: str) -> FutexOp:
    """strace's op text (module doc); an unreadable text gives the op named as printed (its
    first 120 characters: no op text is longer, and a cut line could make it a megabyte).
    Renderings: symbolic ("FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME"), raw (-X raw: "0x89")
    or verbose ("0x89 /* FUTEX_WAIT_BITSET_PRIVATE */")."""
    return _parse_op_text(text[:120])


@lru_cache(maxsize=1024)
def _parse_op_text(text: str) -> FutexOp:
    k = text.find("/* ")
    if k >= 0:
        text = text[k + 3:text.rfind(" */")]
    text = text.strip()
    word = parse_c_int(text)            # a raw op word: -X raw, or one strace cannot name
    if word is not None and word >= 0:
        return decode_op(word)
    parts = text.split("|")
    base = parts[0]
    private = base.endswith("_PRIVATE")
    if private:
        base = base[:-8]
    if base.startswith("FUTEX_"):
        base = base[6:]
    return FutexOp(base, private, "FUTEX_CLOCK_REALTIME" in parts[1:])
