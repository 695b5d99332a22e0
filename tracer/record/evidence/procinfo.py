"""Process vitals and log targets: how old a process is, how much memory and CPU it used, and
where its output goes and when that last grew.

Contract:
- ``read_vitals(pid)`` -> ``ProcessVitals`` from /proc/PID/stat and statm; None when the
  process is gone.
- ``read_log_targets(pid)`` -> ``LogTargets``: fds 1 and 2 whatever they point to, plus regular
  files the process has open for writing that look like logs (``looks_like_log``), at most
  ``MAX_LOGS``, with their size and mtime; the stats never hang on a dead network filesystem
  (``STAT_TIMEOUT_S``; why and how: ``read_log_targets``).
- ``read_cgroup_fact(pid)`` -> ``ProcessCgroup`` (linux/cgroup.py); None when it is gone.
- Never raises for processes that vanish or cannot be read: ``why`` says what was missing.
"""
from __future__ import annotations

import os
import re
import time
from typing import Dict, List, Optional

from ...events.evidence import LogTargets, ProcessCgroup, ProcessVitals
from ...linux import procfs
from ...linux.cgroup import read_cgroup
from ...linux.bounded_stat import stat_all
from ...linux.procfs_fds import parse_fdinfo, read_fds_checked

__all__ = ["read_vitals", "read_log_targets", "read_cgroup_fact", "looks_like_log", "MAX_LOGS"]

MAX_LOGS = 8
STAT_TIMEOUT_S = 2.0
_PAGE = os.sysconf("SC_PAGE_SIZE")
_O_APPEND = 0o2000
_LOG_NAME = re.compile(r"(\.(log|out|err|txt)(\.\d+)?$)|/logs?/", re.IGNORECASE)
_NOT_LOGS = ("/dev/shm/", "/memfd:", "/proc/", "/sys/")
_STAT_KINDS = ("file", "pipe", "fifo", "tty")
_NO_FILESYSTEM = ("pipe", "tty")      # statted without a thread (read_log_targets)


def read_vitals(pid: int, root: str = "/proc", phase: str = "",
                ts: Optional[float] = None) -> Optional[ProcessVitals]:
    """``ProcessVitals`` from /proc/PID/stat (start time, utime+stime of the whole thread group,
    exited threads included; threads) and /proc/PID/statm (resident pages); None when the process
    is gone."""
    st = procfs.read_stat(pid, root=root)
    if st is None:
        return None
    bt = procfs.boot_time(root)
    rss = None
    statm = procfs.read_bytes(f"{root}/{pid}/statm")
    if statm:
        try:
            rss = int(statm.split()[1]) * _PAGE
        except (IndexError, ValueError):
            pass
    return ProcessVitals(
        ts=time.time() if ts is None else ts, pid=pid,
        start_time=None if bt is None else round(bt + st.starttime / procfs.TICKS_HZ, 2),
        rss_bytes=rss, cpu_s=round((st.utime + st.stime) / procfs.TICKS_HZ, 2),
        num_threads=st.num_threads, phase=phase)


def read_cgroup_fact(pid: int, root: str = "/proc", phase: str = "",
                     ts: Optional[float] = None) -> Optional[ProcessCgroup]:
    """``ProcessCgroup`` of /proc/PID/cgroup (module doc); None when the process is gone."""
    now = time.time() if ts is None else ts
    place = read_cgroup(pid, root)
    if place is None:
        if not procfs.pid_exists(pid, root):
            return None
        return ProcessCgroup(ts=now, pid=pid, phase=phase,
                             why="/proc/PID/cgroup not readable")
    c = place.container
    return ProcessCgroup(ts=now, pid=pid, path=place.path, version=place.version,
                         container_id=c.id if c else "", runtime=c.runtime if c else None,
                         pod_uid=c.pod_uid if c else None, qos=c.qos if c else None,
                         phase=phase)


