"""Sharded conversion of a large strace log: N worker processes, one merged row stream that is
the sequential importer's, byte for byte.

Contract:
- ``plan_shards(...) -> Optional[Plan]`` decides whether to shard (None: stay sequential;
  never -t/-tt nor -r logs); ``convert_sharded(log_path, plan, write) -> ShardedResult``
  converts the log exactly as importer.convert_log does and hands the encoded
  rows to ``write`` (whole rows, in the sequential order); the result carries what the
  header needs (process table, capabilities, first/last ts, line counts) and the rows include
  the single Lost row. The importer shards only when asked to (``workers`` >= 2).
- How lines are routed (global, stateful, stateless), ordered and merged, and what bounds
  memory: docs/ARCHITECTURE.md's "The strace importer".
"""
from __future__ import annotations

import datetime as _dt
import gc
import multiprocessing
import operator
import os
import pickle
import re
import signal
import threading
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from .. import events as ev
from ..linux.intparse import is_digits
from .convert import StraceConverter
from .lines import INTERRUPTED
from .fdtable import FD_CALLS
from .log import LogFile
from .procs import REAP_CALLS
from .scan import Membership

__all__ = ["Plan", "ShardedResult", "plan_shards", "convert_sharded", "classify",
           "MIN_SHARD_BYTES", "BATCH_LINES"]

MIN_SHARD_BYTES = 20 << 20       # below this (uncompressed estimate) a log stays sequential
BATCH_LINES = 16384

# The head of a line exactly as lines.parse_line reads it: an optional tid column ("1234 " or
# "[pid  1234]"), spaces, an optional timestamp token, then the syscall name, "<... NAME" of a
# resumed half, or the first word of a marker / message ("+++", "---", "strace:", "Process").
# Groups: tid (bracket form), tid (plain form), "<... " when resumed, the name token.
_HEAD = re.compile(r"(?:\[pid +([0-9]+)\]|([0-9]+) )? *(?:[0-9][^ ]* +)?(<\.\.\. )?([^ (]*)").match
# Syscalls that change state shared between threads, and the name tokens of such lines
# (markers and strace's own messages too: "+++ exited", "strace: Process N attached").
_GLOBAL_NAMES = frozenset({"clone", "clone3", "fork", "vfork", "execve", "execveat",
                           "exit_group", "epoll_ctl", "prctl"}) | FD_CALLS | REAP_CALLS
_GLOBAL_TOKENS = _GLOBAL_NAMES | {"+++", "strace:", "Process", "["}
_RESUMED_GLOBAL = tuple(name + " " for name in sorted(_GLOBAL_NAMES))   # "<... NAME resumed>"
# The end of an entry half that leaves a call pending: "<unfinished ...>" / "<detached ...>"
# (a line ends in "\n", "\r\n", "\r" or nothing: TextIOWrapper newline="").
_PENDING_ENDS = ("...>\n", "...>", "...>\r\n", "...>\r")


@dataclass
class Plan:
    workers: int
    assign: Dict[str, int]               # tid column text -> shard; others -> shard 0
    membership: Membership
    base_date: Optional[_dt.date]
    batch_lines: int


@dataclass
class ShardedResult:
    rows: int                             # rows handed to ``write``, the Lost row included
    lines: int                            # parsed lines (as StraceConverter.lines)
    unparsed: int
    bad_sample: str
    first_ts: Optional[float]
    last_ts: Optional[float]
    capabilities: Dict[str, bool]
    processes: Dict[int, ev.ProcessInfo]
    truncated: bool
    names: frozenset = frozenset()
    numbers: Optional[Dict[str, int]] = None
    cut_calls: List[Tuple[int, str, str]] = field(default_factory=list)   # convert.py's


def plan_shards(tid_counts: Dict[bytes, int], *, size: int, first_tod: Optional[float],
                membership: Membership, base_date: Optional[_dt.date],
                workers: Optional[int] = None) -> Optional[Plan]:
    """A shard plan, or None when the log should be converted sequentially (module doc).

    ``workers`` forces that many shards whatever the log size (tests); None picks
    min(2, cpu count) for logs of at least MIN_SHARD_BYTES.
    """
    if workers is None:
        if size < MIN_SHARD_BYTES:
            return None
        workers = min(2, os.cpu_count() or 1)
    if workers < 2 or first_tod is not None:
        return None
    # Longest-processing-time-first: heaviest tid to the lightest shard so far.
    load = [0] * workers
    assign: Dict[str, int] = {}
    for tid, n in sorted(tid_counts.items(), key=lambda kv: (-kv[1], kv[0])):
        k = load.index(min(load))
        assign[tid.decode("ascii")] = k
        load[k] += n
    return Plan(workers, assign, membership, base_date, BATCH_LINES)


