"""Per-process fd tables followed from strace's syscalls, for logs taken without ``-y``.

Contract:
- ``FdTables.apply(pid, name, args, ret, ret_text)`` updates process ``pid``'s table after a
  call named in ``FD_CALLS`` returned ``ret`` (the caller passes only those; errors are
  ignored here except for close, which frees the number whatever it returns: Linux closes the
  fd even when close reports EINTR). ``lookup(pid, fd)`` is ``(kind, target)`` or None for an
  fd not seen opened (inherited, or opened before the log began); ``fds(pid)`` the table as
  events.FdInfo rows. How targets are written: ``FdTables``.
- Threads share their process's table; ``fork(parent, child, shared)`` copies or shares it,
  ``exec(pid)`` drops close-on-exec fds, ``exit(pid)`` forgets the table.
- ``fd_calls(machine)`` is the set of calls that change a table on that architecture.
"""
from __future__ import annotations

import re
from typing import Dict, FrozenSet, List, Optional, Tuple

from .. import events as ev
from ..events.shapes import INT64_MAX
from ..linux.fdtarget import fd_kind
from ..linux.intparse import parse_c_int
from ..linux.syscall_table import AARCH64
from .args import first_arg, parse_fd, split_args, unescape

__all__ = ["FdTables", "FD_CALLS", "fd_calls", "poll_fds"]

Entry = Tuple[Optional[str], Optional[str], bool]      # kind, target, close-on-exec

_OPEN = frozenset({"open", "openat", "openat2", "creat", "open_by_handle_at"})
_ANON = {"eventfd": ("eventfd", "anon_inode:[eventfd]"),
         "eventfd2": ("eventfd", "anon_inode:[eventfd]"),
         "epoll_create": ("epoll", "anon_inode:[eventpoll]"),
         "epoll_create1": ("epoll", "anon_inode:[eventpoll]"),
         "timerfd_create": ("timerfd", "anon_inode:[timerfd]"),
         "inotify_init": ("inotify", "anon_inode:inotify"),
         "inotify_init1": ("inotify", "anon_inode:inotify"),
         "pidfd_open": ("pidfd", "anon_inode:[pidfd]"),
         "userfaultfd": ("anon", "anon_inode:[userfaultfd]"),
         "perf_event_open": ("anon", "anon_inode:[perf_event]"),
         "io_uring_setup": ("anon", "anon_inode:[io_uring]"),
         "fanotify_init": ("anon", "anon_inode:[fanotify]")}
_CLOEXEC_FLAGS = ("O_CLOEXEC", "SOCK_CLOEXEC", "EFD_CLOEXEC", "EPOLL_CLOEXEC", "TFD_CLOEXEC",
                  "IN_CLOEXEC", "SFD_CLOEXEC", "MFD_CLOEXEC", "FAN_CLOEXEC")
_OTHER = frozenset({"socket", "socketpair", "pipe", "pipe2", "accept", "accept4", "dup", "dup2",
                    "dup3", "fcntl", "fcntl64", "close", "close_range", "signalfd", "signalfd4",
                    "memfd_create"})
FD_CALLS: FrozenSet[str] = _OPEN | _OTHER | frozenset(_ANON)
_GENERIC = FD_CALLS & frozenset(AARCH64.values())
_SOCK_PROTO = {("AF_INET", "SOCK_STREAM"): "TCP", ("AF_INET6", "SOCK_STREAM"): "TCPv6",
               ("AF_INET", "SOCK_DGRAM"): "UDP", ("AF_INET6", "SOCK_DGRAM"): "UDPv6",
               ("AF_UNIX", "SOCK_STREAM"): "UNIX-STREAM", ("AF_UNIX", "SOCK_DGRAM"): "UNIX-DGRAM",
               ("AF_UNIX", "SOCK_SEQPACKET"): "UNIX-SEQPACKET"}
_FDS = re.compile(r"(?<![0-9])[0-9]{1,10}(?![0-9])")


def fd_calls(machine: Optional[str]) -> FrozenSet[str]:
    """The calls that change fd tables on ``machine``: aarch64 has only the generic calls (openat,
    pipe2, dup3, eventfd2, epoll_create1, ...), x86_64 also the legacy ones (open, creat, pipe,
    dup2, eventfd, epoll_create, inotify_init, signalfd); for an unknown architecture both (the
    aarch64 set is a subset of the x86_64 one)."""
    return _GENERIC if machine == "aarch64" else FD_CALLS


