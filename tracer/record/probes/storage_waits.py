"""The files, devices and mounts the traced threads are blocked on, at the end of a recording.

Contract: ``storage_waits_probe(pids, analyzer)`` is an ``EndProbe``: for every thread of
``pids`` asleep (state D or S) in a call on an fd (/proc/TID/syscall: read, write, fsync, ioctl,
...) whose target is a path (a file, a device, /dev/fuse; never a pipe, socket or terminal), one
``FileMount`` event: the path, the call, the thread's state, the mount the file is on (fdinfo's
mnt_id in the process's mountinfo: its type and source) and, for a FUSE mount or an fd on
/dev/fuse, the connection and the processes of this host that serve it (linux/mounts.py), with
each server's state in a few words. At most ``MAX_EVENTS``. It only reads /proc: never the file,
never the mount (a hung mount would hang the probe too). What it decides nothing about: the
analysis says whether the wait is a storage or device wait (waitgraph/fd_waits.py).
"""
from __future__ import annotations

import os
import time
from typing import Dict, List, Optional, Tuple

from ... import events as ev
from ...linux import procfs
from ...linux.blocking import FD_CALLS
from ...linux.mounts import FUSE_DEVICE, fuse_connection, fuse_servers, mount_of_fd, read_fdinfo
from ...linux.syscall_table import parse_proc_syscall

__all__ = ["storage_waits_probe", "blocked_fd_call", "MAX_EVENTS"]

MAX_EVENTS = 256
_NOT_STORAGE = ("/dev/pts/", "/dev/tty", "/dev/console", "/dev/ptmx", "/dev/null")


def blocked_fd_call(syscall_text: str) -> Optional[Tuple[str, int]]:
    """(call, fd) of a /proc/TID/syscall line of a thread inside a call on an fd, else None
    (running, outside a call, a call without an fd argument)."""
    cs = parse_proc_syscall(syscall_text)
    if cs is None or cs.kind != "syscall" or cs.name not in FD_CALLS or not cs.args:
        return None
    fd = cs.args[0]
    if fd >= 1 << 31:
        return None
    return cs.name, fd


def _server_state(pid: int) -> str:
    """"S in read(/dev/fuse)": what a FUSE server's main thread does now."""
    s = procfs.read_thread_sample(pid, pid)
    if s is None:
        return "gone"
    got = blocked_fd_call(s.syscall or "")
    where = ""
    if got is not None:
        try:
            where = f" in {got[0]}({os.readlink(f'/proc/{pid}/fd/{got[1]}')})"
        except OSError:
            where = f" in {got[0]}(fd {got[1]})"
    return f"{s.state}{where}"


def _thread_waits(pid: int) -> List[Tuple[int, str, str, int]]:
    """(tid, state, call, fd) of the threads of ``pid`` asleep in a call on an fd."""
    out = []
    for tid in procfs.list_tids(pid) or [pid]:
        s = procfs.read_thread_sample(pid, tid)
        if s is None or s.state not in ("D", "S"):
            continue
        got = blocked_fd_call(s.syscall or "")
        if got is not None:
            out.append((tid, s.state, got[0], got[1]))
    return out


def storage_waits_probe(pids: List[int], analyzer: Optional[object] = None) -> List[ev.Event]:
    """EndProbe (session.py): the module doc's ``FileMount`` events for ``pids``."""
    ts = time.time()
    out: List[ev.Event] = []
    servers: Dict[int, Tuple[List[int], List[str]]] = {}
    for pid in pids:
        for tid, state, call, fd in _thread_waits(pid):
            if len(out) >= MAX_EVENTS:
                return out
            try:
                path = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if not path.startswith("/") or path.startswith(_NOT_STORAGE):
                continue
            m = mount_of_fd(pid, fd)
            conn: Optional[int] = None
            if path == FUSE_DEVICE:
                got = read_fdinfo(pid, fd).get("fuse_connection", "")
                conn = int(got) if got.isdigit() else None
            elif m is not None and m.kind == "fuse":
                conn = fuse_connection(m.dev)
            if conn is not None and conn not in servers and path != FUSE_DEVICE:
                found = fuse_servers(conn)
                servers[conn] = (sorted(found), [_server_state(q) for q in sorted(found)])
            held, states = servers.get(conn, ([], [])) if conn is not None else ([], [])
            out.append(ev.FileMount(
                ts=ts, pid=pid, tid=tid, fd=fd, path=path, state=state, call=call,
                mount_id=m.mount_id if m else None, dev=m.dev if m else "",
                mountpoint=m.mountpoint if m else "", fstype=m.fstype if m else "",
                source=m.source if m else "", fuse_conn=conn, servers=held,
                server_states=states))
    return out


storage_waits_probe.__name__ = "storage waits"
