"""Pure readers of /proc: processes, threads, the process tree (fds and sockets: procfs_fds.py).

Contract:
- Every function takes ``root`` (default "/proc") so tests can point it at a captured tree.
- ``read_checked(path)`` is ``read_bytes`` that says why it failed: ``(data, None)`` or
  ``(None, GONE | DENIED | UNREADABLE)``, so a message never says "permission denied" for a
  process that simply exited (access.py).
- Nothing here raises for the ordinary life of processes: a process or thread that vanishes
  between listing and reading, or a file we may not read, gives None / an empty value / is
  skipped, and the caller gets whatever could be read (``read_bytes`` says why).
- Names are never trusted (``parse_stat``); bytes that are not UTF-8 are decoded with
  replacement characters.
"""
from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Tuple

from ..events import ProcessInfo, ProcessIO, ThreadSample
from .pidns import inner_pids
from .procfs_fds import SocketTables, listening_sockets, read_fds, socket_table

__all__ = ["GONE", "DENIED", "UNREADABLE", "read_checked", "Stat", "read_bytes", "read_text", "read_stat", "read_cmdline", "read_comm",
           "list_pids", "list_tids", "read_threads", "read_process_info", "read_thread_sample",
           "read_io", "read_io_field", "read_environ_rank", "read_environ_vars", "children_map", "descendants",
           "pid_exists", "reaped", "tgid_of", "boot_time", "TICKS_HZ", "PAGE_SIZE",
           # re-exported from procfs_fds
           "read_fds", "socket_table", "listening_sockets", "SocketTables"]

# utime/stime/starttime in /proc are in clock ticks (USER_HZ, 100 on every mainstream build).
TICKS_HZ: int = os.sysconf("SC_CLK_TCK")
PAGE_SIZE: int = os.sysconf("SC_PAGE_SIZE")


GONE, DENIED, UNREADABLE = "gone", "denied", "unreadable"
_GONE_ERRNOS = frozenset({errno.ENOENT, errno.ESRCH})
_DENIED_ERRNOS = frozenset({errno.EACCES, errno.EPERM})


def _why(e: OSError) -> str:
    if e.errno in _GONE_ERRNOS:
        return GONE
    if e.errno in _DENIED_ERRNOS:
        return DENIED
    return UNREADABLE