# --------------------------------------------------------------------------- worker
def _worker(conn: Connection, log_path: str, k: int, plan: Plan, offset: Any = None) -> None:
    """Process entry point: convert shard ``k``, stream its batches of slots, then the tail.
    ``offset`` (a shared integer) is where the worker's reading got to in the file, for the
    parent's progress callback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        _work(conn, log_path, k, plan, offset)
    except BaseException:  # noqa: BLE001 - everything goes back to the parent as text
        try:
            conn.send(("error", traceback.format_exc(limit=8)))
        except OSError:
            pass
    finally:
        conn.close()


def _work(conn: Connection, log_path: str, k: int, plan: Plan, offset: Any = None) -> None:
    from ..tracefile.codec import encode_row
    gc.disable()             # as importer.convert_log: millions of acyclic short-lived objects
    who = plan.membership
    conv = StraceConverter(pid_of=who.pid_of.get, base_date=plan.base_date,
                           root_pid=who.root_pid, alone=who.alone,
                           unprefixed_tid=who.unprefixed_tid)
    feed = conv.feed_text
    fmt = encode_row
    n = plan.workers
    owner_of = plan.assign.get
    tid_pid = conv._tid_pid  # noqa: SLF001 - "does the converter know this tid yet"
    known: Set[str] = set()              # tid texts the converter knows ("" is tid 0)
    pending_line: Dict[str, int] = {}    # owned tid text -> line of its last entry half
    batch = plan.batch_lines
    slots: List[bytes] = [b""] * batch    # rows of each line of the batch (b"" if not ours)
    base = 0                             # index of the batch's first line
    send = conn.send_bytes
    rows = 0
    first_line = last_line = bad_line = -1
    last_ts: Optional[float] = None
    cut = batch
    load = [0] * n                       # event-making lines each shard owns so far
    held_keys: Set[str] = set()          # tid texts whose last line may be held (module doc)

    def feed_foreign(text: str) -> None:
        # State only: the events are discarded and the line counters restored (the owner
        # counts this line). Capability flags stay: the owner sets the same ones.
        saved = (conv.lines, conv.unparsed, conv.bad_sample, conv.first_ts, conv.last_ts)
        feed(text)
        conv.lines, conv.unparsed, conv.bad_sample, conv.first_ts, conv.last_ts = saved
        entry_half()

    def entry_half() -> None:
        # the line of the entry half of a call left pending, by the tid the converter gave it
        # (a line strace cut is whole, and its tid known, only at its continuation)
        t = conv.unfinished_tid
        if t is not None:
            conv.unfinished_tid = None
            pending_line[str(t) if t else ""] = i

    log = LogFile(log_path)
    i = -1
    try:
        for text in log.text_lines():
            i += 1
            if i == cut:                 # batch boundary: the same line index in every worker
                if offset is not None:
                    offset.value = log.offset()
                send(b"R" + b"\0".join(slots))
                slots = [b""] * batch
                base = cut
                cut += batch
            key, glob, stateful = classify(text)
            if may_hold_last_call(text):
                held_keys.add(key)
                glob = True
            elif held_keys and key in held_keys:
                if not _is_signal(text):
                    held_keys.discard(key)
                glob = True
            elif conv._cut is not None:  # noqa: SLF001 - the line after one strace cut
                glob = True
            if glob:
                owner = owner_of(key, 0)
                load[owner] += 1
                if owner != k:
                    feed_foreign(text)
                    continue
            elif stateful:
                owner = owner_of(key, 0)     # halves of a call: the tid's state, its owner
                if not text.endswith(_PENDING_ENDS):
                    load[owner] += 1         # the resumed half makes the event
            else:
                # Stateless for the converter: the least loaded shard so far takes it. Every
                # worker sees the same lines, so every worker makes the same choice.
                if n == 2:
                    owner = 0 if load[0] <= load[1] else 1
                else:
                    owner = load.index(min(load))
                load[owner] += 1
            if owner != k:
                if key not in known:
                    # Until the converter knows a tid, all its lines are fed: the first one
                    # registers it (and may take an in-flight clone), as in the sequential run.
                    if len(key) <= 10 and int(key or 0) in tid_pid:
                        known.add(key)
                    else:
                        feed_foreign(text)
                        continue
                conv._line = None  # noqa: SLF001 - strace -k frames below it are not ours
                continue
            # an owned line
            events = feed(text)
            if events:
                rows += len(events)
                if len(events) == 1:
                    slots[i - base] = fmt(events[0])
                else:
                    slots[i - base] = b"".join([fmt(e) for e in events])
            entry_half()
            if conv.last_ts is not last_ts:
                last_ts = conv.last_ts
                last_line = i
                if first_line < 0:
                    first_line = i
            if bad_line < 0 and conv.unparsed:
                bad_line = i
        send(b"R" + b"\0".join(slots[:i + 1 - base]))
    finally:
        log.close()
    # Phase 2: tell the parent what the header needs; it answers with the log's end.
    if k == 0:
        conv.keep_fds()                  # (the fd calls are global: shard 0 saw them all)
    conn.send(("stats", {
        "rows": rows, "lines": conv.lines, "unparsed": conv.unparsed,
        "bad_sample": conv.bad_sample, "bad_line": bad_line,
        "first_ts": conv.first_ts, "first_line": first_line,
        "last_ts": conv.last_ts, "last_line": last_line,
        "capabilities": conv.capabilities, "truncated": log.truncated,
        "names": sorted(conv.names), "numbers": conv.numbers,
        "processes": conv.processes if k == 0 else None,
    }))
    end_ts, has_ts = conn.recv()
    conv._has_ts = has_ts    # noqa: SLF001 - finish() asks "did the log have timestamps"
    tail: List[Tuple[float, int, bytes]] = []
    for e in conv.finish(end_ts):
        if isinstance(e, ev.Lost):
            continue                     # the parent makes the one Lost row for all shards
        tid = e.tid  # type: ignore[attr-defined]
        key = str(tid) if tid else ""
        if owner_of(key, 0) == k:
            # (a call finish() itself ended, cut by a detach at the log's end: the last line)
            tail.append((e.ts, pending_line.get(key, i + 1), fmt(e)))
    # (a call still in flight may be the first to show -y decorations: finish() saw it)
    cut = [c for c in conv.cut_calls if owner_of(str(c[0]) if c[0] else "", 0) == k]
    conn.send(("tail", tail, conv.capabilities["fd_paths"], cut))


def may_hold_last_call(text: str) -> bool:
    """The line may be one the converter holds as its tid's last call: a call's entry alone
    (lines.py kind 'cut') or a call a signal interrupted (``= ? ERESTART...``). Says yes too
    often, never too rarely."""
    if " = " not in text:
        return "(" in text and not text.rstrip("\r\n").endswith("...>")
    return " = ? " + INTERRUPTED in text


def _is_signal(text: str) -> bool:
    return "--- SIG" in text


def classify(text: str) -> Tuple[str, bool, bool]:
    """(tid column text, global, stateful) of a log line, as the workers route it.

    ``global``: the line may change state shared between threads (module doc); ``stateful``:
    it may be a half of a call (``<unfinished ...>``, ``<detached ...>``, ``<... resumed>``),
    whose pairing is the tid's own state. Both may say yes too often, never too rarely
    (tests check this against parse_line). Lines without a tid column give "" (tid 0).
    """
    sp = text.find(" ")
    key = text[:sp] if sp > 0 else ""
    if is_digits(key):           # the usual "1234  ts name(...)": plain string tests
        j = text.find("<... ")
        if j >= 0:
            return key, text.startswith(_RESUMED_GLOBAL, j + 5), True
        p = text.find("(")
        glob = ((p >= 0 and text[text.rfind(" ", 0, p) + 1:p] in _GLOBAL_NAMES)
                or "+++" in text or "Process " in text or "--- SIG" in text)
        return key, glob, text.endswith(_PENDING_ENDS)
    # "[pid  1234] ...", no tid column, odd lines: the exact head regex
    bracket, plain, resumed, token = _HEAD(text).groups()
    key = bracket or plain or ""
    # A line without a tid column belongs to a task chosen from shared state (the only one
    # traced, or the first process), or continues a line strace cut: every worker reads it.
    # So does a line strace cut with its own message ("...NULLstrace: Process 3812 detached").
    glob = token in _GLOBAL_TOKENS or not key or "strace: Process " in text \
        or "^CProcess " in text or "--- SIG" in text
    return key, glob, resumed is not None or text.endswith(_PENDING_ENDS)


# --------------------------------------------------------------------------- parent
def _context() -> "multiprocessing.context.BaseContext":
    # fork is cheapest (no re-import) but unsafe in a process running other threads.
    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


class WorkerError(Exception):
    """A worker failed or died; the message says which and why."""


def _recv(conn: Connection, k: int) -> bytes:
    try:
        return conn.recv_bytes()
    except EOFError:
        raise WorkerError(f"import worker {k} died") from None


def _message(raw: bytes, k: int) -> tuple:
    msg = pickle.loads(raw)
    if msg[0] == "error":
        raise WorkerError(f"import worker {k} failed:\n{msg[1]}")
    return msg


def convert_sharded(log_path: str, plan: Plan, write: Callable[[bytes], None],
                    progress: Optional[Callable[[int], None]] = None) -> ShardedResult:
    """Run the plan's workers over the log; merged rows go to ``write`` (module doc).
    ``progress(offset)``: at each batch, the offset the slowest worker reached."""
    from ..tracefile.codec import encode_row
    ctx = _context()
    conns: List[Connection] = []
    procs = []
    offsets = [ctx.Value("q", 0, lock=False) for _ in range(plan.workers)] if progress else []
    try:
        for k in range(plan.workers):
            parent_end, child_end = ctx.Pipe(duplex=True)
            p = ctx.Process(target=_worker, args=(child_end, log_path, k, plan,
                                                  offsets[k] if offsets else None),
                            name=f"hangtrace-import-{k}", daemon=True)
            p.start()
            child_end.close()            # else a dead worker would not give EOF here
            conns.append(parent_end)
            procs.append(p)
        stats: List[dict] = []
        while True:
            raws = [_recv(c, k) for k, c in enumerate(conns)]
            if all(r[:1] == b"R" for r in raws):
                # Every worker sends one slot per line of the batch, "\0"-separated (rows are
                # JSON: never a NUL); each line's rows are in its owner's slot, the other
                # slots are empty. Concatenating the slots line by line is the sequential order.
                slots = [r[1:].split(b"\0") for r in raws]
                if len({len(x) for x in slots}) != 1:
                    raise WorkerError("import workers out of step")
                if len(slots) == 2:
                    write(b"".join(map(operator.add, slots[0], slots[1])))
                else:
                    write(b"".join(map(b"".join, zip(*slots))))
                if progress is not None:
                    progress(min(v.value for v in offsets))
                continue
            for k, r in enumerate(raws):
                if r[:1] != b"R":
                    _message(r, k)       # raises if it is an error report
            if any(r[:1] == b"R" for r in raws):
                raise WorkerError("import workers out of step")
            stats = [_message(r, k)[1] for k, r in enumerate(raws)]
            break
        rows = sum(s["rows"] for s in stats)
        # The log's end: the ts of the last timestamped line, whoever owns it.
        with_ts = [s for s in stats if s["last_line"] >= 0]
        last = max(with_ts, key=lambda s: s["last_line"]) if with_ts else None
        first = min(with_ts, key=lambda s: s["first_line"]) if with_ts else None
        end_ts = last["last_ts"] if last else None
        caps = {name: any(s["capabilities"][name] for s in stats)
                for name in stats[0]["capabilities"]}
        for c in conns:
            c.send((end_ts, caps["timestamps"]))
        tails: List[Tuple[float, int, bytes]] = []
        cut_calls: List[Tuple[int, str, str]] = []
        for k, c in enumerate(conns):
            msg = _message(_recv(c, k), k)
            tails.extend(msg[1])
            caps["fd_paths"] = caps["fd_paths"] or msg[2]
            cut_calls.extend(msg[3])
        tails.sort(key=lambda t: (t[0], t[1]))
        out = [t[2] for t in tails]
        unparsed = sum(s["unparsed"] for s in stats)
        bad = [s for s in stats if s["bad_line"] >= 0]
        bad_sample = min(bad, key=lambda s: s["bad_line"])["bad_sample"] if bad else ""
        if unparsed:
            end = end_ts if end_ts is not None else 0.0
            out.append(encode_row(ev.Lost(end, unparsed, "unparsed strace lines", bad_sample)))
        if out:
            write(b"".join(out))
        for p in procs:
            p.join()
        return ShardedResult(
            rows=rows + len(out), lines=sum(s["lines"] for s in stats), unparsed=unparsed,
            bad_sample=bad_sample, first_ts=first["first_ts"] if first else None,
            last_ts=end_ts, capabilities=caps, processes=stats[0]["processes"],
            truncated=any(s["truncated"] for s in stats),
            names=frozenset(n for s in stats for n in s["names"]),
            numbers={k: v for s in stats for k, v in s["numbers"].items()},
            cut_calls=sorted(cut_calls))
    finally:
        for c in conns:
            c.close()
        for p in procs:
            if p.is_alive():
                p.terminate()
            p.join()
