"""The importer's first pass over an strace log: what must be known before converting it.

Contract:
- ``LogScan().feed(block, tid=None)`` takes the log in blocks of whole lines (bytes; ``tid``:
  the one tid of an ``-ff`` file, whose lines have no pid column); ``facts()`` returns
  ``LogFacts``. Work per block is a few C-speed scans (regex findall, bytes.find); only lines
  that name a clone/fork result, getpid/gettid/set_tid_address/tgkill or an attach message
  are parsed. Memory is bounded by the number of tids.
- The log's time format, from its first syscall line: ``first_tod`` (-t/-tt), ``relative_ts``
  (strace -r deltas, times.relative_shape: the converter sums them in one process).
- ``LogFacts.membership()``: which process each tid of unknown origin belongs to, from
  evidence in the log only (docs/ARCHITECTURE.md's "The strace importer"); ``LogFacts.sessions``.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from ..linux.intparse import parse_uint
from .lines import glued_message, parse_line
from .times import relative_shape

__all__ = ["LogScan", "LogFacts", "Membership"]

# The tid column ("1234  " or "[pid  1234] ") at the start of each line. Blocks begin at a line
# start; searching for the newline (a literal the regex engine skips to) is ~3x faster than a
# multi-line "^".
_TID_FIRST = re.compile(rb"(?:\[pid +)?(\d+)[ \]]")
_TID_NEXT = re.compile(rb"\n(?:\[pid +)?(\d+)[ \]]")
_TID_LINE = re.compile(rb"^(?:\[pid +)?(\d+)[ \]]", re.M)
_CLONES = ("clone", "clone3", "fork", "vfork")
# Words in every line worth parsing (clone/clone3/fork/vfork, getpid, gettid,
# set_tid_address, tgkill, execve results; "[strace: ]Process N attached" messages).
_WORDS_OTHERS = (b"clone", b"fork", b"getpid", b"tgkill", b"execve", b"Process ")
_WORDS = _WORDS_OTHERS + (b"gettid", b"set_tid_address")
_ATTACHED = "strace: Process "
# Debian/Ubuntu multiarch directories: a process loads its libraries from its own machine's.
_TRIPLETS = (b"/aarch64-linux-gnu/", b"/x86_64-linux-gnu/")


def py_scan_block(block: bytes, counts: Counter,
                  want_self: bool = True) -> Tuple[int, int, List[int]]:
    """(lines with a tid column, lines, starts of the lines worth parsing): adds one per line
    to ``counts[tid column]``. The compiled twin (fastpath.py) finds fewer lines worth parsing
    (by their call name instead of words anywhere in them), never fewer that parse as one;
    ``want_self`` False leaves gettid/set_tid_address lines out."""
    m = _TID_FIRST.match(block)
    if m is not None:
        counts[m[1]] += 1
    found = _TID_NEXT.findall(block)
    counts.update(found)
    starts = set()
    for word in _WORDS if want_self else _WORDS_OTHERS:
        i = block.find(word)
        while i >= 0:
            starts.add(block.rfind(b"\n", 0, i) + 1)
            end = block.find(b"\n", i)
            if end < 0:
                break
            i = block.find(word, end)
    lines = block.count(b"\n") + (block[-1:] != b"\n")
    return len(found) + (m is not None), lines, sorted(starts)


def py_find_bytes(block: bytes, word: bytes) -> int:
    """``block.find(word)``: the compiled twin searches with memmem (a multiarch directory
    in every block: bytes.find stops at each '/' of a log full of paths)."""
    return block.find(word)


def _pick_scan():
    from .fastpath import compiled
    fast = compiled()
    return (py_scan_block, py_find_bytes) if fast is None else (fast.scan_block,
                                                                 fast.find_bytes)


_scan_block, _find_bytes = _pick_scan()


@dataclass
class Membership:
    """Where unknown-origin tids go (module doc)."""
    pid_of: Dict[int, int]
    alone: Set[int]
    root_pid: Optional[int]
    unprefixed_tid: Optional[int]
    notes: List[str] = field(default_factory=list)


@dataclass
class LogFacts:
    size: int = 0                                   # uncompressed bytes
    lines: int = 0
    first_tod: Optional[float] = None               # time of day of the first line (-t/-tt)
    relative_ts: bool = False                       # its times are -r deltas (convert.py)
    tid_lines: Counter = field(default_factory=Counter)   # tid column text -> lines
    children: Set[int] = field(default_factory=set)       # tids clone/fork/vfork created
    evidence: Dict[int, int] = field(default_factory=dict)  # tid -> pid (getpid, tgkill)
    attached: List[int] = field(default_factory=list)     # "Process P attached" (stderr logs)
    unprefixed: int = 0                             # parsed lines without a pid column
    unprefixed_self: Optional[int] = None           # tid that such lines named as their own
    ff_tids: List[int] = field(default_factory=list)      # -ff: the tids of the files
    # strace's attach/detach messages in log order: (kind, tid, threads of "with K threads")
    messages: List[Tuple[str, int, Optional[int]]] = field(default_factory=list)
    # tid column -> how many messages came before its first line (its strace session)
    first_seen: Dict[bytes, int] = field(default_factory=dict)
    given_pid: Optional[int] = None                 # import-strace --pid: unprefixed lines'
    triplets: Set[str] = field(default_factory=set)       # multiarch library dirs opened

    @property
    def root_pid(self) -> Optional[int]:
        return self.membership().root_pid

    def unknown_origin(self) -> Set[int]:
        # (a tid column of more than 10 digits is no tid: split_line refuses such lines too)
        tids = {int(t) for t in self.tid_lines if len(t) <= 10} | set(self.ff_tids)
        return tids - self.children

    def sessions(self) -> Dict[int, int]:
        """tid -> pid from the log's strace sessions: a session opened by ``Process P attached
        with K threads`` (strace -f -p P, no clone records for the threads it found) owns the
        tids first seen in it, at most K of them with P; a new session begins at an attach
        (of a process no clone in the log made) once every process attached in the one before
        has detached (pasted logs of several runs).
        Sessions are strace's attach/detach messages in log order, with the number of messages
        before each tid column's first line. A session opened by ``Process P attached with K
        threads`` (strace -f -p P: the threads it found have no clone records) owns the
        unknown-origin tids first seen in it, at most K with P; a new session starts at the attach
        of a process no clone made once every process attached in the one before has detached (two
        pasted runs). A message strace wrote into a line it cut counts after that line's pid
        column."""
        out: Dict[int, int] = {}
        if not self.messages:
            return out
        sessions, at = self._session_groups()
        members: Dict[int, List[int]] = {}
        for text, before in self.first_seen.items():
            k = at[min(before, len(at) - 1)]
            if k < 0 or len(text) > 10:
                continue
            attached, _, threads = sessions[k]
            tid = int(text)
            if threads is None or len(attached) != 1 or tid in self.children \
                    or tid in self.evidence or tid == attached[0]:
                continue
            group = members.setdefault(attached[0], [])
            if len(group) < threads - 1:
                group.append(tid)
                out[tid] = attached[0]
        return out

    def _detached(self) -> List[int]:
        """The tasks strace's "Process N detached" messages name (no clone made them)."""
        return sorted({t for kind, t, _ in self.messages
                       if kind == "detached" and t not in self.children})

    def session_count(self) -> int:
        """How many strace sessions the log joins (``sessions``' rule: a new one begins at an
        attach once every process attached in the one before has detached); 0 or 1 for one."""
        return len(self._session_groups()[0])

    def _session_groups(self) -> Tuple[List[Tuple[List[int], Set[int], Optional[int]]],
                                       List[int]]:
        """(sessions as (attached, detached, K of "with K threads"), the session current after
        each number of messages, -1 for none)."""
        sessions: List[Tuple[List[int], Set[int], Optional[int]]] = []
        at: List[int] = []
        for kind, tid, threads in self.messages:
            at.append(len(sessions) - 1)
            if kind == "attached" and tid not in self.children:
                cur = sessions[-1] if sessions else None
                if cur is None or (cur[1] and set(cur[0]) <= cur[1]):
                    sessions.append(([tid], set(), threads))
                elif tid not in cur[0]:
                    cur[0].append(tid)
            elif kind == "detached" and sessions:
                sessions[-1][1].add(tid)
        at.append(len(sessions) - 1)
        return sessions, at

    def membership(self) -> Membership:
        origin = self.unknown_origin()
        first: Optional[int] = None               # the first traced process, unprefixed lines
        attached = [p for p in self.attached if p not in self.children]
        if self.unprefixed:
            if self.unprefixed_self is not None:
                first = self.unprefixed_self
            elif len(origin) == 1:
                first = next(iter(origin))
            elif not origin and len(set(attached)) == 1:
                first = attached[0]               # strace -p P 2> LOG: its lines are P's
            elif not origin and not attached and len(self._detached()) == 1:
                first = self._detached()[0]       # ... its head cut off: P's detach names it
            if first is None and self.given_pid is not None:
                first = self.given_pid            # import-strace --pid N: strace -p N's lines
            if first is not None:
                origin.add(first)
        evidence = {t: p for t, p in self.evidence.items() if t in origin}
        named = set(attached) | set(evidence.values())
        if first is not None:
            named.add(first)
        if len(named) <= 1:
            pid = next(iter(named)) if named else (min(origin) if origin else None)
            notes = []
            if not named and len(origin) > 1:
                notes.append(
                    f"the log shows no fork records for threads {_tid_list(origin)}: they "
                    f"were taken as threads of one process, {pid}, as strace -f -p PID "
                    "records them (strace -p A -p B logs would need evidence such as getpid)")
            return Membership({t: pid for t in origin if pid is not None}, set(), pid, first,
                              notes)
        pid_of: Dict[int, int] = {}
        alone: Set[int] = set()
        session = self.sessions()
        for t in origin:
            if t in evidence:
                pid_of[t] = evidence[t]
            elif t in named:
                pid_of[t] = t
            elif t in session:
                pid_of[t] = session[t]
            else:
                alone.add(t)
        for t in attached:                 # a process attached with no lines of its own column
            pid_of.setdefault(t, t)
        notes = []
        if alone:
            notes.append(f"the log does not show which process threads {_tid_list(alone)} "
                         f"belong to (several processes, {_tid_list(named)}, were traced "
                         "without fork records): each is reported on its own")
        return Membership(pid_of, alone, min(named), first, notes)


