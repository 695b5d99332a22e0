"""Turn one strace syscall (name, argument text, result) into a typed events/__init__.py object.

Contract (pure functions, no state besides bounded memo caches):
- fd decorations and argument splitting live in args.py (re-exported here).
- ``to_event(pid, tid, name, args, ret, err, dur, ts, ongoing)`` returns a FutexCall, PollCall,
  IoctlCall, WriteCall, ReadCall, WaitChild or plain Syscall. ``args`` is the raw argument text;
  the stored ``args`` always goes through ``events.scrub_args`` (no buffer contents).
- Unusual text never raises: a field that cannot be read is left at its "unknown" value.
"""
from __future__ import annotations

import re
from typing import Callable, Dict, List, Optional, Tuple

from .. import events as ev
from ..linux.futex import FutexOp, parse_op_text
from ..linux.intparse import parse_c_int, parse_uint

__all__ = ["parse_fd", "classify_target", "to_event", "split_args", "first_arg",
           "parse_timespec", "ioctl_request", "futex_op", "nv_request_name"]

from .args import (FdInfo3, _Memo, _parse_fd_cached, classify_target, decoration_end, first_arg,
                   memo as _memo, parse_fd, split_args)


def parse_timespec(text: str) -> Optional[float]:
    """``{tv_sec=1, tv_nsec=500}`` / ``{tv_sec=0, tv_usec=10}`` -> seconds; NULL/other -> None."""
    if not text.startswith("{tv_sec="):
        return None
    c = text.find(",", 8)
    sec = parse_c_int(text[8:c].strip(" "), 20)
    if sec is None:
        return None
    k = text.find("_nsec=", c)
    scale = 1e-9
    if k < 0:
        k = text.find("_usec=", c)
        scale = 1e-6
    if k < 0:
        return float(sec)
    e = k + 6
    while e < len(text) and "0" <= text[e] <= "9":
        e += 1
    frac = parse_uint(text[k + 6:e], 20)
    return sec + (frac or 0) * scale


def _to_int(text: str) -> Optional[int]:
    """An integer as strace prints it (linux/intparse.py parse_c_int: ASCII, at most 24
    characters: hex has no digit limit in int(), a corrupt line could make a number too large
    to print back); None for anything else."""
    return parse_c_int(text)


# --------------------------------------------------------------------------- futex
def futex_op(text: str) -> Tuple[str, bool]:
    """``FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME`` -> ("WAIT_BITSET", True) (also -X raw
    and -X verbose forms: linux/futex.py)."""
    op = parse_op_text(text)
    return op.name, op.private


def _futex(ts: float, pid: int, tid: int, name: str, args: str, sargs: str, ret: Optional[int],
           err: Optional[str], dur: Optional[float], ongoing: bool) -> ev.Syscall:
    parts = args.split(", ", 3)
    addr = _to_int(parts[0]) or 0 if parts else 0
    op = parse_op_text(parts[1]) if len(parts) > 1 else _NO_OP
    val = _to_int(parts[2]) if len(parts) > 2 else None
    timeout: Optional[float] = None
    if len(parts) > 3 and op.is_wait and parts[3][:1] == "{":
        timeout = -1.0 if op.timeout_is_absolute else parse_timespec(parts[3])
    return ev.FutexCall(ts, pid, tid, name, sargs, ret, err, dur, None, None, None, ongoing,
                        op.name, addr, val, timeout, op.private)


_NO_OP = FutexOp("")


# --------------------------------------------------------------------------- poll family
def _poll_kinds(array: str) -> Tuple[int, Tuple[str, ...]]:
    """``[{fd=16<anon_inode:[eventfd]>, events=POLLIN}, ...]`` -> (count, unique kinds)."""
    kinds: List[str] = []
    count = 0
    i = array.find("{fd=")
    while i >= 0:
        count += 1
        e = array.find(", events=", i)
        if e < 0:
            break
        kind = _parse_fd_cached(array[i + 4:e])[1]  # type: ignore[index]
        if kind is not None and kind not in kinds:
            kinds.append(kind)
        i = array.find("{fd=", e)
    return count, tuple(kinds)


def _set_kinds(fdset: str) -> Tuple[int, List[str]]:
    """A select fd set ``[3<pipe:[5710]> 4]`` -> (count, kinds)."""
    inner = fdset[1:-1] if fdset.startswith("[") else ""
    if not inner:
        return 0, []
    items = re.split(r"(?<=>) (?=\d)", inner) if "<" in inner else inner.split()
    kinds = [k for k in (_parse_fd_cached(x)[1] for x in items) if k]  # type: ignore[index]
    return len(items), kinds


