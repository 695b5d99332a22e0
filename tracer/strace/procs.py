"""The process table an strace log implies: tid -> pid, process lifecycles, fd tables.

Contract (used by convert.py, one table per converter):
- ``discover(tid, ts, out)`` places a tid seen for the first time (its docstring says how); one
  in ``alone`` is its own group (pid = its tid), never folded into another process by a guess.
- ``new_child``/``exec``/``exit``/``reaped`` apply clone/fork/vfork results, a successful
  execve, the ``+++ exited/killed +++`` markers and a wait call that returned a child with its
  status (``REAP_CALLS``: it exited, its own lines or not), appending ThreadStart, ProcessInfo,
  ProcessExec, ThreadExit and ProcessExit events to ``out``; ``fds`` (fdtable.py) follows them.
- ``attached(tid)``: strace's "Process P attached" of a task no clone made: P is traced from
  here on, its process ``threads_partial`` while P is its one thread. ``only_alive()`` is the
  one tid still traced when exactly one is (strace prints no pid column then), else None.
"""
from __future__ import annotations

import re
from typing import Callable, Dict, List, Optional, Set, Tuple

from .. import events as ev
from .args import unescape
from .fdtable import FdTables

__all__ = ["ProcessTable", "REAP_CALLS", "reap_status"]

REAP_CALLS = frozenset({"wait4", "waitpid", "waitid"})
_EXITED = re.compile(r"WEXITSTATUS\(s\) == (\d+)")
_SIGNALED = re.compile(r"WTERMSIG\(s\) == (SIG[A-Z0-9+]+)")
_SIGINFO = re.compile(r"si_code=CLD_(EXITED|KILLED|DUMPED), si_pid=(\d+)(?:, si_uid=\d+)?, "
                      r"si_status=(\w+)")


def reap_status(name: str, args: str, ret: Optional[int]
                ) -> Optional[Tuple[int, Optional[int], Optional[str], bool]]:
    """(child pid, exit status, signal, core dumped) of a wait call that reaped a child, as
    strace prints it: ``wait4(-1, [{WIFEXITED(s) && WEXITSTATUS(s) == 3}], 0, NULL) = 4156``,
    ``[{WIFSIGNALED(s) && WTERMSIG(s) == SIGTERM && WCOREDUMP(s)}]``, or waitid's siginfo
    (``si_code=CLD_EXITED, si_pid=N, ..., si_status=3``); None for anything else (no child,
    WNOHANG's 0, a stopped child, a status strace did not decode)."""
    if name == "waitid":
        m = _SIGINFO.search(args)
        if ret != 0 or m is None:
            return None
        if m.group(1) == "EXITED":
            return (int(m.group(2)), int(m.group(3)), None, False) \
                if m.group(3).isdigit() else None
        return int(m.group(2)), None, m.group(3), m.group(1) == "DUMPED"
    if ret is None or ret <= 0:
        return None
    m = _EXITED.search(args)
    if m is not None and "WIFEXITED" in args:
        return ret, int(m.group(1)), None, False
    m = _SIGNALED.search(args)
    if m is not None and "WIFSIGNALED" in args:
        return ret, None, m.group(1), "WCOREDUMP" in args
    return None


