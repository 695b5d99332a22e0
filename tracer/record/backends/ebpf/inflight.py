"""The calls the target's threads are blocked in when an eBPF recording stops.

The program sees calls at their exit only, so a call still in progress is read from
/proc/PID/task/TID/syscall and decoded by tracer/linux/blocking.py; what the registers only
point to is read from the target's memory (``read_mem``; what is read: ``ongoing_call``).

Contract: ``ongoing_call(conv, pid, tid, text, kinds, ts, dur, mem)`` -> an events/__init__.py
syscall object with ``ongoing=True`` (ret None) for a /proc syscall line of a thread in a
system call, or None (running, blocked outside a call, unparsable). ``mem(pid, addr, size)``
returns bytes or None; ``read_mem`` is the real one.
"""
from __future__ import annotations

import os
import struct
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .... import events as ev
from ....linux.blocking import decode_blocking
from ....linux.futex import decode_op
from ....linux.syscall_table import CurrentSyscall, parse_proc_syscall
from . import layout as L
from .convert import Converter

__all__ = ["ongoing_call", "read_mem", "MemReader"]

MemReader = Callable[[int, int, int], Optional[bytes]]


def read_mem(pid: int, addr: int, size: int) -> Optional[bytes]:
    """``size`` bytes of process ``pid`` at ``addr``, or None (gone, unmapped, no access)."""
    if addr <= 0 or size <= 0:
        return None
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.pread(fd, size, addr)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) == size else None


def _timespec(mem: MemReader, pid: int, addr: int, frac_ns: int = 1) -> Optional[int]:
    data = mem(pid, addr, 16)
    if data is None:
        return None
    sec, frac = struct.unpack("<qq", data)
    if sec < 0 or frac < 0:
        return None
    return sec * 1_000_000_000 + frac * frac_ns


def _pointer_timeout(kind: int, a: Sequence[int]) -> Tuple[int, int, bool]:
    """(pointer, ns per fraction unit, absolute) of the calls that take their timeout by
    pointer; pointer 0 when the call has none."""
    if kind == L.HT_K_FUTEX:
        op = decode_op(a[1])
        return (a[3], 1, op.timeout_is_absolute) if op.is_wait else (0, 1, False)
    if kind == L.HT_K_PPOLL:
        return a[2], 1, False
    if kind == L.HT_K_EPOLL2:
        return a[3], 1, False
    if kind == L.HT_K_SELECT:
        return a[4], 1000, False
    if kind == L.HT_K_PSELECT:
        return a[4], 1, False
    if kind == L.HT_K_NANOSLEEP:
        return a[0], 1, False
    if kind == L.HT_K_CLOCK_NANOSLEEP:
        return a[2], 1, bool(a[1] & 1)
    return 0, 1, False


def _limits(kind: int, cs: CurrentSyscall, mem: MemReader, pid: int) -> Tuple[int, int]:
    """(flags, aux) as the kernel program sets them for a streamed call (ebpf_layout.HT_F_*)."""
    blocked = decode_blocking(cs)
    a = tuple(cs.args) + (0,) * (6 - len(cs.args))
    ptr, frac, absolute = _pointer_timeout(kind, a)
    if ptr:
        if absolute:
            return L.HT_F_TIMEOUT_ABS, 0
        ns = _timespec(mem, pid, ptr, frac)
        if ns is None:
            return L.HT_F_TIMEOUT | L.HT_F_UNREADABLE, 0
        return L.HT_F_TIMEOUT, ns
    if blocked is None or blocked.has_timeout is None:
        return 0, 0
    if blocked.has_timeout is False:
        return L.HT_F_NO_TIMEOUT, 0
    if blocked.timeout is not None:
        return L.HT_F_TIMEOUT, int(round(blocked.timeout * 1e9))
    return L.HT_F_TIMEOUT | L.HT_F_UNREADABLE, 0


def _poll_fds(a: Sequence[int], mem: MemReader, pid: int) -> List[int]:
    n = min(int(a[1]), L.HT_MAX_PFDS)
    data = mem(pid, a[0], 8 * n) if n > 0 else None
    fds = [-1] * L.HT_MAX_PFDS
    if data is not None:
        for i in range(n):
            fds[i] = struct.unpack_from("<i", data, 8 * i)[0]
    return fds


def _nvidia_aux(a: Sequence[int], mem: MemReader, pid: int) -> Optional[int]:
    """The RM_CONTROL cmd / RM_ALLOC class of an NVIDIA escape ioctl (see the BPF program)."""
    req = a[1] & 0xFFFFFFFF
    size, nr = (req >> 16) & 0x3FFF, req & 0xFF
    if (req >> 8) & 0xFF != L.HT_NV_IOC_TYPE or not a[2]:
        return None
    if nr == L.HT_NV_RM_CONTROL and size == 32:
        off = 8
    elif nr == L.HT_NV_RM_ALLOC and size in (32, 48):
        off = 12
    else:
        return None
    data = mem(pid, a[2] + off, 4)
    return struct.unpack("<I", data)[0] if data is not None else None


def ongoing_call(conv: Converter, pid: int, tid: int, text: str, kinds: Dict[int, int],
                 ts: float, dur: float, mem: MemReader = read_mem) -> Optional[ev.Syscall]:
    """The call a /proc syscall line shows, as an ongoing event (module doc).
    /proc/PID/task/TID/syscall gives the number and the six argument registers. What the registers
    only point to is read from the target's memory (/proc/PID/mem, as root): the struct
    timespec/timeval of a timed wait (before the call returns the kernel has not written the time
    left back into it, so it is the timeout the call was given), the first pollfd fds, an NVIDIA
    RM_CONTROL cmd / RM_ALLOC class. Nothing else of the target's memory is read."""
    cs = parse_proc_syscall(text)
    if cs is None or cs.kind != "syscall" or cs.nr is None or cs.name is None:
        return None
    kind = kinds.get(cs.nr, L.HT_K_NONE)
    if kind > L.HT_K_READ:
        kind = L.HT_K_NONE            # clone/fork in progress: nothing to decode
    a = list(cs.args) + [0] * (6 - len(cs.args))
    flags, aux = _limits(kind, cs, mem, pid)
    pfds: List[int] = []
    if kind in (L.HT_K_POLL, L.HT_K_PPOLL):
        pfds = _poll_fds(a, mem, pid)
        flags |= L.HT_F_PFDS
    elif kind == L.HT_K_IOCTL:
        v = _nvidia_aux(a, mem, pid)
        if v is not None:
            flags, aux = flags | L.HT_F_AUX, v
    return conv.syscall(ts=ts, pid=pid, tid=tid, name=cs.name, kind=kind, args=a, ret=None,
                        dur=max(0.0, dur), flags=flags, aux=aux, pfds=pfds)