def _tid_list(tids: Set[int], most: int = 8) -> str:
    s = sorted(tids)
    text = ", ".join(map(str, s[:most]))
    return text + (f" and {len(s) - most} more" if len(s) > most else "")


def _line_at(block: bytes, i: int) -> Tuple[str, int]:
    """The text of the line holding ``block[i]`` (joined with the next line when strace cut
    it with an attach message) and the index where the line ends."""
    start = block.rfind(b"\n", 0, i) + 1
    end = block.find(b"\n", i)
    end = len(block) if end < 0 else end
    text = block[start:end].decode("utf-8", "surrogateescape")
    k = text.find(_ATTACHED)
    if k > 0 and end < len(block):
        nxt = block.find(b"\n", end + 1)
        nxt = len(block) if nxt < 0 else nxt
        text = text[:k] + block[end + 1:nxt].decode("utf-8", "surrogateescape")
        end = nxt
    return text, end


class LogScan:
    """Accumulates LogFacts over the blocks of a log (module doc)."""

    def __init__(self) -> None:
        self.facts = LogFacts()
        self._decided = False
        self._prefixed_seen = False

    def feed(self, block: bytes, tid: Optional[int] = None) -> None:
        f = self.facts
        f.size += len(block)
        if not self._decided:
            self._first_lines(block)
        counts = Counter()
        # gettid/set_tid_address name the first process only on lines before any pid column
        prefixed, lines, starts = _scan_block(block, counts,
                                              tid is None and not self._prefixed_seen)
        if tid is None:
            new = [t for t in counts if t not in f.tid_lines]
            f.tid_lines.update(counts)
            self._sessions(block, starts, new)
        f.lines += lines
        first_prefixed = len(block)       # where this block's first prefixed line starts
        if tid is None:
            if prefixed < lines:          # lines without a pid column (or blank, or messages)
                f.unprefixed += lines - prefixed
                if not self._prefixed_seen and prefixed:
                    m = _TID_FIRST.match(block)
                    n = _TID_NEXT.search(block)
                    first_prefixed = 0 if m is not None else (n.start() + 1 if n else len(block))
            if prefixed:
                before, self._prefixed_seen = not self._prefixed_seen, True
            else:
                before = not self._prefixed_seen
        else:
            f.tid_lines[str(tid).encode()] += lines
            before = False
        for triplet in _TRIPLETS:
            name = triplet.strip(b"/").decode()
            if name not in f.triplets and _find_bytes(block, triplet) >= 0:
                f.triplets.add(name)
        end = -1
        for i in starts:
            if i <= end:                  # already read, joined to a line strace cut
                continue
            text, end = _line_at(block, i)
            self._evidence(text, tid, before and i < first_prefixed)

    def _sessions(self, block: bytes, starts: List[int], new: List[bytes]) -> None:
        """strace's attach/detach messages of the block in order (one strace wrote into a line
        it cut, too), and for each tid column new in it how many messages came before its
        first line (LogFacts.sessions)."""
        f = self.facts
        marks: List[int] = []               # where each message of the block takes effect
        for i in starts:
            end = block.find(b"\n", i)
            end = len(block) if end < 0 else end
            if block.find(b"Process ", i, end) < 0:      # a clone, getpid, ... line
                continue
            text = block[i:end].decode("utf-8", "surrogateescape")
            k = glued_message(text)
            line = parse_line(text[k:] if k > 0 else text)
            if line is None or line.kind not in ("attached", "detached") or line.tid is None:
                continue
            words = line.args.split()           # "Process 3812 attached with 3 threads"
            threads = parse_uint(words[4], 10) if len(words) >= 6 and words[3] == "with" \
                else None
            f.messages.append((line.kind, line.tid, threads if line.kind == "attached"
                               and k <= 0 else None))
            marks.append(end if k > 0 else i)   # a cut line's own tid comes before its message
        if not new:
            return
        base = len(f.messages) - len(marks)
        if not marks:
            for t in new:
                f.first_seen[t] = base
            return
        left = set(new)
        bounds = [0] + marks + [len(block)]
        for j in range(len(bounds) - 1):
            for t in dict.fromkeys(_TID_LINE.findall(block, bounds[j], bounds[j + 1])):
                if t in left:
                    left.discard(t)
                    f.first_seen[t] = base + j
        for t in left:                      # (not found by the regex: the block's last count)
            f.first_seen[t] = base + len(marks)

    def _first_lines(self, block: bytes) -> None:
        for text in block[:1 << 16].decode("utf-8", "surrogateescape").splitlines():
            line = parse_line(text)
            if line is not None and line.kind not in ("attached", "detached", "info"):
                self._decided = True      # the first syscall line tells the time format
                self.facts.first_tod = line.ts if line.time_of_day else None
                self.facts.relative_ts = line.ts is not None and not line.time_of_day \
                    and relative_shape(text, line.ts)
                return

    def _evidence(self, text: str, file_tid: Optional[int], before_prefixes: bool) -> None:
        line = parse_line(text)
        if line is None:
            return
        f = self.facts
        if line.kind == "attached":
            if line.tid is not None:
                f.attached.append(line.tid)
            return
        tid = line.tid if line.tid is not None else file_tid
        if line.kind == "call" and line.name == "tgkill" and line.ret == 0:
            parts = line.args.split(", ")        # tgkill(TGID, TID, SIG): TID is in TGID
            tgid, tid_ = (parse_uint(p, 10) for p in parts[:2]) if len(parts) == 3 \
                else (None, None)
            if tgid is not None and tid_ is not None:
                f.evidence.setdefault(tid_, tgid)
            return
        if line.kind in ("call", "resumed") and line.ret == 0 and tid is not None \
                and line.name in ("execve", "execveat"):
            f.evidence.setdefault(tid, tid)      # a task whose exec succeeded leads its process
            return
        if line.kind not in ("call", "resumed") or line.ret is None or line.ret <= 0:
            return
        name, ret = line.name, line.ret
        if name in _CLONES:
            f.children.add(ret)
        elif name == "getpid" and tid is not None:
            f.evidence.setdefault(tid, ret)
        if line.tid is None and before_prefixes and f.unprefixed_self is None \
                and name in ("set_tid_address", "gettid", "getpid"):
            f.unprefixed_self = ret
