"""The kernel stack of a sleeping thread: /proc/PID/task/TID/stack, read and parsed.

Contract:
- ``parse_stack(text)`` is pure: the file's lines ("[<0>] futex_wait_queue+0x60/0x90") ->
  frames "futex_wait_queue+0x60/0x90", innermost first. Lines it does not recognise are kept
  as they are, stripped.
- ``read_stack(pid, tid, root)`` -> (frames, error): error is one line saying why there are
  no frames.
- ``frame_function(frame)`` is "futex_wait_queue" for "futex_wait_queue+0x60/0x90".
Reading the file never stops or signals the thread: the kernel walks its saved stack.
"""
from __future__ import annotations

import errno
import os
import re
from typing import List, Tuple

__all__ = ["parse_stack", "read_stack", "frame_function", "MAX_FRAMES", "NOT_ROOT"]

MAX_FRAMES = 64            # the kernel itself stops at 64 entries (MAX_STACK_TRACE_DEPTH)
_LINE = re.compile(r"^\s*\[<(?P<addr>[0-9a-fA-F]+)>\]\s*(?P<sym>\S.*?)\s*$")
_SYMBOL = re.compile(r"^[A-Za-z_.$][\w.$]*(\+0x[0-9a-f]+/0x[0-9a-f]+)?( \[[\w-]+\])?$")
NOT_ROOT = ("reading kernel stacks needs root (CAP_SYS_ADMIN): /proc/PID/task/TID/stack is "
            "mode 0400")


def parse_stack(text: str) -> List[str]:
    """Frames of one /proc/PID/task/TID/stack content (module doc).
    The address in brackets is hidden as 0 unless kptr_restrict allows it."""
    out: List[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        m = _LINE.match(line)
        out.append(m.group("sym") if m else line)
        if len(out) >= MAX_FRAMES:
            break
    return out


def frame_function(frame: str) -> str:
    """The function name of a kernel frame ("uvm_va_block_make_resident+0x1a/0x2b0 [nvidia_uvm]"
    -> "uvm_va_block_make_resident")."""
    return frame.split("+", 1)[0].split(" ", 1)[0]


def _named(frames: List[str]) -> bool:
    return any(_SYMBOL.match(f) for f in frames)


def read_stack(pid: int, tid: int, root: str = "/proc") -> Tuple[List[str], str]:
    """(frames, "") or ([], why) for one thread (module doc).
    Why no frames: not root (the file is mode 0400 and needs CAP_SYS_ADMIN on the target), a kernel
    without it (CONFIG_STACKTRACE off), the thread gone, an empty answer (a running thread has no
    saved stack; some kernels hide it), or addresses without symbol names."""
    path = f"{root}/{pid}/task/{tid}/stack"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        return [], _why_not(e, pid, tid, root)
    try:
        data = os.read(fd, 1 << 16)
    except OSError as e:
        return [], _why_not(e, pid, tid, root)
    finally:
        os.close(fd)
    frames = parse_stack(data.decode("ascii", "replace"))
    if not frames:
        return [], ("the kernel gave an empty stack (the thread was running when it was read, "
                    "or the kernel hides stacks)")
    if not _named(frames):
        return frames, "the kernel shows addresses without symbol names (kallsyms hidden)"
    return frames, ""


def _why_not(e: OSError, pid: int, tid: int, root: str) -> str:
    if e.errno in (errno.EACCES, errno.EPERM):
        return NOT_ROOT
    if e.errno in (errno.ENOENT, errno.ESRCH):
        if os.path.isdir(f"{root}/{pid}/task/{tid}"):
            return "this kernel has no /proc/PID/task/TID/stack (built without CONFIG_STACKTRACE)"
        return "the thread exited before its kernel stack was read"
    return f"/proc/{pid}/task/{tid}/stack: {os.strerror(e.errno or 0)}"