def read_checked(path: str) -> Tuple[Optional[bytes], Optional[str]]:
    """Whole content of a /proc file, or None and why not: GONE for ENOENT/ESRCH, DENIED for
    EACCES/EPERM, UNREADABLE for anything else (access.py's words)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        return None, _why(e)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks), None
    except OSError as e:   # ESRCH: the task died after open; EACCES on some files at read()
        return None, _why(e)
    finally:
        os.close(fd)


def read_bytes(path: str) -> Optional[bytes]:
    """Whole content of a /proc file, or None when it cannot be read (gone, denied, EIO...).
    A process or thread that vanishes between listing and reading (ENOENT, ESRCH), or a file we may
    not read (EACCES: another user's process, or Yama ptrace_scope for /proc/PID/syscall), gives
    None. Where the caller must tell "gone" from "denied" (a message to the user, a verdict that
    could not be reached), access.py says which (``read_checked``; processes.py's ``pid_access``
    for a pid given by the user). Files are read with os.open/os.read, not the io stack: a sampler
    reads several files for each of hundreds of threads ten times a second, and the buffered-file
    overhead dominates otherwise."""
    return read_checked(path)[0]


def read_text(path: str) -> Optional[str]:
    data = read_bytes(path)
    return None if data is None else data.decode("utf-8", "replace")


def _task_dir(pid: int, tid: Optional[int], root: str) -> str:
    # /proc/TID works for any thread id too (threads are hidden from the listing only), but
    # /proc/PID/task/TID also guarantees that TID belongs to PID.
    return f"{root}/{pid}" if tid is None else f"{root}/{pid}/task/{tid}"


# --------------------------------------------------------------------------- stat
@dataclass(frozen=True, slots=True)
class Stat:
    """The fields of /proc/PID[/task/TID]/stat that hangtrace uses (see proc(5) numbering).

    ``exit_code`` (field 52, Linux >= 3.5) is the wait status a zombie will report to its parent
    (meaningful only in state Z/X; for a stopped task it holds the stop signal; 0 when the
    reader lacks ptrace access).
    """
    pid: int
    comm: str
    state: str
    ppid: int
    pgrp: int
    utime: int
    stime: int
    num_threads: int
    starttime: int
    processor: Optional[int]
    exit_code: Optional[int]
    flags: int = 0           # field 9: PF_* flags (PF_KTHREAD marks a kernel thread)
    minflt: int = 0          # field 10: minor page faults (no disk read)
    majflt: int = 0          # field 12: major page faults (read from storage)
    rss_pages: int = 0       # field 24: resident set size in pages
    children: int = 0        # fields 11, 13, 16, 17 summed (read_stat of a process only):
    #                          cminflt + cmajflt + cutime + cstime, the reaped children's faults
    #                          and CPU (wait_task_zombie adds them: linux/reaped_io.py)


def parse_stat(data: bytes, children: bool = False) -> Optional[Stat]:
    """Parse the content of a stat file; None when it is not one. ``children``: fill
    ``Stat.children`` (a process's stat; the thread samples need it not).
    Names are never trusted: comm may hold spaces, parentheses, newlines and non-UTF-8 bytes
    (prctl(PR_SET_NAME) accepts any 15 bytes), so the file is split at the LAST ')'."""
    lpar, rpar = data.find(b"("), data.rfind(b")")
    if lpar < 0 or rpar < lpar:
        return None
    comm = data[lpar + 1:rpar].decode("utf-8", "replace")
    rest = data[rpar + 2:].split()  # rest[0] is field 3 (state): field N is rest[N - 3]
    try:
        return Stat(
            pid=int(data[:lpar]), comm=comm, state=rest[0].decode(), ppid=int(rest[1]),
            pgrp=int(rest[2]), utime=int(rest[11]), stime=int(rest[12]),
            num_threads=int(rest[17]), starttime=int(rest[19]),
            processor=int(rest[36]) if len(rest) > 36 else None,
            exit_code=int(rest[49]) if len(rest) > 49 else None, flags=int(rest[6]),
            minflt=int(rest[7]), majflt=int(rest[9]),
            rss_pages=int(rest[21]) if len(rest) > 21 else 0,
            children=int(rest[8]) + int(rest[10]) + int(rest[13]) + int(rest[14])
            if children else 0)
    except (IndexError, ValueError):
        return None


def read_stat(pid: int, tid: Optional[int] = None, root: str = "/proc") -> Optional[Stat]:
    """/proc/PID/stat, or /proc/PID/task/TID/stat when ``tid`` is given; None when gone."""
    data = read_bytes(_task_dir(pid, tid, root) + "/stat")
    return None if data is None else parse_stat(data, children=tid is None)


def read_comm(pid: int, tid: Optional[int] = None, root: str = "/proc") -> Optional[str]:
    data = read_bytes(_task_dir(pid, tid, root) + "/comm")
    # comm ends with exactly one "\n" added by the kernel; a newline inside the name stays.
    return None if data is None else data[:-1].decode("utf-8", "replace") if data.endswith(
        b"\n") else data.decode("utf-8", "replace")


def parse_cmdline(data: bytes) -> List[str]:
    """argv from /proc/PID/cmdline: NUL-separated, NUL-terminated; empty arguments are kept.

    A process that rewrote its title (setproctitle: "sglang::scheduler_TP1") may have no NUL
    or NUL padding; the text is kept as the kernel gives it, minus the padding.
    """
    if not data:
        return []  # kernel thread, or a zombie (its mm is gone)
    if data.endswith(b"\0"):
        data = data[:-1]
    args = [a.decode("utf-8", "replace") for a in data.split(b"\0")]
    # setproctitle pads the old argv area with NULs: many trailing empty strings, never real.
    # (A real argv ending in two or more empty arguments is taken for padding too.)
    trailing = 0
    while trailing < len(args) and args[-1 - trailing] == "":
        trailing += 1
    if trailing >= 2 and trailing < len(args):
        del args[-trailing:]
    return args


def read_cmdline(pid: int, root: str = "/proc") -> List[str]:
    data = read_bytes(f"{root}/{pid}/cmdline")
    return [] if data is None else parse_cmdline(data)


def read_environ_rank(pid: int, root: str = "/proc") -> Optional[str]:
    """"RANK=3 LOCAL_RANK=1" (those present) from /proc/PID/environ, None when absent/unreadable.

    environ is the environment given at exec (later setenv calls are invisible), which is where
    torchrun and friends put RANK. Reading it needs ptrace read access.
    """
    data = read_bytes(f"{root}/{pid}/environ")
    if not data:
        return None
    found = []
    for var in (b"RANK", b"LOCAL_RANK"):
        for entry in data.split(b"\0"):
            if entry.startswith(var + b"="):
                found.append(entry.decode("utf-8", "replace"))
                break
    return " ".join(found) or None


def read_environ_vars(pid: int, names: Iterable[str], root: str = "/proc") -> Dict[str, str]:
    """The values of the variables ``names`` in /proc/PID/environ (only those: hangtrace never
    keeps a whole environment); {} when unreadable."""
    data = read_bytes(f"{root}/{pid}/environ")
    if not data:
        return {}
    want = {n.encode() + b"=": n for n in names}
    out: Dict[str, str] = {}
    for entry in data.split(b"\0"):
        for prefix, name in want.items():
            if entry.startswith(prefix) and name not in out:
                out[name] = entry[len(prefix):].decode("utf-8", "replace")
    return out


_btime_cache: Dict[str, float] = {}


def boot_time(root: str = "/proc") -> Optional[float]:
    """Boot time in epoch seconds ("btime" of /proc/stat; whole seconds)."""
    if root in _btime_cache:
        return _btime_cache[root]
    text = read_text(f"{root}/stat") or ""
    for line in text.splitlines():
        if line.startswith("btime "):
            _btime_cache[root] = float(line.split()[1])
            return _btime_cache[root]
    return None


# --------------------------------------------------------------------------- listing
def list_pids(root: str = "/proc") -> List[int]:
    """Every process id (thread group leaders; threads are not listed in /proc)."""
    try:
        return [int(n) for n in os.listdir(root) if n.isdigit()]
    except OSError:
        return []


def list_tids(pid: int, root: str = "/proc") -> List[int]:
    """Thread ids of ``pid`` (empty when the process is gone)."""
    try:
        return sorted(int(n) for n in os.listdir(f"{root}/{pid}/task") if n.isdigit())
    except OSError:
        return []


def read_threads(pid: int, root: str = "/proc") -> Dict[int, str]:
    """tid -> comm for every thread still there when read."""
    out: Dict[int, str] = {}
    for tid in list_tids(pid, root):
        comm = read_comm(pid, tid, root)
        if comm is not None:  # None: the thread exited after the listing
            out[tid] = comm
    return out


def pid_exists(pid: int, root: str = "/proc") -> bool:
    """True when /proc/PID exists (also true for a thread id: see ``tgid_of``) or a zombie."""
    return pid > 0 and os.path.exists(f"{root}/{pid}/stat")


def reaped(pid: int, root: str = "/proc") -> bool:
    """``pid`` was reaped: gone, or dead (state X: its parent's wait is taking it). A zombie
    was not (linux/reaped_io.py asks)."""
    st = read_stat(pid, root=root)
    return st is None or st.state == "X"


def tgid_of(tid: int, root: str = "/proc") -> Optional[int]:
    """Process (thread group) id of thread ``tid``, from /proc/TID/status; None when gone."""
    text = read_text(f"{root}/{tid}/status") or ""
    for line in text.splitlines():
        if line.startswith("Tgid:"):
            return int(line.split()[1])
    return None


# --------------------------------------------------------------------------- tree
def children_map(root: str = "/proc") -> Dict[int, List[int]]:
    """ppid -> [child pids] for the whole system, from every /proc/*/stat.

    /proc/PID/task/TID/children would be cheaper but needs CONFIG_PROC_CHILDREN (absent on many
    kernels, this VM's included) and is documented as racy for running tasks; a full scan is a
    few ms for a few hundred processes.
    """
    tree: Dict[int, List[int]] = {}
    for pid in list_pids(root):
        st = read_stat(pid, root=root)
        if st is not None:  # None: exited after the listing
            tree.setdefault(st.ppid, []).append(pid)
    return tree


def descendants(pids: Iterable[int], root: str = "/proc",
                tree: Optional[Dict[int, List[int]]] = None) -> List[int]:
    """All descendants of ``pids`` (not the pids themselves), sorted; ``tree`` from children_map.

    A child whose parent died was re-parented (to init or a subreaper) and is no longer found
    here: the tree is a snapshot of parent links, not of history.
    """
    tree = children_map(root) if tree is None else tree
    seen = set(pids)
    out: List[int] = []
    stack = list(seen)
    while stack:
        for child in tree.get(stack.pop(), ()):
            if child not in seen:
                seen.add(child)
                out.append(child)
                stack.append(child)
    return sorted(out)


# --------------------------------------------------------------------------- records
def read_process_info(pid: int, root: str = "/proc", ts: Optional[float] = None,
                      with_fds: bool = True,
                      tables: Optional[SocketTables] = None) -> Optional[ProcessInfo]:
    """Everything events.ProcessInfo holds about ``pid``; None when the process is gone.
    ``tables``: the socket tables of a pass over many processes (read once a namespace)."""
    st = read_stat(pid, root=root)
    if st is None:
        return None
    bt = boot_time(root)
    tables = tables if tables is not None else SocketTables(root)
    fds = read_fds(pid, root, tables=tables) if with_fds else []
    zombie = st.state in ("Z", "X")
    return ProcessInfo(
        ts=time.time() if ts is None else ts, pid=pid, ppid=st.ppid, comm=st.comm,
        cmdline=read_cmdline(pid, root), threads=read_threads(pid, root), fds=fds,
        listening=listening_sockets(pid, root, fds=fds, tables=tables) if with_fds else [],
        state=st.state, exit_code=st.exit_code if zombie else None,
        start_time=None if bt is None else bt + st.starttime / TICKS_HZ,
        environ_rank=read_environ_rank(pid, root), ns_pids=inner_pids(pid, root))


def parse_schedstat(data: Optional[bytes]):
    """(run_ns, wait_ns, run_count) from schedstat "RUN WAIT COUNT"; Nones when unavailable."""
    try:
        run, wait, count = (int(v) for v in (data or b"").split()[:3])
        return run, wait, count
    except ValueError:
        return None, None, None


def read_thread_sample(pid: int, tid: int, root: str = "/proc",
                       ts: Optional[float] = None) -> Optional[ThreadSample]:
    """One look at a thread: stat, wchan, current syscall, schedstat; None when it is gone.

    The four files are read one after the other, so they describe instants a few µs apart; a
    thread may leave its syscall between reading stat and syscall (state S with "running").
    """
    base = f"{root}/{pid}/task/{tid}"
    data = read_bytes(base + "/stat")
    st = None if data is None else parse_stat(data)
    if st is None:
        return None
    wchan = read_bytes(base + "/wchan")
    sysc = read_bytes(base + "/syscall")  # EACCES without ptrace-attach rights: left ""
    run_ns, wait_ns, run_count = parse_schedstat(read_bytes(base + "/schedstat"))
    return ThreadSample(
        ts=time.time() if ts is None else ts, pid=pid, tid=tid, comm=st.comm, state=st.state,
        utime=st.utime, stime=st.stime,
        wchan=wchan.decode("ascii", "replace").strip() if wchan else "",
        syscall=sysc.decode("ascii", "replace").strip() if sysc else "",
        run_ns=run_ns, wait_ns=wait_ns, run_count=run_count, ticks_hz=TICKS_HZ)


_IO_KEYS = ("rchar", "wchar", "syscr", "syscw", "read_bytes", "write_bytes")


def read_io_field(path: str, key: str) -> Optional[int]:
    """One counter of an io file (/proc/PID/io, /proc/PID/task/TID/io), None when unreadable."""
    for line in (read_text(path) or "").splitlines():
        name, _, value = line.partition(":")
        if name == key:
            try:
                return int(value)
            except ValueError:
                return None
    return None


_IO_LAYOUT = [b"rchar:", b"wchar:", b"syscr:", b"syscw:", b"read_bytes:", b"write_bytes:"]


def read_io(pid: int, root: str = "/proc", ts: Optional[float] = None) -> Optional[ProcessIO]:
    """/proc/PID/io counters; None when unreadable (another user's process needs root) or gone.
    The kernel's layout (``_IO_LAYOUT`` first) is read by position: the proc backend reads it
    for every process at every sample; another layout by name."""
    data = read_bytes(f"{root}/{pid}/io")
    if not data:
        return None
    f = data.split()
    if f[0:12:2] == _IO_LAYOUT:
        try:
            return ProcessIO(time.time() if ts is None else ts, pid, int(f[1]), int(f[3]),
                             int(f[5]), int(f[7]), int(f[9]), int(f[11]))
        except ValueError:
            pass
    text = data.decode("utf-8", "replace")
    vals: Dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in _IO_KEYS:
            try:
                vals[key] = int(value)
            except ValueError:
                pass
    if not all(k in vals for k in _IO_KEYS[:4]):
        return None
    return ProcessIO(ts=time.time() if ts is None else ts, pid=pid, **vals)
