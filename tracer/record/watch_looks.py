"""Cheap looks at a watched tree for ``hangtrace watch``: /proc, sock_diag and NVML, nothing else.

Contract:
- ``TreeSampler(roots, name=None, cgroup=None, container=None)``; ``look()``: a ``TreeLook``
  (analysis/watch_rules.py) of every live process of the roots' trees (a new one followed from
  the look that sees it, also after its parent dies) and of what ``name``, ``cgroup`` and
  ``container`` select (looked for again every ``rescan_s`` s: a watcher may start before its
  server); never the watcher's own process, its ancestors and children.
- It never stops, signals or ptrace-attaches a process: it reads /proc files and kernel tables
  (what a look reads: ``TreeSampler.look``); one it cannot read (another user's, without root)
  is watched through what it can, and ``notes`` says what it could not, once. ``close()``
  shuts NVML down; ``looks`` and ``busy_s`` count the looks and their time.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional, Set

from ..analysis.watch_rules import ProcessLook, TreeLook
from ..errors import HangtraceError
from ..linux import processes, procfs
from ..linux.containers import select_by_cgroup, select_by_container
from ..events.evidence import LogLines
from ..linux.procfs_fds import written_positions
from ..linux.reaped_io import ReapedIO
from ..linux.target_files import TargetFileRefused, read_held_file
from .probes.log_lines import CONTEXT, READ_MAX, TemplateMemory, fill_lines, split_lines
from .targets import ParentCache

__all__ = ["TreeSampler", "socket_inodes"]


def fd_links(pid: int, root: str = "/proc") -> Optional[Dict[int, str]]:
    """{fd: link target} from /proc/PID/fd, None when unreadable."""
    base = f"{root}/{pid}/fd"
    try:
        names = os.listdir(base)
    except OSError:
        return None
    out: Dict[int, str] = {}
    for n in names:
        try:
            out[int(n)] = os.readlink(f"{base}/{n}")
        except (OSError, ValueError):
            continue
    return out


def socket_inodes(pid: int, root: str = "/proc") -> Optional[Set[int]]:
    """Inodes of the sockets ``pid`` holds (from /proc/PID/fd links), None when unreadable."""
    links = fd_links(pid, root)
    return None if links is None else _socket_inodes(links)


def _socket_inodes(links: Dict[int, str]) -> Set[int]:
    out = set()
    for link in links.values():
        if link.startswith("socket:[") and link.endswith("]"):
            try:
                out.add(int(link[8:-1]))
            except ValueError:
                pass
    return out


STD_OUTPUTS = (1, 2)


def _open_nvml() -> Any:
    from ..gpu.nvml import open_nvml
    return open_nvml()


class TreeSampler:
    """Takes looks at one tree (module doc)."""

    def __init__(self, roots: List[int], name: Optional[str] = None, *, root: str = "/proc",
                 cgroup: Optional[str] = None, container: Optional[str] = None,
                 fd_interval: float = 5.0, rescan_s: float = 5.0, tcp: bool = True,
                 nvml: Optional[Callable[[], Any]] = _open_nvml) -> None:
        self.roots = list(roots)
        self.name = name
        self.cgroup, self.container = cgroup, container
        self.root = root
        self.fd_interval, self.rescan_s = fd_interval, rescan_s
        self.notes: List[str] = []
        self.looks = 0
        self.busy_s = 0.0
        self._me = os.getpid()
        self._parents = ParentCache()
        self._own_io = ReapedIO()
        self._tracked: Dict[int, int] = {}            # pid -> stat starttime
        self._inodes: Dict[int, Set[int]] = {}        # pid -> socket inodes
        self._files: Dict[int, List[int]] = {}         # pid -> fds that may be logs (1, 2, files)
        self._next_fds: Dict[int, float] = {}
        self._positions: Dict[int, Dict[int, tuple]] = {}     # pid -> the last look's positions
        self._memory: Dict[tuple, TemplateMemory] = {}      # (pid, fd, path) -> lines seen
        self._next_rescan = 0.0
        self._tcp = tcp
        self._noted: Set[str] = set()
        self._netns = self._ns(self._me)
        self._nvml = None
        if nvml is not None:
            try:
                self._nvml = nvml()
            except Exception as exc:   # no GPU, no library: never a reason to stop watching
                self.nvml_why = str(exc)
            else:
                self.nvml_why = ""

    # ------------------------------------------------------------------ helpers
    def _note(self, key: str, text: str) -> None:
        if key not in self._noted:
            self._noted.add(key)
            self.notes.append(text)

    def _ns(self, pid: int) -> Optional[str]:
        try:
            return os.readlink(f"{self.root}/{pid}/ns/net")
        except OSError:
            return None

    def pids(self) -> List[int]:
        return sorted(self._tracked)

    def tree_roots(self, look: TreeLook) -> List[int]:
        """The processes of ``look`` whose parent is not in it (what to record)."""
        ppid = self._parents.ppid
        return sorted(p for p in look.processes if ppid.get(p) not in look.processes)

    def _mine(self, tree: Dict[int, List[int]]) -> Set[int]:
        """This process, its ancestors (a shell or ``timeout`` whose command line holds the
        --name pattern too) and its descendants: never part of the watched tree."""
        out = {self._me} | set(procfs.descendants([self._me], self.root, tree=tree))
        pid = self._parents.ppid.get(self._me, 0)
        while pid > 1 and pid not in out:
            out.add(pid)
            pid = self._parents.ppid.get(pid, 0)
        return out

    def _discover(self, now: float) -> None:
        tree = self._parents.refresh(self.root)
        mine = self._mine(tree)
        if (self.name or self.cgroup or self.container) and now >= self._next_rescan:
            self._next_rescan = now + self.rescan_s
            for pid in self._selected():
                if pid not in self.roots and pid not in mine:
                    self.roots.append(pid)
        alive = [p for p in self.roots if p in self._parents.ppid] + list(self._tracked)
        for pid in set(alive) | set(procfs.descendants(alive, self.root, tree=tree)):
            if pid not in mine and pid not in self._tracked:
                st = procfs.read_stat(pid, root=self.root)
                if st is not None and st.state not in ("Z", "X"):
                    self._tracked[pid] = st.starttime

    def _selected(self) -> List[int]:
        """The processes --name, --cgroup and --container select now (new ones join)."""
        out = processes.select_by_name(self.name, root=self.root)[0] if self.name else []
        try:
            if self.cgroup:
                out += select_by_cgroup(self.cgroup, root=self.root)[0]
            if self.container:
                out += select_by_container(self.container, root=self.root)[0]
        except HangtraceError:          # the cgroup is gone, the prefix now ambiguous
            pass
        return out

    def _look_process(self, pid: int, now: float) -> Optional[ProcessLook]:
        io = procfs.read_io(pid, self.root, ts=now)       # before stat: linux/reaped_io.py
        st = procfs.read_stat(pid, root=self.root)
        if st is None or st.state in ("Z", "X") or st.starttime != self._tracked[pid]:
            self._own_io.ended(pid, io if st is not None and st.state == "Z" else None)
            return None                 # gone, a zombie, or its pid now names another process
        if io is None:
            self._note(f"io{pid}", f"/proc/{pid}/io is not readable: output and input of pid "
                       f"{pid} ({st.comm}) are not watched (run as its user or as root)")
        else:   # its own: without the children it reaped
            io = self._own_io.own(io, st, lambda child: procfs.reaped(child, self.root))
        if now >= self._next_fds.get(pid, 0.0):
            self._next_fds[pid] = now + self.fd_interval
            links = fd_links(pid, self.root)
            # the files it may log to: stdout, stderr and every other regular file
            self._files[pid] = sorted(set(STD_OUTPUTS) | {
                fd for fd, link in (links or {}).items() if link.startswith("/")
                and not link.startswith(("/dev/", "/proc/", "/sys/"))})
            inodes = None if links is None else _socket_inodes(links)
            if not self._tcp:
                inodes = set()
            elif inodes is None:
                self._note(f"fd{pid}", f"/proc/{pid}/fd is not readable: sockets of pid {pid} "
                           "are not watched")
            elif inodes and self._ns(pid) != self._netns:
                self._note(f"ns{pid}", f"pid {pid} is in another network namespace: its TCP "
                           "sockets are not watched (run hangtrace in its namespace, e.g. as a "
                           "sidecar)")
                inodes = set()
            self._inodes[pid] = inodes or set()
        positions = written_positions(pid, self._files.get(pid, STD_OUTPUTS), self.root)
        lines = self._new_lines(pid, positions, now)
        return ProcessLook(pid=pid, start_time=st.starttime, cpu_ticks=st.utime + st.stime,
                           io=io, ticks_hz=procfs.TICKS_HZ, comm=st.comm, state=st.state,
                           threads=st.num_threads, positions=positions, lines=lines,
                           faults=st.minflt + st.majflt,
                           rss_bytes=st.rss_pages * procfs.PAGE_SIZE)

    def _new_lines(self, pid: int, positions: Dict[int, tuple], now: float
                   ) -> Dict[int, LogLines]:
        """fd -> LogLines of what each file gained since the last look (``look``)."""
        before = self._positions.get(pid, {})
        self._positions[pid] = positions
        out: Dict[int, LogLines] = {}
        for fd, (path, pos) in positions.items():
            key = (pid, fd, path)
            memory = self._memory.get(key)
            old = before.get(fd)
            grew = old[1] if old is not None and old[0] == path and pos > old[1] else None
            if memory is not None and grew is None:
                continue
            try:
                got = read_held_file(pid, fd, tail=READ_MAX if memory else CONTEXT,
                                     seconds=0.5, root=self.root)
            except TargetFileRefused as exc:
                self._note(f"lines{pid}:{fd}", f"pid {pid}'s {path}: {exc}: its lines are not "
                           "read (any growth counts as output)")
                continue
            if memory is None:             # the first look: what is there is the context
                memory = self._memory[key] = TemplateMemory()
                memory.remember(split_lines(got.data, b"")[0])
                continue
            out[fd] = fill_lines(LogLines(ts=now, pid=pid, fd=fd, path=path), got.data,
                                 pos - grew, memory)
        return out

    # ------------------------------------------------------------------ the look
    def look(self) -> TreeLook:
        """One look at the tree. Per process it reads two small files, /proc/PID/stat and
        /proc/PID/io, whatever its number of threads (the kernel sums them), and the positions of
        the files it may log to (fds 1 and 2 and its other regular files: a readlink and
        /proc/PID/fdinfo each), so that output in writes of a few bytes (PYTHONUNBUFFERED) is seen.
        Every ``fd_interval`` seconds it lists /proc/PID/fd (readlink only, nothing is stat()ed)
        for the inodes of the tree's sockets and those files. A file whose position advanced since
        the last look has its new bytes read (at most log_lines.READ_MAX, as the process may read
        them: target_files.read_held_file) and reduced to line templates against every earlier
        look's lines (``ProcessLook.lines``, ``_new_lines``), so that the rules tell news from a
        heartbeat. The TCP table is dumped through sock_diag at each look while the tree holds a
        socket; NVML, where it opens, is read once a look."""
        t0 = time.perf_counter()
        now = time.time()
        self._discover(now)
        out = TreeLook(ts=now)
        for pid in list(self._tracked):
            p = self._look_process(pid, now)
            if p is None:               # gone: forget it (a root too: its pid may be reused)
                del self._tracked[pid]
                self._inodes.pop(pid, None)
                self._files.pop(pid, None)
                self._next_fds.pop(pid, None)
                self._positions.pop(pid, None)
                for key in [k for k in self._memory if k[0] == pid]:
                    del self._memory[key]
                if pid in self.roots:
                    self.roots.remove(pid)
            else:
                out.processes[pid] = p
        out.owners = {i: pid for pid, inodes in self._inodes.items() for i in inodes}
        if out.owners:
            from ..linux.tcpdiag import tcp_sockets
            out.sockets = tcp_sockets()
            if out.sockets is None:
                self._note("tcp", "sock_diag refused the TCP table: bytes sent and accepted "
                           "connections are not watched")
            else:
                out.listening = frozenset(s.local for s in out.sockets.values()
                                          if s.state == "LISTEN" and s.inode in out.owners)
        if self._nvml is not None:
            try:
                out.gpus = self._nvml.read(now)
            except Exception as exc:
                self._note("nvml", f"NVML read failed: {exc}; GPU utilization is not watched")
                self.close()
        self.looks += 1
        self.busy_s += time.perf_counter() - t0
        return out

    def close(self) -> None:
        nv, self._nvml = self._nvml, None
        if nv is not None:
            try:
                nv.close()
            except Exception:
                pass