@_memo
def _poll_args(key: str) -> Tuple[Optional[float], Optional[int], Tuple[str, ...]]:
    """(timeout, nfds, kinds) from "NAME\\0args": one parse per distinct argument text."""
    name, args = key.split("\0", 1)
    parts = split_args(args, 5)          # the timeout is the fifth at most
    timeout: Optional[float] = None
    nfds: Optional[int] = None
    kinds: Tuple[str, ...] = ()
    if name == "poll" or name == "ppoll":
        if parts:
            nfds, kinds = _poll_kinds(parts[0])
        if len(parts) > 2:
            if name == "poll":
                ms = _to_int(parts[2])
                timeout = None if ms is None or ms < 0 else ms / 1000.0
            else:
                timeout = parse_timespec(parts[2])
    elif name in ("select", "pselect6", "_newselect"):
        found: List[str] = []
        count = 0
        for fdset in parts[1:4]:
            c, k = _set_kinds(fdset)
            count += c
            found.extend(x for x in k if x not in found)
        nfds, kinds = count, tuple(found)
        if len(parts) > 4:
            timeout = parse_timespec(parts[4])
    else:  # epoll_wait(epfd, events, maxevents, timeout_ms), epoll_pwait(+sigmask), _pwait2(ts)
        if len(parts) > 3:
            if name == "epoll_pwait2":
                timeout = parse_timespec(parts[3])
            else:
                ms = _to_int(parts[3])
                timeout = None if ms is None or ms < 0 else ms / 1000.0
    return timeout, nfds, kinds


def _poll(ts: float, pid: int, tid: int, name: str, args: str, sargs: str, ret: Optional[int],
          err: Optional[str], dur: Optional[float], ongoing: bool) -> ev.Syscall:
    timeout, nfds, kinds = _poll_args(name + "\0" + args)  # type: ignore[misc]
    fd = kind = target = None
    if name.startswith("epoll"):
        fd, kind, target = _parse_fd_cached(first_arg(args))  # type: ignore[misc]
    return ev.PollCall(ts, pid, tid, name, sargs, ret, err, dur, fd, kind, target, ongoing,
                       timeout, nfds, kinds, ret == 0)


# --------------------------------------------------------------------------- ioctl
# Requests strace prints by name on x86_64 that matter for us (terminal/socket ioctls).
_IOCTL_NAMES = {"TCGETS": 0x5401, "TCSETS": 0x5402, "TCSETSW": 0x5403, "TCSETSF": 0x5404,
                "TIOCGPGRP": 0x540F, "TIOCSPGRP": 0x5410, "TIOCGWINSZ": 0x5413,
                "TIOCSWINSZ": 0x5414, "FIONREAD": 0x541B, "FIONBIO": 0x5421,
                "FIONCLEX": 0x5450, "FIOCLEX": 0x5451, "FIOASYNC": 0x5452}
_IOC_DIRS = {"_IOC_NONE": 0, "_IOC_WRITE": 1, "_IOC_READ": 2}


@_memo
def ioctl_request(text: str) -> Tuple[int, Optional[str]]:
    """``_IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2a, 0x20)`` -> (0xc020462a, None); TCGETS -> named."""
    if text.startswith("_IOC("):
        inner = text[5:text.find(")")].split(", ")
        if len(inner) == 4:
            direction = 0
            for d in inner[0].split("|"):
                direction |= _IOC_DIRS.get(d.strip(), 0)
            typ, nr, size = (_to_int(x) or 0 for x in inner[1:])
            return (direction << 30) | (size << 16) | (typ << 8) | nr, None
        return 0, None
    k = text.find(" /* ")         # -X verbose: "0x5401 /* TCGETS */"
    if k > 0:
        return _to_int(text[:k]) or 0, text[k + 4:text.rfind(" */")]
    num = _to_int(text)
    if num is not None:
        return num, None
    return _IOCTL_NAMES.get(text, 0), text


_NV_NAMES: Dict[Tuple[str, int, Optional[str]], Optional[str]] = {}


def _nv_name(kind: str, request: int, name: Optional[str]) -> Optional[str]:
    """NVIDIA request names, memoised: a GPU process repeats a handful of requests."""
    key = (kind, request, name)
    hit = _NV_NAMES.get(key, _NV_NAMES)
    if hit is not _NV_NAMES:
        return hit  # type: ignore[return-value]
    from ..gpu.nvidia import nv_request_name
    if len(_NV_NAMES) > 4096:
        _NV_NAMES.clear()
    value = _NV_NAMES[key] = nv_request_name(kind, request, name)
    return value


nv_request_name = _nv_name


def _ioctl(ts: float, pid: int, tid: int, name: str, args: str, sargs: str, ret: Optional[int],
           err: Optional[str], dur: Optional[float], ongoing: bool) -> ev.Syscall:
    first = first_arg(args)
    fd, kind, target = _parse_fd_cached(first)  # type: ignore[misc]
    rest = args[len(first) + 2:]
    req_text = rest[:rest.find(")") + 1] if rest.startswith("_IOC(") else rest.split(", ", 1)[0]
    request, request_name = ioctl_request(req_text)  # type: ignore[misc]
    if kind in ("nvidiactl", "nvidia", "nvidia-uvm"):   # RM_CONTROL, UVM_REGISTER_CHANNEL...
        request_name = _nv_name(kind, request, request_name)
    return ev.IoctlCall(ts, pid, tid, name, sargs, ret, err, dur, fd, kind, target, ongoing,
                        request, request_name)