class ProcessTable:
    def __init__(self, pid_of: Optional[Callable[[int], Optional[int]]] = None,
                 root_pid: Optional[int] = None, alone: Optional[Set[int]] = None) -> None:
        self.pid_of = pid_of
        self.root_pid = root_pid
        self.alone: Set[int] = set(alone or ())
        self.tid_pid: Dict[int, int] = {}
        self.processes: Dict[int, ev.ProcessInfo] = {}
        self.pending_clones: Dict[int, str] = {}               # parent tid -> clone args
        self.fds = FdTables()
        self._live: Dict[int, Set[int]] = {}                    # pid -> live tids
        self._alive: Set[int] = set()                           # every live tid
        self._exiting: Set[int] = set()                         # exit_group seen / killed
        self._exited: Set[int] = set()                          # ProcessExit emitted

    def attached(self, tid: int, ts: float, out: List[ev.Event]) -> None:
        """strace's "Process P attached": P is traced from here on (a later session of a pasted
        log starts so), as a thread of the process its membership names.
        Its process is ``threads_partial`` (ProcessInfo) while P is its one thread: strace -p P
        without -f traces that thread only ("with N threads" messages attach them all)."""
        if tid in self._exited:
            return
        if tid in self.tid_pid:
            self.register(tid, self.tid_pid[tid], ts)
            return
        clone = bool(self.pending_clones)
        pid = self.discover(tid, ts, out)
        info = self.processes.get(pid)
        if not clone and info is not None and list(info.threads) == [tid]:
            # an attach target named alone (no "with N threads"): strace -p TID without -f
            # traces that one thread of a process that may have more
            info.threads_partial = True

    def detached(self, tid: int) -> None:
        """strace's "Process P detached": no line after it is P's until it is attached again."""
        self._alive.discard(tid)

    def only_alive(self) -> Optional[int]:
        if len(self._alive) == 1:
            return next(iter(self._alive))
        return None

    def _process(self, pid: int, ppid: int, ts: float) -> ev.ProcessInfo:
        info = self.processes.get(pid)
        if info is None:
            info = self.processes[pid] = ev.ProcessInfo(ts, pid, ppid)
            self._live[pid] = set()
        return info

    def register(self, tid: int, pid: int, ts: float, ppid: int = 0) -> ev.ProcessInfo:
        self.tid_pid[tid] = pid
        info = self._process(pid, ppid, ts)
        info.threads.setdefault(tid, "")
        self._live[pid].add(tid)
        self._alive.add(tid)
        return info

    def discover(self, tid: int, ts: float, out: List[ev.Event]) -> int:
        """First sight of a tid; returns its pid: the child of an in-flight clone (strace -f may
        print the child's first line before the parent's clone returns), else ``pid_of(tid)`` (the
        live backend reads /proc; the importer passes what the log's first pass proved,
        strace/scan.py), else ``root_pid``, else the first tid seen. A tid in ``alone`` is one
        whose process the log does not show: its ProcessInfo says ``pid_unknown``."""
        if self.pending_clones:
            # Attribute the tid to the most recent in-flight clone; its own result will then
            # name this tid and be skipped.
            parent_tid, cargs = self.pending_clones.popitem()
            self.new_child(parent_tid, tid, cargs, ts, out)
            return self.tid_pid[tid]
        if tid in self.alone or tid == 0:
            # (tid 0: lines without a pid column in a log that names no task)
            info = self.register(tid, tid, ts)
            info.pid_unknown = True
            return tid
        pid: Optional[int] = None
        if self.pid_of is not None:
            pid = self.pid_of(tid)
        if pid is None:
            if self.root_pid is None:
                self.root_pid = tid
            pid = self.root_pid
        self.register(tid, pid, ts)
        return pid

    def new_child(self, parent_tid: int, child: int, clone_args: str, ts: float,
                  out: List[ev.Event]) -> None:
        parent_pid = self.tid_pid.get(parent_tid, parent_tid)
        if "CLONE_THREAD" in clone_args:
            self.register(child, parent_pid, ts)
            out.append(ev.ThreadStart(ts, parent_pid, child, parent_tid, False))
            return
        parent = self.processes.get(parent_pid)
        info = self.register(child, child, ts, parent_pid)
        if parent is not None:       # a fork child runs the parent's program until it execs
            info.comm = parent.comm
            info.cmdline = list(parent.cmdline)
        self.fds.fork(parent_pid, child, shared="CLONE_FILES" in clone_args)
        out.append(ev.ThreadStart(ts, child, child, parent_tid, True))
        out.append(self.snapshot(info, ts))

    @staticmethod
    def snapshot(info: ev.ProcessInfo, ts: float) -> ev.ProcessInfo:
        return ev.ProcessInfo(ts, info.pid, info.ppid, info.comm, list(info.cmdline),
                              dict(info.threads), pid_unknown=info.pid_unknown,
                              threads_partial=info.threads_partial)

    def exec(self, pid: int, tid: int, filename: str, argv: List[str], ts: float,
             out: List[ev.Event]) -> None:
        out.append(ev.ProcessExec(ts, pid, tid, filename, argv))
        info = self._process(pid, 0, ts)
        base = (argv[0] if argv else filename).rsplit("/", 1)[-1]
        info.comm = (filename.rsplit("/", 1)[-1] or base)[:15]
        info.cmdline = argv
        # execve kills every other thread of the process; the exec'ing thread becomes the leader.
        for other in self._live.get(pid, ()):
            if other != pid:
                self._alive.discard(other)
        info.threads = {pid: ""}
        self._live[pid] = {pid}
        self._alive.add(pid)
        self.fds.exec(pid)
        out.append(self.snapshot(info, ts))

    def exiting(self, pid: int) -> None:
        self._exiting.add(pid)

    def exit(self, pid: int, tid: int, kind: str, status: Optional[int], signal: Optional[str],
             core: bool, ts: float, out: List[ev.Event]) -> None:
        """A ``+++ exited/killed/superseded +++`` marker of ``tid``."""
        out.append(ev.ThreadExit(ts, pid, tid))
        self._alive.discard(tid)
        live = self._live.get(pid)
        if live is not None:
            live.discard(tid)
        if kind == "killed":
            self._exiting.add(pid)
            if pid not in self._exited:
                self._exited.add(pid)
                self._gone(pid)
                out.append(ev.ProcessExit(ts, pid, None, signal, core))
            return
        if status is None:           # "superseded by execve": only this tid is gone
            return
        # The kernel reports the leader's exit only after all other threads are gone, so the
        # leader's "+++ exited" (or the last thread after exit_group) is the process's end.
        if pid not in self._exited and (tid == pid or (pid in self._exiting and not live)):
            self._exited.add(pid)
            self._gone(pid)
            out.append(ev.ProcessExit(ts, pid, status, None, False))

    def reaped(self, pid: int, name: str, args: str, ret: Optional[int], ts: float,
               out: List[ev.Event]) -> None:
        """Process ``pid``'s wait call returned a child with its status (``reap_status``): the
        child exited. Its own ``+++`` line, when the log has it, came first; otherwise its
        threads end here, and a child the log never showed is placed as ``pid``'s child."""
        got = reap_status(name, args, ret)
        if got is None or got[0] in self._exited or got[0] <= 0:
            return
        child, status, sig, core = got
        if child not in self.processes:
            info = self.register(child, child, ts, pid)
            out.append(self.snapshot(info, ts))
        for tid in sorted(self._live.get(child, ())) or [child]:
            out.append(ev.ThreadExit(ts, child, tid))
        self._exited.add(child)
        self._gone(child)
        self._live[child] = set()
        out.append(ev.ProcessExit(ts, child, status, sig, core))

    def prctl(self, pid: int, tid: int, args: str) -> None:
        """prctl(PR_SET_NAME, "cuda-EvtHandlr"): the thread's comm."""
        if args.startswith("PR_SET_NAME, "):
            m = ev.STRING_LITERAL.search(args)
            info = self.processes.get(pid)
            if m and info is not None:
                info.threads[tid] = unescape(m.group(1))[:15]

    def _gone(self, pid: int) -> None:
        for t in self._live.get(pid, ()):
            self._alive.discard(t)
        self.fds.exit(pid)

