"""Stateful conversion of parsed strace lines (lines.py) into events.py events.

Contract:
- ``StraceConverter(pid_of=None, base_date=None, root_pid=None)``; feed lines in log order with
  ``feed(line)`` (or ``feed_text(text)``, which also counts unparseable lines); each call returns
  the events that line completes. ``finish(end_ts)`` returns the rest: every call still
  unfinished becomes an event with ``ongoing=True``, ``ret=None`` and ``dur = end_ts - start``
  (the thread is still blocked in it: key evidence), plus one ``Lost`` when lines were unparsed.
- Pairs ``<unfinished ...>`` / ``<... resumed>`` per tid: the event has the start timestamp, the
  merged argument text and the -T duration of the resumed half (else the difference of the two
  timestamps).
- tid -> pid: clone/clone3 with CLONE_THREAD make a thread of the parent's process;
  fork/vfork/clone without it make a new process (``ThreadStart(new_process=True)`` and a
  ``ProcessInfo``). A tid of unknown origin is resolved by ``pid_of(tid)`` when given (the live
  backend reads /proc/TID/status), else it belongs to ``root_pid`` (the importer passes the
  smallest unknown-origin tid found by a first pass: true of ``strace -f -p PID`` logs), else to
  the first unknown tid seen.
- ``processes`` (pid -> ProcessInfo) and ``capabilities`` describe what the log held, for the
  trace header. Logs without a pid column put everything in pid/tid 0; logs without timestamps
  give ts 0.0 (``capabilities`` says so).
"""
from __future__ import annotations

import codecs
import datetime as _dt
import re
import time
from typing import Callable, Dict, List, Optional, Set, Tuple

from ... import events as ev
from .decode import parse_fd, split_args, to_event
from .lines import StraceLine, parse_line

__all__ = ["StraceConverter"]

_CLONES = frozenset({"clone", "clone3", "fork", "vfork"})
_SPECIAL = _CLONES | frozenset({"execve", "execveat", "exit_group", "prctl", "epoll_ctl"})
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
# The commonest line shape: "TID  EPOCH.US name(args) = 0 [(text)] <0.000012>" (complete calls,
# and resumed halves which the fast path hands to the full parser). The only backtracking is
# ".*" giving back the short result tail.
# Numbers are bounded (a tid of at most 10 digits, a ts of at most 12.9): a longer one takes
# the full parser, which refuses it, so a corrupt line can never make an infinite ts or an
# integer of thousands of digits (int() refuses those with ValueError).
_FAST_UNFINISHED = re.compile(
    r"(\d{1,10}) +(\d{1,12}\.\d{1,9}) (\w+)\((.*)<unfinished \.\.\.>\n?$").match
_FAST = re.compile(r"(\d{1,10}) +(\d{1,12}\.\d{1,9}) (?:<\.\.\. (\w+) resumed>|(\w+)\()(.*)\) += "
                   r"(-?\d{1,20}|0x[0-9a-f]{1,16})(?: \([^()]*\))? <(\d{1,12}\.\d{1,9})>\n?$").match


def _unescape(text: str) -> str:
    """strace prints C escapes (\\n, \\33, \\x1b, \\"); argv is a command line, keep it readable."""
    if "\\" not in text:
        return text
    try:
        raw = codecs.escape_decode(text.encode("utf-8", "surrogateescape"))[0]
        return raw.decode("utf-8", "surrogateescape")  # type: ignore[union-attr]
    except (ValueError, UnicodeError):
        return text


def _exec_args(args: str) -> Tuple[str, List[str]]:
    """``"/usr/bin/true", ["true", "arg1"], 0x7ffd /* 35 vars */`` -> (filename, argv)."""
    m = _STRING.search(args)
    if not m:
        return "", []
    filename = _unescape(m.group(1))
    lb = args.find("[", m.end())
    if lb < 0:
        return filename, []
    argv: List[str] = []
    pos = lb + 1
    while True:
        m2 = _STRING.match(args, pos)
        if not m2:
            break
        item = _unescape(m2.group(1))
        pos = m2.end()
        if args.startswith("...", pos):     # strace truncated this string (-s)
            item += "..."
            pos += 3
        argv.append(item)
        if not args.startswith(", ", pos):
            break
        pos += 2
    return filename, argv