def _socket_target(domain: str, sock_type: str) -> Tuple[str, str]:
    domain = "AF_UNIX" if domain == "AF_LOCAL" else domain
    base = sock_type.split("|", 1)[0]
    proto = _SOCK_PROTO.get((domain, base))
    if proto is None:
        proto = "NETLINK" if domain == "AF_NETLINK" else "socket"
    return fd_kind(proto + ":[?]") or "socket", proto + ":[?]"


def _path(args: str, index: int) -> Optional[str]:
    """The ``index``-th string literal of ``args``, unescaped, "..." kept when strace cut it."""
    pos = 0
    for _ in range(index + 1):
        m = ev.STRING_LITERAL.search(args, pos)
        if m is None:
            return None
        pos = m.end()
    return unescape(m.group(1)) + (m.group(2) or "")


def _int(text: str) -> Optional[int]:
    text = text.strip()
    if text == "~0U":
        return 0xFFFFFFFF
    return parse_c_int(text)


def poll_fds(name: str, args: str) -> Tuple[int, ...]:
    """The fd numbers a poll/ppoll/select/pselect6 call watches, from undecorated text."""
    if name.startswith("poll") or name == "ppoll":
        out = []
        i = args.find("{fd=")
        while i >= 0:
            j = i + 4
            k = j + (args[j] == "-")
            while k < len(args) and "0" <= args[k] <= "9":
                k += 1
            fd = parse_c_int(args[j:k], 11)
            if fd is not None:
                out.append(fd)
            i = args.find("{fd=", k)
        return tuple(out)
    parts = split_args(args, 4)    # select(nfds, [3 4], [], NULL, {...})
    seen = []
    for fdset in parts[1:4]:
        if fdset.startswith("["):
            seen.extend(int(x) for x in _FDS.findall(fdset[:fdset.find("]") + 1]))
    return tuple(dict.fromkeys(seen))