def looks_like_log(path: str, flags: Optional[int]) -> bool:
    """A regular file opened for writing that a person would call a log.
    That is: opened with O_APPEND, or named *.log / *.out / *.err / *.txt, or under a log/ or logs/
    directory."""
    if any(p in path for p in _NOT_LOGS):
        return False
    return bool(flags is not None and flags & _O_APPEND) or bool(_LOG_NAME.search(path))


def _stat_inline(paths: Dict[int, str]) -> Dict[int, object]:
    """fd -> os.stat_result or an error text, in this thread (pipes and ttys only)."""
    out: Dict[int, object] = {}
    for fd, path in paths.items():
        try:
            out[fd] = os.stat(path)
        except OSError as exc:
            out[fd] = exc.strerror or str(exc)
    return out


def _stat_all(paths: Dict[int, str], timeout: float) -> Dict[int, object]:
    """fd -> os.stat_result or an error text, statted in the helper thread a pass over many
    processes shares (linux/bounded_stat.py; ``read_log_targets``)."""
    return stat_all(paths, timeout)  # type: ignore[arg-type,return-value]


def read_log_targets(pid: int, root: str = "/proc", phase: str = "",
                     ts: Optional[float] = None,
                     timeout: float = STAT_TIMEOUT_S) -> LogTargets:
    """``LogTargets``: fds 1 and 2 whatever they point to, plus regular files open for writing that
    look like logs (``looks_like_log``), at most ``MAX_LOGS``. Size and mtime come from stat() of
    /proc/PID/fd/N, i.e. of the open file itself (a log that was rotated away still counts). The
    kernel updates mtime on every write to a file or a pipe, and every 8 s at most for a tty
    (tty_update_time), so mtime is "when it was last written".

    stat() of a file on a network filesystem whose server is gone can block for ever; a hang tracer
    must not hang, so the stats of one process's files and fifos run in a helper thread given
    ``STAT_TIMEOUT_S`` (one shared by the processes of a pass: linux/bounded_stat.py); what it
    did not finish says "stat timed out". Pipes and ttys (no filesystem behind them) are statted
    in the caller's thread: a thread per process was most of the probe's time in a
    2,000-process tree."""
    now = time.time() if ts is None else ts
    # No socket tables (sockets={}): reading /proc/PID/net/* costs ~20 ms a process on a busy
    # host, and a log target that is a socket only needs to say "socket".
    fds = read_fds_checked(pid, root, sockets={})
    if fds is None:
        why = ("the process is gone" if not procfs.pid_exists(pid, root) else
               "fds not readable (another user's process: run as root or as its owner)")
        return LogTargets(ts=now, pid=pid, phase=phase, why=why)
    targets: List[dict] = []
    logs = 0
    for f in fds:
        if f.fd in (1, 2):
            role = "stdout" if f.fd == 1 else "stderr"
        elif f.kind == "file" and "w" in f.mode:
            flags = parse_fdinfo(procfs.read_text(f"{root}/{pid}/fdinfo/{f.fd}") or "").get("flags")
            if not looks_like_log(f.target, flags) or logs >= MAX_LOGS:
                continue
            role = "log"
            logs += 1
        else:
            continue
        targets.append({"fd": f.fd, "role": role, "kind": f.kind, "path": f.target,
                        "size": None, "mtime": None, "why": ""})
    to_stat = {t["fd"]: f"{root}/{pid}/fd/{t['fd']}" for t in targets
               if t["kind"] in _STAT_KINDS}
    inline = {fd: path for fd, path in to_stat.items()
              if next(t["kind"] for t in targets if t["fd"] == fd) in _NO_FILESYSTEM}
    stats = _stat_inline(inline)
    rest = {fd: path for fd, path in to_stat.items() if fd not in inline}
    stats.update(_stat_all(rest, timeout) if rest else {})
    for t in targets:
        st = stats.get(t["fd"])
        if st is None:
            continue
        if isinstance(st, str):
            t["why"] = st
            continue
        t["mtime"] = round(st.st_mtime, 3)      # type: ignore[attr-defined]
        if t["kind"] == "file":
            t["size"] = st.st_size              # type: ignore[attr-defined]
    return LogTargets(ts=now, pid=pid, targets=targets, phase=phase)
