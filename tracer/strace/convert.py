"""Stateful conversion of parsed strace lines (lines.py) into events/__init__.py events.

Contract:
- ``StraceConverter(pid_of=None, base_date=None, root_pid=None, alone=None,
  unprefixed_tid=None, machine=None, relative_times=False)``; feed lines in log order with
  ``feed_text(text)`` (or ``feed(StraceLine)``); each call returns the events that line
  completes. ``finish(end_ts)`` returns the rest: every call still unfinished becomes an event
  with ``ongoing=True``, ``ret=None`` and ``dur = end_ts - start`` (the thread is still blocked
  in it: key evidence), plus one ``Lost`` when lines were unparsed.
- ``processes``, ``capabilities``, ``names``: what the log held, for the trace header;
  ``cut_calls`` the calls it ends in. How halves pair, cut lines join, last calls are held,
  pids found and fds followed: docs/ARCHITECTURE.md's "The strace importer".
"""
from __future__ import annotations

import datetime as _dt
import re
from typing import Callable, Dict, List, Optional, Set, Tuple

from .. import events as ev
from ..events.shapes import INT64_MAX, INT64_MIN
from ..events.states import ThreadStopped
from .args import exec_args as _exec_args
from .batch import BatchFeed
from .kstacks import KStacks
from .cmdline import named_program
from .lastcall import LastCalls
from .decode import nv_request_name, parse_fd, split_args, to_event
from .fdtable import fd_calls, poll_fds
from .lines import INTERRUPTED, StraceLine, glued_message as _glued_message, split_line
from .procs import REAP_CALLS, ProcessTable
from .times import LogTimes

__all__ = ["StraceConverter"]

_CLONES = frozenset({"clone", "clone3", "fork", "vfork"})
_SPECIAL = _CLONES | REAP_CALLS | {"execve", "execveat", "exit_group", "prctl", "epoll_ctl"}
_GPU = frozenset({"nvidiactl", "nvidia", "nvidia-uvm"})
_ATTACHED, _STOPPED_BY, _DETACHED = "strace: Process ", "stopped by ", "<detached ...>"
# The rest of a call's line a terminal split (Enter, echo, output, "^C" between): issue 44 item 3
_CALL_REST = re.compile(r"^(?:\^C)?\)\s*= ")
_CALL_HEAD = re.compile(r"^[a-z_][a-z0-9_]*\(")


def _continues_cut(text: str) -> bool:
    """``text`` goes on with a line strace cut with a detach message: its ``<detached ...>``
    continuation, or another detach message strace wrote before it."""
    rest = text.lstrip(" ")
    return rest.startswith(_DETACHED) or (rest.startswith(_ATTACHED) and "detached" in rest)