# --------------------------------------------------------------------------- read/write/wait
WRITE_CALLS = frozenset({"write", "writev", "pwrite64", "pwritev", "pwritev2", "send", "sendto",
                         "sendmsg", "sendmmsg", "sendfile", "sendfile64"})
READ_CALLS = frozenset({"read", "readv", "pread64", "preadv", "preadv2", "recv", "recvfrom",
                        "recvmsg", "recvmmsg", "accept", "accept4"})
POLL_CALLS = frozenset({"poll", "ppoll", "select", "_newselect", "pselect6", "epoll_wait",
                        "epoll_pwait", "epoll_pwait2"})
# Calls whose first argument is an fd (so a plain "3" without -y decoration is still an fd).
FD_FIRST = WRITE_CALLS | READ_CALLS | frozenset({
    "close", "fstat", "fstatfs", "lseek", "_llseek", "fcntl", "fsync", "fdatasync", "ftruncate",
    "fchmod", "fchown", "flock", "getdents", "getdents64", "bind", "listen", "connect",
    "shutdown", "getsockname", "getpeername", "setsockopt", "getsockopt", "epoll_ctl", "dup",
    "dup2", "dup3", "fchdir", "fadvise64", "fallocate", "splice", "tee", "syncfs",
    "timerfd_settime", "timerfd_gettime", "ioctl", "epoll_wait", "epoll_pwait", "epoll_pwait2"})
_DIR_CALLS = frozenset({"getdents", "getdents64", "fchdir"})


def _rw(ts: float, pid: int, tid: int, name: str, args: str, sargs: str, ret: Optional[int],
        err: Optional[str], dur: Optional[float], ongoing: bool) -> ev.Syscall:
    fd, kind, target = _parse_fd_cached(first_arg(args))  # type: ignore[misc]
    if name[0] == "a":            # accept/accept4: the result is a new fd, not a byte count
        nbytes = 0
    else:
        nbytes = ret if ret is not None and ret > 0 else 0
    cls = ev.WriteCall if name in WRITE_CALLS else ev.ReadCall
    return cls(ts, pid, tid, name, sargs, ret, err, dur, fd, kind, target, ongoing, nbytes)


def _wait(ts: float, pid: int, tid: int, name: str, args: str, sargs: str, ret: Optional[int],
          err: Optional[str], dur: Optional[float], ongoing: bool) -> ev.Syscall:
    parts = args.split(", ", 2)
    child: Optional[int]
    if name == "waitid":          # waitid(P_PID, 123, ...) / waitid(P_ALL, 0, ...)
        child = _to_int(parts[1]) if len(parts) > 1 and parts[0] == "P_PID" else -1
    else:
        child = _to_int(parts[0]) if parts else -1
    return ev.WaitChild(ts, pid, tid, name, sargs, ret, err, dur, None, None, None, ongoing,
                        -1 if child is None else child)


_BUILDERS: Dict[str, Callable[..., ev.Syscall]] = {"futex": _futex, "ioctl": _ioctl,
                                                   "wait4": _wait, "waitpid": _wait,
                                                   "waitid": _wait}
_BUILDERS.update({n: _poll for n in POLL_CALLS})
_BUILDERS.update({n: _rw for n in WRITE_CALLS | READ_CALLS})
BUILDERS = _BUILDERS                      # name -> builder of its typed event (not Syscall)
NV_NAMES = _NV_NAMES                      # the memo of NVIDIA request names
DIR_CALLS = _DIR_CALLS

def _pick_scrub() -> Callable[[str], str]:
    """events.scrub_args, or its compiled twin (strace/fastpath.py)."""
    from .fastpath import compiled
    fast = compiled()
    if fast is None:
        return ev.scrub_args
    fast.set_fallback("scrub", ev.scrub_args)
    return fast.scrub


_scrub = _pick_scrub()


def to_event(pid: int, tid: int, name: str, args: str, ret: Optional[int], err: Optional[str],
             dur: Optional[float], ts: float, ongoing: bool = False) -> ev.Syscall:
    """The events/__init__.py object for one syscall; ``args`` is raw strace text (scrubbed here)."""
    sargs = _scrub(args) if '"' in args else args
    builder = _BUILDERS.get(name)
    try:
        if builder is not None:
            return builder(ts, pid, tid, name, args, sargs, ret, err, dur, ongoing)
    except (ValueError, IndexError):   # odd text: fall back to a plain Syscall
        pass
    fd = kind = target = None
    if args:
        c = args[0]
        if "0" <= c <= "9":
            first = first_arg(args)
            if "<" in first or name in FD_FIRST:
                fd, kind, target = _parse_fd_cached(first)  # type: ignore[misc]
                if kind == "file" and name in _DIR_CALLS:
                    kind = "dir"
    return ev.Syscall(ts, pid, tid, name, sargs, ret, err, dur, fd, kind, target, ongoing)