class FdTables:
    """Process -> fd table (module doc). Kinds are events/__init__.py's; targets are written as the
    kernel names the object in /proc/PID/fd and strace -yy, without what the log cannot show: a
    path as the call printed it (``...`` kept where strace cut it), ``anon_inode:[eventfd]``,
    ``TCP:[?]`` (the inode is unknown: ``?``). Both ends of a pipe or socketpair created in the log
    share one target naming the pair by its order in the log, ``pipe:[log#3]``: two fds of a
    process with the same target are a pipe to itself (a wake-up pipe), as with /proc's inode
    numbers. fdtarget.py reads them like any other target. ``fork`` copies the table for fork,
    vfork and clone without CLONE_FILES and shares it for CLONE_FILES. Kernel facts: dup/dup2 clear
    FD_CLOEXEC on the new fd, dup3(O_CLOEXEC) and F_DUPFD_CLOEXEC set it; dup2/dup3 onto an open fd
    close it first; accept returns a socket of the listener's family."""

    def __init__(self) -> None:
        self._tables: Dict[int, Dict[int, Entry]] = {}
        self._pairs = 0

    def fds(self, pid: int) -> List[ev.FdInfo]:
        return [ev.FdInfo(fd, kind, target or "") for fd, (kind, target, _) in
                sorted((self._tables.get(pid) or {}).items()) if kind is not None]

    def lookup(self, pid: int, fd: int) -> Optional[Tuple[Optional[str], Optional[str]]]:
        table = self._tables.get(pid)
        entry = table.get(fd) if table is not None else None
        return None if entry is None else (entry[0], entry[1])

    def fork(self, parent: int, child: int, shared: bool) -> None:
        table = self._tables.get(parent)
        if table is not None:
            self._tables[child] = table if shared else dict(table)

    def exec(self, pid: int) -> None:
        table = self._tables.get(pid)
        if table:
            # A table shared with another process (CLONE_FILES) is unshared by execve.
            self._tables[pid] = {fd: e for fd, e in table.items() if not e[2]}

    def exit(self, pid: int) -> None:
        self._tables.pop(pid, None)

    def apply(self, pid: int, name: str, args: str, ret: Optional[int],
              ret_text: Optional[str]) -> None:
        table = self._tables.get(pid)
        if table is None:
            table = self._tables[pid] = {}
        if name == "close":
            fd = _int(args.split("<", 1)[0])
            if fd is not None:
                table.pop(fd, None)
            return
        if ret is None or not 0 <= ret <= INT64_MAX:    # a number no fd is (the trace's bound)
            return
        try:
            self._apply(table, name, args, ret, ret_text)
        except (ValueError, IndexError):     # odd text: leave the table as it was
            pass

    def _apply(self, table: Dict[int, Entry], name: str, args: str, ret: int,
               ret_text: Optional[str]) -> None:
        cloexec = any(f in args for f in _CLOEXEC_FLAGS)
        if name in _OPEN:
            table[ret] = (*_opened(name, args, ret_text), cloexec)
        elif name in _ANON:
            # a pidfd is always close-on-exec (pidfd_open(2))
            table[ret] = (*_ANON[name], cloexec or name == "pidfd_open")
        elif name == "signalfd" or name == "signalfd4":
            if args.startswith("-1"):             # -1: a new signalfd; else it updates one
                table[ret] = ("signalfd", "anon_inode:[signalfd]", cloexec)
        elif name == "memfd_create":
            table[ret] = ("anon", f"/memfd:{_path(args, 0) or ''} (deleted)", cloexec)
        elif name == "socket":
            parts = args.split(", ")
            table[ret] = (*_socket_target(parts[0], parts[1] if len(parts) > 1 else ""),
                          cloexec)
        elif name in ("pipe", "pipe2", "socketpair"):
            self._pair(table, name, args, cloexec)
        elif name == "accept" or name == "accept4":
            lfd = parse_fd(first_arg(args))[0]
            listener = table.get(lfd) if lfd is not None else None
            target = listener[1] if listener and listener[1] else None
            proto = target[:target.find(":")] if target and ":" in target else "socket"
            table[ret] = (fd_kind(proto + ":[?]") or "socket", proto + ":[?]", cloexec)
        elif name in ("dup", "dup2", "dup3", "fcntl", "fcntl64"):
            self._dup(table, name, args, ret)
        elif name == "close_range":
            parts = args.split(", ")
            first, last = _int(parts[0]), _int(parts[1]) if len(parts) > 1 else None
            if first is None or last is None:
                return
            for fd in [fd for fd in table if first <= fd <= last]:
                if "CLOSE_RANGE_CLOEXEC" in args:
                    table[fd] = (table[fd][0], table[fd][1], True)
                else:
                    del table[fd]

    def _pair(self, table: Dict[int, Entry], name: str, args: str, cloexec: bool) -> None:
        parts = split_args(args, 4 if name == "socketpair" else 1)
        arr = parts[0] if name != "socketpair" else (parts[3] if len(parts) > 3 else "")
        # the two ends (a corrupt line could hold a million)
        fds = [parse_fd(x) for x in arr.strip("[]").split(", ", 2)[:2]] \
            if arr.startswith("[") else []
        self._pairs += 1
        if name == "socketpair":
            kind, target = _socket_target(parts[0], parts[1])
            target = target.replace("[?]", f"[log#{self._pairs}]")
        else:
            kind, target = "pipe", f"pipe:[log#{self._pairs}]"
        for fd, dkind, dtarget in fds:
            if fd is not None:
                table[fd] = (dkind or kind, dtarget or target, cloexec)

    @staticmethod
    def _dup(table: Dict[int, Entry], name: str, args: str, ret: int) -> None:
        parts = args.split(", ")
        if name.startswith("fcntl"):
            cmd = parts[1] if len(parts) > 1 else ""
            old = _int(parts[0].split("<", 1)[0])
            if cmd == "F_SETFD" and old is not None and old in table:
                e = table[old]
                table[old] = (e[0], e[1], "FD_CLOEXEC" in args)
                return
            if cmd not in ("F_DUPFD", "F_DUPFD_CLOEXEC"):
                return
            cloexec = cmd == "F_DUPFD_CLOEXEC"
        else:
            old = _int(parts[0].split("<", 1)[0])
            cloexec = name == "dup3" and "O_CLOEXEC" in args
        if old == ret:
            return
        src = table.get(old) if old is not None else None
        if src is None:
            table.pop(ret, None)      # now a copy of an fd not seen opened
        else:
            table[ret] = (src[0], src[1], cloexec)


def _opened(name: str, args: str, ret_text: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    """(kind, target) of a file opened by open/openat/openat2/creat."""
    if ret_text and ret_text.startswith("<") and ret_text.endswith(">"):   # -y: the kernel's
        _, kind, target = parse_fd("0" + ret_text)
        return kind, target
    path = _path(args, 0)
    if path is None:
        return None, None
    if not path.startswith("/"):
        return ("dir" if "O_DIRECTORY" in args else "file"), path
    kind = fd_kind(path[:-3] if path.endswith('...') else path)
    if kind == "file" and "O_DIRECTORY" in args:
        kind = "dir"
    return kind, path