class StraceConverter(BatchFeed, LastCalls):
    """Feed lines in order; collect events. Not thread-safe (one reader feeds it)."""

    def __init__(self, pid_of: Optional[Callable[[int], Optional[int]]] = None,
                 base_date: Optional[_dt.date] = None, root_pid: Optional[int] = None,
                 alone: Optional[Set[int]] = None, unprefixed_tid: Optional[int] = None,
                 machine: Optional[str] = None, relative_times: bool = False) -> None:
        self._procs = ProcessTable(pid_of, root_pid, alone)
        self._tid_pid = self._procs.tid_pid          # the hot path reads it directly
        self._fds = self._procs.fds
        self._unprefixed_tid = unprefixed_tid
        self._fd_calls = fd_calls(machine)
        self._special = _SPECIAL | self._fd_calls    # until -y decorations show up
        self._times = LogTimes(base_date, relative_times)
        self._pending: Dict[int, Tuple[float, str, str]] = {}   # tid -> (start ts, name, args)
        self._init_last_calls()
        self._kstacks = KStacks()                # strace -k frames (kstacks.py)
        self._line: Optional[Tuple[int, str, int]] = None   # the last line: (tid, kind, no.)
        self._epoll: Dict[Tuple[int, int], List[str]] = {}      # (pid, epfd) -> fd kinds
        self._cut: Optional[str] = None          # a line strace cut with an attach message
        self._cut_by_detach = False              # ... with a detach message (strace's Ctrl-C)
        self._held: List[tuple] = []             # those messages, fed once the line is whole
        self._split_head: Optional[str] = None   # an unparsed line that began a call (_rejoin)
        self._last_cut: Optional[int] = None     # the tid of the last 'cut' entry fed
        self._attach_seen = False                # strace's "Process N attached" messages
        self.unfinished_tid: Optional[int] = None  # the tid of the last entry half fed
        self.names: Set[str] = set()
        self.numbers: Dict[str, int] = {}        # strace -n: name -> number printed
        self.unparsed = 0
        self.named_command: Optional[List[str]] = None   # a strace command line before the log
        self.bad_sample = ""
        self.lines = 0
        self.first_ts: Optional[float] = None
        self.last_ts: Optional[float] = None
        self._has_ts = self._has_dur = self._has_fd = self._has_pid = False
        self._finished = False

    # ------------------------------------------------------------------ public
    @property
    def processes(self) -> Dict[int, ev.ProcessInfo]:
        return self._procs.processes

    @property
    def capabilities(self) -> Dict[str, bool]:
        """What the log held: -t/-tt/-ttt timestamps, -T durations, -y fd paths, -f pid column."""
        return {"timestamps": self._has_ts, "durations": self._has_dur,
                "fd_paths": self._has_fd, "pids": self._has_pid}

    def feed_text(self, text: str) -> List[ev.Event]:
        """Parse and feed one raw line; blank lines are ignored, unparseable ones counted.

        Never raises for what a line holds: a line whose values cannot be used (a number too
        large for int(), say) is counted as not understood, like any other bad line."""
        if self._cut is not None and self._cut_by_detach and not _continues_cut(text):
            return self._close_detached_cut() + self.feed_text(text)
        joined = self._cut is not None
        if joined:
            text, self._cut = self._cut + text, None
        try:
            t = split_line(text)
            out = self._unparsed(text) if t is None else self._feed(t)
        except (ValueError, OverflowError, IndexError):
            self._count_bad(text)
            out = []
        if joined and self._cut is None and self._held:
            out += self._release()
        return out

    def keep_fds(self) -> None:
        """The process table as the header takes it: without -y, each process's fds those it was
        seen to open and keep; the program a command line before the log names (name_...)."""
        if not self._has_fd:
            for pid, info in self._procs.processes.items():
                info.fds = self._fds.fds(pid)
        self.name_the_program()

    def _close_detached_cut(self) -> List[ev.Event]:
        """A line cut by a detach message whose continuation never came: the call was in flight
        when strace detached (then the messages, in order)."""
        cut, self._cut = self._cut or "", None
        lines = self.lines               # (the continuation made up here is no line of the log)
        out = self.feed_text(cut + " " + _DETACHED)
        self.lines = lines
        return out + self._release()

    def _release(self) -> List[ev.Event]:
        """The messages strace wrote into a cut line, once the line is whole (the cut call
        was made before them: an unprefixed one is the task's that detaches)."""
        out: List[ev.Event] = []
        held, self._held, self._cut_by_detach = self._held, [], False
        lines = self.lines               # (each was counted as its line was read: _unparsed)
        for msg in held:
            out += self._feed(msg)
        self.lines = lines
        return out

    def feed(self, line: StraceLine) -> List[ev.Event]:
        """Events completed by this line (often one, sometimes none or several)."""
        return self._feed((line.tid, line.ts, line.kind, line.name, line.args, line.ret,
                           line.err, line.ret_text, line.dur, line.status, line.signal,
                           line.core_dumped, line.si_pid, line.time_of_day, line.nr))

    def in_call(self, tid: int) -> bool:
        """Thread ``tid`` entered a call the log has not shown the end of (or is cut in one)."""
        return tid in self._pending or tid in self._interrupted or (
            self._cut is not None and self.unfinished_tid == tid)

    def finish(self, end_ts: Optional[float] = None) -> List[ev.Event]:
        """Calls still in flight become ``ongoing`` events; then the ``Lost`` count, if any."""
        if self._finished:
            return []
        self._finished = True
        out: List[ev.Event] = []
        if self._cut is not None:
            if self._cut_by_detach:       # cut by a detach, the log ends: the call never returned
                out += self._close_detached_cut()
            else:
                cut, self._cut = self._cut, None
                self._count_bad(cut)
                out += self._release()
        self.keep_fds()
        end = end_ts if end_ts is not None else (self.last_ts or 0.0)
        out += self._last_calls(end)
        out += self._kstacks.native_stacks(self.cut_calls, self._tid_pid, end, self._entered)
        if self.unparsed:
            out.append(ev.Lost(end, self.unparsed, "unparsed strace lines", self.bad_sample))
        return out

    # ------------------------------------------------------------------ internals
    def name_the_program(self) -> None:
        """The command line pasted before the log names the first process it shows, when the
        log itself does not (no execve of it: filtered out, or cut off)."""
        argv = self.named_command
        first = next(iter(self._procs.processes.values()), None)
        if argv and first is not None and not first.cmdline:
            first.cmdline = list(argv)
            first.comm = first.comm or argv[0].rsplit("/", 1)[-1][:15]

    def _rejoin(self, text: str) -> Optional[List[ev.Event]]:
        """``text`` ends a call a terminal split (``_CALL_REST``) that the last 'cut' entry or the
        last unparsed line beginning a call began: fed whole, at the entry's time; else None."""
        if not _CALL_REST.match(text):
            return None
        rest = text[2:] if text.startswith("^C") else text
        tid = self._last_cut
        if tid is not None and tid in self._cut_entries and tid in self._pending:
            ts, name, args = self._pending[tid]
            t = split_line(f"{name}({args}{rest}")
            if t is None or t[2] != "call":
                return None
            self._cut_entries.discard(tid)
            del self._pending[tid]
            return self._feed((tid if self._has_pid else None, ts) + tuple(t[2:]))
        head, self._split_head = self._split_head, None
        if head is None:
            return None
        t = split_line(head + rest)
        if t is None or t[2] != "call":
            return None
        self.unparsed -= 1               # (the head was counted as not understood)
        return self._feed(t)

    def _unparsed(self, text: str) -> List[ev.Event]:
        rejoined = self._rejoin(text)
        if rejoined is not None:
            return rejoined
        k = _glued_message(text)
        if k > 0:
            # "...SIGCHLDstrace: Process 4024 attached" + "\n, child_tidptr=...) = 4024": strace
            # wrote its message into the middle of a line; the line goes on after it. The
            # message counts as its own line ("...NULLstrace: Process 3812 detached" +
            # "\n <detached ...>": 3812 detached, the cut call is unfinished).
            self._cut = text[:k - 2] if k >= 2 and text.startswith("^C", k - 2) else text[:k]
            msg = split_line(text[k:])
            if msg is not None and msg[2] in ("attached", "detached"):
                self._held.append(msg)
                self.lines += 1          # the line that holds it is strace's
                if msg[2] == "detached":
                    self._cut_by_detach = True
            return []
        if text.strip():
            self._count_bad(text)
            if _CALL_HEAD.match(text):
                self._split_head = text      # a call's line the program's output went into
            if not self.lines and self.named_command is None:
                self.named_command = named_program(text)
        return []

    def _count_bad(self, text: str) -> None:
        self.unparsed += 1
        if not self.bad_sample:
            self.bad_sample = text.rstrip("\r\n")[:200]

    def _feed(self, t: tuple) -> List[ev.Event]:
        tid, ts, kind, name, args, ret, err, ret_text, dur, status, sig, core, si_pid, tod, nr = t
        self.lines += 1
        ret = ret if ret is None or INT64_MIN <= ret <= INT64_MAX else None  # no result at all
        if kind == "info" and args.startswith(">"):     # strace -k: a frame of the line above
            self._kstacks.frame(args, self._line)
            return []
        if ts is None:
            ts = 0.0
        else:
            self._has_ts = True
            ts = self._times.seconds(ts, tod)
            if self.first_ts is None:
                self.first_ts = ts
            self.last_ts = ts
        if kind == "attached" or kind == "detached" or (
                kind == "info" and not args.startswith(_STOPPED_BY)):
            # strace's own messages: no event; who is traced now (unprefixed lines are the one
            # traced task's: a pasted log's later strace -p session)
            out: List[ev.Event] = []
            if tid is not None and kind == "attached":
                self._attach_seen = True
                if "with" not in (args or ""):
                    self._procs.attached(tid, ts, out)
            elif tid is not None and kind == "detached":
                self._procs.detached(tid)
            return out
        if tid is None:
            # (after an attach message too: a pasted log's later "strace -p Q" session, whose
            # lines have no pid column, is Q's once the earlier session's tasks detached)
            tid = self._procs.only_alive() if self._has_pid or self._attach_seen else None
            if tid is None:
                tid = self._unprefixed_tid or 0
        else:
            self._has_pid = True
        if dur is not None:
            self._has_dur = True
        out: List[ev.Event] = []
        self._line = (tid, kind, self.lines)     # what strace -k frames below belong to
        pid = self._tid_pid.get(tid)
        if pid is None:
            pid = self._procs.discover(tid, ts, out)
        self._split_head = None
        if tid in self._cut_entries and kind != "signal":
            self._drop_cut(tid)      # a line of the tid after its 'cut' entry
        if tid in self._interrupted:
            if kind == "signal":     # the signal that interrupted the held call
                out.append(self._kstacks.signal(ts, pid, tid, sig, si_pid, args, self.lines))
                return out
            self._release_interrupted(tid, out)     # the thread went on after it
        if kind == "call":
            self.names.add(name)
            if nr is not None:
                self.numbers.setdefault(name, nr)
            if ret is None and err is not None and err.startswith(INTERRUPTED) \
                    and name not in _SPECIAL:
                self._hold(pid, tid, name, args, err, ret_text, ts, ts, dur)
            elif name in self._special:
                self._syscall(pid, tid, name, args, ret, err, ret_text, ts, ts, dur, out)
            else:
                out.append(self._event(pid, tid, name, args, ret, err, dur, ts, False))
        elif kind == "unfinished" or kind == "cut":
            old = self._pending.pop(tid, None)
            if old is not None:
                # the resumed half never came: keep the call, result unknown
                out.append(self._event(pid, tid, old[1], old[2], None, None, None, old[0], False))
            self._pending[tid] = (ts, name, args)
            self._entered[tid] = self.lines
            if kind == "cut":
                self._cut_entries.add(tid)
                self._last_cut = tid
            self.unfinished_tid = tid
            self.names.add(name)
            if name in _CLONES:
                self._procs.pending_clones[tid] = args
        elif kind == "resumed":
            self._resumed(pid, tid, name, args, ret, err, ret_text, ts, dur, t[1] is None, out)
        elif kind == "exited" or kind == "killed":
            stale = self._pending.pop(tid, None)
            if stale is not None:    # "+++ exited" with a call still open: it never returned
                out.append(self._event(pid, tid, stale[1], stale[2].rstrip(", "), None, None,
                                       max(0.0, ts - stale[0]) if self._has_ts else None,
                                       stale[0], False))
            self._procs.exit(pid, tid, kind, status, sig, core, ts, out)
        elif kind == "signal":
            out.append(self._kstacks.signal(ts, pid, tid, sig, si_pid, args, self.lines))
        elif kind == "info":         # "--- stopped by SIGSTOP ---": in a group-stop (state T)
            out.append(ThreadStopped(ts, pid, tid, args[len(_STOPPED_BY):], "strace"))
        return out

    def _event(self, pid: int, tid: int, name: str, args: str, ret: Optional[int],
               err: Optional[str], dur: Optional[float], ts: float, ongoing: bool) -> ev.Syscall:
        e = to_event(pid, tid, name, args, ret, err, dur, ts, ongoing)
        if e.fd_kind is not None:
            if not self._has_fd:
                self._decorated()
        elif e.fd is not None and not self._has_fd:
            self._resolve(e, pid)
        if e.TAG == "pl":
            self._poll_kinds(e, pid, args)
        return e

    def _poll_kinds(self, e: ev.Syscall, pid: int, args: str) -> None:
        if e.fd_kinds:  # type: ignore[attr-defined]
            if not self._has_fd:          # only -y decorations give a poll's kinds here
                self._decorated()
        elif e.fd is not None:     # epoll: the kinds registered with epoll_ctl, when seen
            kinds = self._epoll.get((pid, e.fd))
            if kinds:
                e.fd_kinds = tuple(kinds)  # type: ignore[attr-defined]
        elif not self._has_fd:
            self._resolve_poll(e, pid, args)

    def _decorated(self) -> None:
        """The log has -y decorations: the kernel names every fd; stop following tables."""
        self._has_fd = True
        self._special = _SPECIAL

    def _resolve(self, e: ev.Syscall, pid: int) -> None:
        hit = self._fds.lookup(pid, e.fd)  # type: ignore[arg-type]
        if hit is None:
            return
        e.fd_kind, e.fd_target = hit
        if e.TAG == "io" and hit[0] in _GPU:
            e.request_name = nv_request_name(hit[0], e.request,  # type: ignore[attr-defined]
                                             e.request_name)  # type: ignore[attr-defined]

    def _resolve_poll(self, e: ev.Syscall, pid: int, args: str) -> None:
        kinds: List[str] = []
        lookup = self._fds.lookup
        for fd in poll_fds(e.name, args):
            hit = lookup(pid, fd)
            if hit is not None and hit[0] is not None and hit[0] not in kinds:
                kinds.append(hit[0])
        if kinds:
            e.fd_kinds = tuple(kinds)  # type: ignore[attr-defined]

    def _resumed(self, pid: int, tid: int, name: str, args: str, ret: Optional[int],
                 err: Optional[str], ret_text: Optional[str], ts: float, dur: Optional[float],
                 no_ts: bool, out: List[ev.Event]) -> None:
        pending = self._pending.pop(tid, None)
        if pending is not None and pending[1] == name:
            start, _, head = pending
            if dur is None and not no_ts:
                dur = max(0.0, ts - start)
            self._complete(pid, tid, name, head + args, ret, err, ret_text, start, ts, dur, out)
            return
        if pending is not None:      # mismatched halves (should not happen): keep both
            out.append(self._event(pid, tid, pending[1], pending[2], None, None, None,
                                   pending[0], False))
        # The log began while this call was in flight: its start is end minus duration.
        start = ts - dur if dur is not None else ts
        self._complete(pid, tid, name, args, ret, err, ret_text, start, ts, dur, out)

    def _complete(self, pid: int, tid: int, name: str, args: str, ret: Optional[int],
                  err: Optional[str], ret_text: Optional[str], start: float, end: float,
                  dur: Optional[float], out: List[ev.Event], hold: bool = True) -> None:
        if hold and ret is None and err is not None and err.startswith(INTERRUPTED) \
                and name not in _SPECIAL:
            self._hold(pid, tid, name, args, err, ret_text, start, end, dur)
        elif name in self._special:
            self._syscall(pid, tid, name, args, ret, err, ret_text, start, end, dur, out)
        else:
            out.append(self._event(pid, tid, name, args, ret, err, dur, start, False))

    def _syscall(self, pid: int, tid: int, name: str, args: str, ret: Optional[int],
                 err: Optional[str], ret_text: Optional[str], start: float, end: float,
                 dur: Optional[float], out: List[ev.Event]) -> None:
        """A complete call whose name is special (clone, exec, fd-table calls, ...)."""
        out.append(self._event(pid, tid, name, args, ret, err, dur, start, False))
        if name in self._fd_calls and not self._has_fd:
            self._fds.apply(pid, name, args, ret, ret_text)
        if name not in _SPECIAL:
            return
        procs = self._procs
        if name in _CLONES:
            procs.pending_clones.pop(tid, None)
            if ret is not None and ret > 0 and ret not in self._tid_pid:
                procs.new_child(tid, ret, args, end, out)
        elif name == "execve" or name == "execveat":
            if ret == 0:
                filename, argv = _exec_args(args)
                procs.exec(pid, tid, filename, argv, start, out)
                self._epoll = {k: v for k, v in self._epoll.items() if k[0] != pid}
        elif name == "exit_group":
            procs.exiting(pid)
        elif name in REAP_CALLS:
            procs.reaped(pid, name, args, ret, end, out)
        elif name == "prctl":
            procs.prctl(pid, tid, args)
        elif name == "epoll_ctl" and ret == 0:
            parts = split_args(args, 3)
            if len(parts) >= 3 and parts[1] == "EPOLL_CTL_ADD":
                epfd = parse_fd(parts[0])[0]
                fd, kind, _ = parse_fd(parts[2])
                if kind is None and fd is not None and not self._has_fd:
                    hit = self._fds.lookup(pid, fd)
                    kind = hit[0] if hit else None
                if epfd is not None and kind is not None:
                    kinds = self._epoll.setdefault((pid, epfd), [])
                    if kind not in kinds:
                        kinds.append(kind)
