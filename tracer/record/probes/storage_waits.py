"""The files, devices and mounts the traced threads are blocked on, at the end of a recording.

Contract: ``storage_waits_probe(pids, analyzer)`` is an ``EndProbe``: for every thread of
``pids`` asleep (state D or S) in a call on an fd (/proc/TID/syscall: read, write, fsync, ioctl,
...) whose target is a path (a file, a device, /dev/fuse; never a pipe, socket or terminal), one
``FileMount`` event (a thread in D state outside any call, a page fault: the file it maps from a
FUSE or network mount, fd -1): the path, the call, its state, the file's mount and, for a FUSE mount or an fd on
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
from ...linux import cancel, procfs
from ...linux.blocking import FD_CALLS
from ...linux.mounts import (FUSE_DEVICE, PAGE_FAULT_FD, Mount, fuse_connection, fuse_servers,
                             mapped_files, mount_of_fd, mount_of_path, parse_mountinfo,
                             read_fdinfo)
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
    """(tid, state, call, fd) of the threads of ``pid`` asleep in a call on an fd; fd
    ``PAGE_FAULT_FD`` for one in D state outside any call (a page fault). The call first
    (/proc/TID/syscall), the state only of a thread in an fd call or outside any: the
    hundreds of threads parked in futex waits cost one read each, at the end."""
    out = []
    for tid in procfs.list_tids(pid) or [pid]:
        base = f"/proc/{pid}/task/{tid}"
        sysc = (procfs.read_bytes(base + "/syscall") or b"").decode("ascii", "replace").strip()
        got = blocked_fd_call(sysc)
        if got is None and not sysc.startswith("-1"):
            continue
        data = procfs.read_bytes(base + "/stat")
        st = None if data is None else procfs.parse_stat(data)
        if st is None or st.state not in ("D", "S"):
            continue
        if got is not None:
            out.append((tid, st.state, got[0], got[1]))
        elif st.state == "D":
            out.append((tid, st.state, "page fault", PAGE_FAULT_FD))
    return out


def _mapped_remote(pid: int) -> Tuple[List[str], List[Mount]]:
    """The files ``pid`` maps from FUSE or network mounts, and its mounts."""
    mounts = parse_mountinfo(procfs.read_text(f"/proc/{pid}/mountinfo") or "")
    files = [p for p in mapped_files(procfs.read_text(f"/proc/{pid}/maps") or "")
             if (m := mount_of_path(p, mounts)) is not None and m.kind in ("fuse", "network")]
    return files, mounts


def _target(pid: int, call: str, fd: int) -> Optional[Tuple[str, str, Optional[Mount]]]:
    """(path, call, mount) a wait is on: an fd's link and mount, or for a page fault the one
    file the process maps from a FUSE or network mount (None when it maps none)."""
    if fd != PAGE_FAULT_FD:
        try:
            path = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            return None
        return path, call, mount_of_fd(pid, fd)
    files, mounts = _mapped_remote(pid)
    if not files:
        return None
    more = f", one of {len(files)} files it maps from FUSE or network mounts" \
        if len(files) > 1 else ""
    return files[0], f"mapped{more}", mount_of_path(files[0], mounts)


def storage_waits_probe(pids: List[int], analyzer: Optional[object] = None) -> List[ev.Event]:
    """EndProbe (session.py): the module doc's ``FileMount`` events for ``pids``."""
    ts = time.time()
    out: List[ev.Event] = []
    servers: Dict[int, Tuple[List[int], List[str]]] = {}
    for pid in cancel.checked(pids, every=16):
        for tid, state, call, fd in _thread_waits(pid):
            if len(out) >= MAX_EVENTS:
                return out
            got = _target(pid, call, fd)
            if got is None:
                continue
            path, call, m = got
            if not path.startswith("/") or path.startswith(_NOT_STORAGE):
                continue
            conn: Optional[int] = None
            if path == FUSE_DEVICE:
                got = read_fdinfo(pid, fd).get("fuse_connection", "")
                conn = int(got) if got.isdigit() else None
            elif m is not None and m.kind == "fuse":
                conn = fuse_connection(m.dev)
            if conn is not None and conn not in servers and path != FUSE_DEVICE:
                found = fuse_servers(conn, pids) or fuse_servers(conn)   # the tree first
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