class StraceConverter:
    """Feed StraceLines in order; collect events. Not thread-safe (one reader feeds it)."""

    def __init__(self, pid_of: Optional[Callable[[int], Optional[int]]] = None,
                 base_date: Optional[_dt.date] = None, root_pid: Optional[int] = None) -> None:
        self._pid_of = pid_of
        self._root_pid = root_pid
        day = base_date or _dt.date.today()
        self._midnight = time.mktime((day.year, day.month, day.day, 0, 0, 0, 0, 0, -1))
        self._day_offset = 0.0
        self._last_tod: Optional[float] = None
        self._tid_pid: Dict[int, int] = {}
        self._pending: Dict[int, Tuple[float, str, str]] = {}   # tid -> (start ts, name, args)
        self._pending_clones: Dict[int, str] = {}               # parent tid -> clone args
        self._live: Dict[int, Set[int]] = {}                    # pid -> live tids
        self._exiting: Set[int] = set()                         # exit_group seen / killed
        self._exited: Set[int] = set()                          # ProcessExit emitted
        self._epoll: Dict[Tuple[int, int], List[str]] = {}      # (pid, epfd) -> fd kinds
        self.processes: Dict[int, ev.ProcessInfo] = {}
        self.unparsed = 0
        self.bad_sample = ""
        self.lines = 0
        self.first_ts: Optional[float] = None
        self.last_ts: Optional[float] = None
        self._has_ts = self._has_dur = self._has_fd = self._has_pid = False
        self._finished = False

    # ------------------------------------------------------------------ public
    @property
    def capabilities(self) -> Dict[str, bool]:
        """What the log held: -t/-tt/-ttt timestamps, -T durations, -y fd paths, -f pid column."""
        return {"timestamps": self._has_ts, "durations": self._has_dur,
                "fd_paths": self._has_fd, "pids": self._has_pid}

    def feed_text(self, text: str) -> List[ev.Event]:
        """Parse and feed one raw line; blank lines are ignored, unparseable ones counted.

        Never raises for what a line holds: a line whose values cannot be used (a number too
        large for int(), say) is counted as not understood, like any other bad line."""
        try:
            return self._feed_text(text)
        except (ValueError, OverflowError, IndexError):
            self._unparsed(text)
            return []

    def _unparsed(self, text: str) -> None:
        if text.strip():
            self.unparsed += 1
            if not self.bad_sample:
                self.bad_sample = text.rstrip("\r\n")[:200]

    def _feed_text(self, text: str) -> List[ev.Event]:
        m = _FAST(text)
        if m is not None:
            # Fast path for the commonest shapes of a -f -ttt -T log; the result is exactly
            # what parse_line + feed give (tests compare both), without the StraceLine.
            tid_s, ts_s, rname, name, args, ret_s, dur_s = m.groups()
            tid = int(tid_s)
            if rname is None and name not in _SPECIAL:
                ts = self._fast_head(tid, float(ts_s))
                self._has_dur = True
                ret = int(ret_s, 16) if ret_s[1:2] == "x" else int(ret_s)
                pid = self._tid_pid.get(tid)
                out: List[ev.Event] = []
                if pid is None:
                    pid = self._discover(tid, ts, out)
                out.append(self._event(pid, tid, name, args, ret, None, float(dur_s), ts, False))
                return out
            pending = self._pending.get(tid)
            pid = self._tid_pid.get(tid)
            if (rname is not None and rname not in _SPECIAL and pending is not None
                    and pending[1] == rname and pid is not None):
                self._fast_head(tid, float(ts_s))
                self._has_dur = True
                del self._pending[tid]
                ret = int(ret_s, 16) if ret_s[1:2] == "x" else int(ret_s)
                return [self._event(pid, tid, rname, pending[2] + args, ret, None,
                                    float(dur_s), pending[0], False)]
        else:
            m = _FAST_UNFINISHED(text)
            if m is not None:
                tid_s, ts_s, name, args = m.groups()
                tid = int(tid_s)
                pid = self._tid_pid.get(tid)
                if pid is not None and tid not in self._pending and name not in _CLONES:
                    self._pending[tid] = (self._fast_head(tid, float(ts_s)), name,
                                          args[:-1] if args[-1:] == " " else args)
                    return []
        line = parse_line(text)
        if line is None:
            self._unparsed(text)
            return []
        return self.feed(line)

    def feed(self, line: StraceLine) -> List[ev.Event]:
        """Events completed by this line (often one, sometimes none or several)."""
        self.lines += 1
        ts = line.ts
        if ts is None:
            ts = 0.0
        else:
            self._has_ts = True
            if line.time_of_day:
                ts = self._from_time_of_day(ts)
            if self.first_ts is None:
                self.first_ts = ts
            self.last_ts = ts
        tid = line.tid
        if tid is None:
            tid = 0
        else:
            self._has_pid = True
        if line.dur is not None:
            self._has_dur = True
        out: List[ev.Event] = []
        pid = self._tid_pid.get(tid)
        if pid is None:
            pid = self._discover(tid, ts, out)
        kind = line.kind
        if kind == "call":
            self._syscall(pid, tid, line.name, line.args, line, ts, ts, line.dur, out)
        elif kind == "unfinished":
            old = self._pending.pop(tid, None)
            if old is not None:     # the resumed half never came: keep the call, result unknown
                out.append(self._event(pid, tid, old[1], old[2], None, None, None, old[0], False))
            self._pending[tid] = (ts, line.name, line.args)
            if line.name in _CLONES:
                self._pending_clones[tid] = line.args
        elif kind == "resumed":
            self._resumed(pid, tid, line, ts, out)
        elif kind == "exited" or kind == "killed":
            self._exit(pid, tid, line, ts, out)
        elif kind == "signal":
            out.append(ev.SignalDelivered(ts, pid, tid, line.signal or "", line.si_pid))
        return out

    def finish(self, end_ts: Optional[float] = None) -> List[ev.Event]:
        """Calls still in flight become ``ongoing`` events; then the ``Lost`` count, if any."""
        if self._finished:
            return []
        self._finished = True
        end = end_ts if end_ts is not None else (self.last_ts or 0.0)
        out: List[ev.Event] = []
        for tid, (start, name, args) in sorted(self._pending.items(), key=lambda kv: kv[1][0]):
            pid = self._tid_pid.get(tid, tid)
            dur = max(0.0, end - start) if self._has_ts else None
            out.append(self._event(pid, tid, name, args.rstrip(", "), None, None, dur, start,
                                   True))
        self._pending.clear()
        if self.unparsed:
            out.append(ev.Lost(end, self.unparsed, "unparsed strace lines", self.bad_sample))
        return out

    # ------------------------------------------------------------------ internals
    def _fast_head(self, tid: int, ts: float) -> float:
        """Bookkeeping of ``feed`` for a fast-path line (epoch ts, pid column, -T)."""
        self.lines += 1
        if self.first_ts is None:
            self.first_ts = ts
        self._has_ts = self._has_pid = True
        self.last_ts = ts
        return ts

    def _from_time_of_day(self, tod: float) -> float:
        # -t/-tt print local wall-clock time of day; a jump back by more than 12 h is the log
        # running past midnight (strace output is in time order, give or take microseconds).
        if self._last_tod is not None and tod < self._last_tod - 43200:
            self._day_offset += 86400.0
        self._last_tod = tod
        return self._midnight + self._day_offset + tod

    def _process(self, pid: int, ppid: int, ts: float) -> ev.ProcessInfo:
        info = self.processes.get(pid)
        if info is None:
            info = self.processes[pid] = ev.ProcessInfo(ts, pid, ppid)
            self._live[pid] = set()
        return info

    def _register(self, tid: int, pid: int, ts: float, ppid: int = 0) -> ev.ProcessInfo:
        self._tid_pid[tid] = pid
        info = self._process(pid, ppid, ts)
        info.threads.setdefault(tid, "")
        self._live[pid].add(tid)
        return info

    def _discover(self, tid: int, ts: float, out: List[ev.Event]) -> int:
        """First sight of a tid: child of an in-flight clone, else pid_of / root pid."""
        if self._pending_clones:
            # strace -f may print the child's first syscall before the parent's clone returns
            # (always so for vfork, which blocks the parent). Attribute the tid to the most
            # recent in-flight clone; its own result will then name this tid and be skipped.
            parent_tid, cargs = self._pending_clones.popitem()
            self._new_child(parent_tid, tid, cargs, ts, out)
            return self._tid_pid[tid]
        pid: Optional[int] = None
        if self._pid_of is not None:
            pid = self._pid_of(tid)
        if pid is None:
            if self._root_pid is None:
                self._root_pid = tid
            pid = self._root_pid
        self._register(tid, pid, ts)
        return pid

    def _new_child(self, parent_tid: int, child: int, clone_args: str, ts: float,
                   out: List[ev.Event]) -> None:
        parent_pid = self._tid_pid.get(parent_tid, parent_tid)
        if "CLONE_THREAD" in clone_args:
            self._register(child, parent_pid, ts)
            out.append(ev.ThreadStart(ts, parent_pid, child, parent_tid, False))
            return
        parent = self.processes.get(parent_pid)
        info = self._register(child, child, ts, parent_pid)
        if parent is not None:       # a fork child runs the parent's program until it execs
            info.comm = parent.comm
            info.cmdline = list(parent.cmdline)
        out.append(ev.ThreadStart(ts, child, child, parent_tid, True))
        out.append(self._snapshot(info, ts))

    @staticmethod
    def _snapshot(info: ev.ProcessInfo, ts: float) -> ev.ProcessInfo:
        return ev.ProcessInfo(ts, info.pid, info.ppid, info.comm, list(info.cmdline),
                              dict(info.threads))

    def _event(self, pid: int, tid: int, name: str, args: str, ret: Optional[int],
               err: Optional[str], dur: Optional[float], ts: float, ongoing: bool) -> ev.Syscall:
        e = to_event(pid, tid, name, args, ret, err, dur, ts, ongoing)
        if e.fd_kind is not None:
            self._has_fd = True
        if e.TAG == "pl":
            if e.fd_kinds:  # type: ignore[attr-defined]
                self._has_fd = True
            elif e.fd is not None:     # epoll: the kinds registered with epoll_ctl, when seen
                kinds = self._epoll.get((pid, e.fd))
                if kinds:
                    e.fd_kinds = tuple(kinds)  # type: ignore[attr-defined]
        return e

    def _resumed(self, pid: int, tid: int, line: StraceLine, ts: float,
                 out: List[ev.Event]) -> None:
        pending = self._pending.pop(tid, None)
        dur = line.dur
        if pending is not None and pending[1] == line.name:
            start, _, head = pending
            if dur is None and line.ts is not None:
                dur = max(0.0, ts - start)
            self._syscall(pid, tid, line.name, head + line.args, line, start, ts, dur, out)
            return
        if pending is not None:      # mismatched halves (should not happen): keep both
            out.append(self._event(pid, tid, pending[1], pending[2], None, None, None,
                                   pending[0], False))
        # The log began while this call was in flight: its start is end minus duration.
        start = ts - dur if dur is not None else ts
        self._syscall(pid, tid, line.name, line.args, line, start, ts, dur, out)

    def _syscall(self, pid: int, tid: int, name: str, args: str, line: StraceLine,
                 start: float, end: float, dur: Optional[float], out: List[ev.Event]) -> None:
        ret = line.ret
        out.append(self._event(pid, tid, name, args, ret, line.err, dur, start, False))
        if name not in _SPECIAL:
            return
        if name in _CLONES:
            self._pending_clones.pop(tid, None)
            if ret is not None and ret > 0 and ret not in self._tid_pid:
                self._new_child(tid, ret, args, end, out)
        elif name == "execve" or name == "execveat":
            if ret == 0:
                self._exec(pid, tid, args, start, out)
        elif name == "exit_group":
            self._exiting.add(pid)
        elif name == "prctl":
            # prctl(PR_SET_NAME, "cuda-EvtHandlr"): the thread's comm
            if args.startswith("PR_SET_NAME, "):
                m = _STRING.search(args)
                info = self.processes.get(pid)
                if m and info is not None:
                    info.threads[tid] = _unescape(m.group(1))[:15]
        elif name == "epoll_ctl" and ret == 0:
            parts = split_args(args)
            if len(parts) >= 3 and parts[1] == "EPOLL_CTL_ADD":
                epfd = parse_fd(parts[0])[0]
                kind = parse_fd(parts[2])[1]
                if epfd is not None and kind is not None:
                    kinds = self._epoll.setdefault((pid, epfd), [])
                    if kind not in kinds:
                        kinds.append(kind)

    def _exec(self, pid: int, tid: int, args: str, ts: float, out: List[ev.Event]) -> None:
        filename, argv = _exec_args(args)
        out.append(ev.ProcessExec(ts, pid, tid, filename, argv))
        info = self._process(pid, 0, ts)
        base = (argv[0] if argv else filename).rsplit("/", 1)[-1]
        info.comm = (filename.rsplit("/", 1)[-1] or base)[:15]
        info.cmdline = argv
        # execve kills every other thread of the process; the exec'ing thread becomes the leader.
        info.threads = {pid: ""}
        self._live[pid] = {pid}
        self._epoll = {k: v for k, v in self._epoll.items() if k[0] != pid}
        out.append(self._snapshot(info, ts))

    def _exit(self, pid: int, tid: int, line: StraceLine, ts: float,
              out: List[ev.Event]) -> None:
        stale = self._pending.pop(tid, None)
        if stale is not None:        # "+++ exited" with a call still open: it never returned
            out.append(self._event(pid, tid, stale[1], stale[2].rstrip(", "), None, None,
                                   max(0.0, ts - stale[0]) if self._has_ts else None,
                                   stale[0], False))
        out.append(ev.ThreadExit(ts, pid, tid))
        live = self._live.get(pid)
        if live is not None:
            live.discard(tid)
        if line.kind == "killed":
            self._exiting.add(pid)
            if pid not in self._exited:
                self._exited.add(pid)
                out.append(ev.ProcessExit(ts, pid, None, line.signal, line.core_dumped))
            return
        if line.status is None:      # "superseded by execve": only this tid is gone
            return
        # The kernel reports the leader's exit only after all other threads are gone, so the
        # leader's "+++ exited" (or the last thread after exit_group) is the process's end.
        if pid not in self._exited and (tid == pid or (pid in self._exiting and not live)):
            self._exited.add(pid)
            out.append(ev.ProcessExit(ts, pid, line.status, None, False))
