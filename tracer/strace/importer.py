"""Import an existing strace log (plain or gzip, one file or an ``-ff`` set) into a trace file.

Contract:
- ``import_strace(log_path, out_path, *, compress=None, workers=None, progress=None,
  pid=None) -> ImportResult`` (the arguments: its docstring).
- Any strace output format is accepted (see strace/lines.py); what the log lacked (timestamps,
  durations, fd paths, pids) is recorded in the header options and in the result, with the
  architecture the log shows (strace/arch.py) and what the log could not tell (notes).
- Memory stays bounded whatever the log size (two passes, rows streamed: ``import_strace``).
- A gzip log cut short imports up to where it breaks (``ImportResult.truncated``).
- Trouble with the input (missing, unreadable, binary, not strace) raises ``ImportError_``
  with a one-line message for the CLI; no temporary file or worker process outlives the call.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import gc
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from .. import events as ev
from ..outputs import check_target, scratch_beside
from ..tracefile import format as trace
from ..tracefile.codec import encode_rows
from ..tracefile.rows import RowSink, write_trace
from .arch import log_machine
from .convert import StraceConverter
from .ff import open_source
from .log import ImportError_, ends_mid_line
from .parallel import WorkerError, convert_sharded, plan_shards
from .scan import LogFacts

__all__ = ["ImportError_", "ImportResult", "import_strace", "open_log", "convert_log", "converted",
           "converter_for", "trace_header"]


@dataclass
class ImportResult:
    out_path: str
    events: int
    lines: int
    unparsed: int
    capabilities: Dict[str, bool]
    processes: List[ev.ProcessInfo] = field(default_factory=list)
    start: Optional[float] = None
    end: Optional[float] = None
    truncated: bool = False
    warnings: List[str] = field(default_factory=list)
    machine: str = "unknown"
    notes: List[str] = field(default_factory=list)

    @property
    def span(self) -> float:
        return (self.end - self.start) if self.start is not None and self.end is not None else 0.0


def _base_date(mtime: float, first_tod: Optional[float]) -> Optional[_dt.date]:
    """The date of a -t/-tt log: the log was last written when it ended, so it began on the
    file's modification date unless that would put its start after the modification time."""
    if first_tod is None:
        return None
    stamp = _dt.datetime.fromtimestamp(mtime)
    day = stamp.date()
    start = _dt.datetime.combine(day, _dt.time()) + _dt.timedelta(seconds=first_tod)
    if start > stamp + _dt.timedelta(minutes=1):
        day -= _dt.timedelta(days=1)
    return day


@dataclass
class _Converted:
    """What a conversion (sequential or sharded) leaves for the header and the result."""
    rows: int
    lines: int                      # parsed lines
    unparsed: int
    capabilities: Dict[str, bool]
    processes: Dict[int, ev.ProcessInfo]
    first_ts: Optional[float]
    last_ts: Optional[float]
    truncated: bool
    names: frozenset = frozenset()
    numbers: Dict[str, int] = field(default_factory=dict)
    cut_calls: List[Tuple[int, str, str]] = field(default_factory=list)   # convert.py's


def open_log(log_path: str, progress: Optional[Callable[[int], None]] = None,
             pid: Optional[int] = None) -> Tuple[Any, LogFacts, Optional[_dt.date]]:
    """(source, facts, base date) of the log at ``log_path``: strace/ff.py's source, sniffed
    and read by the first pass (module doc); ``pid`` as import_strace's. Raises ImportError_."""
    source = open_source(log_path, progress)
    source.sniff()
    facts = source.scan()
    facts.given_pid = pid
    return source, facts, _base_date(source.mtime(), facts.first_tod)


def import_strace(log_path: str, out_path: str, *, compress: Optional[bool] = None,
                  workers: Optional[int] = None,
                  progress: Optional[Callable[[int], None]] = None,
                  pid: Optional[int] = None) -> ImportResult:
    """Convert the strace log at ``log_path`` into a trace file at ``out_path`` (module doc).
    ``pid``: the N of ``strace -p N`` (import-strace --pid), the task of the lines without a pid
    column when the log does not name it; without it such a log has one thread of unknown identity
    (tid 0, ``pid_unknown``), and a note says to give it. ``progress(offset)`` is called as the log
    is read (both passes, and the workers' through strace/parallel.py), with the offset reached in
    the file as stored. ``log_path`` is one log file, or the output of ``strace -ff -o PREFIX``:
    the directory that holds the PREFIX.TID files or PREFIX itself (strace/ff.py merges them in
    time order, tids from the file names). ``compress`` None means "gzip when out_path ends in .gz"
    (TraceWriter's rule). ``workers``: None converts in this process; a number >= 2 shards a single
    log over that many worker processes (strace/parallel.py) - the same rows in the same order
    (never a -r log: its deltas are summed line by line). Sharding is off by default: every worker
    reads the whole log, which on a busy two-core machine costs more than it saves
    (bench/import_speed.py measures both). Memory: a first pass (strace/scan.py) reads the log in
    blocks for what must be known before converting (which process each tid belongs to, the time
    format); the second streams events to a temporary file next to the output (gzip-compressed on
    the way for a .gz trace); the final file is the header, which lists every process, then that
    file's rows, then the end record, renamed over ``out_path`` once whole (outputs.replacing: a
    link there is refused, a failed import leaves it as it was)."""
    check_target(out_path)               # a link or a special file there: refused at once
    source, facts, base_date = open_log(log_path, progress, pid)
    who = facts.membership()
    plan = None
    if workers is not None and workers >= 2 and source.single_file and not facts.relative_ts:
        plan = plan_shards(facts.tid_lines, size=facts.size, first_tod=facts.first_tod,
                           membership=who, base_date=base_date, workers=workers)
    if compress is None:
        compress = out_path.endswith(".gz")      # TraceWriter's rule
    tmp = scratch_beside(out_path)        # OutputError (one line) when it cannot be
    sink: Optional[RowSink] = None
    try:
        sink = RowSink(tmp, compress)
        if plan is not None:
            try:
                sharded = convert_sharded(log_path, plan, sink.write, progress)
            except WorkerError as e:
                raise ImportError_(f"{log_path}: {e}") from None
            conv = _Converted(sharded.rows, sharded.lines, sharded.unparsed,
                              sharded.capabilities, sharded.processes, sharded.first_ts,
                              sharded.last_ts, sharded.truncated, sharded.names,
                              sharded.numbers, sharded.cut_calls)
        else:
            conv = convert_log(source, facts, base_date, sink.write)
        sink.close()
        tmp.close()
        header, end, machine, notes = trace_header(source.name, conv, facts, source.notes,
                                                   getattr(source, "path", None))
        write_trace(out_path, header, tmp.name, conv.rows, compress=compress, end_ts=end,
                    reason="log-truncated" if conv.truncated else "complete")
    except OSError as e:
        raise ImportError_(f"{out_path}: write failed: {e.strerror}") from None
    finally:
        if sink is not None:             # after an error: end the member quietly
            with contextlib.suppress(OSError, ValueError):
                sink.close()
        if not tmp.closed:
            tmp.close()
        with contextlib.suppress(OSError):
            os.unlink(tmp.name)
        source.close()
    caps = conv.capabilities
    warnings = []
    if conv.truncated:
        warnings.append("the gzip log is cut short; imported up to where it breaks")
    if conv.unparsed:
        warnings.append(f"{conv.unparsed} line(s) were not strace output and were skipped")
    for name, have in caps.items():
        if not have:
            warnings.append(f"the log has no {name.replace('_', ' ')}")
    processes = sorted(conv.processes.values(), key=lambda p: p.pid)
    return ImportResult(out_path, conv.rows, conv.lines + conv.unparsed, conv.unparsed, caps,
                        processes, conv.first_ts, conv.last_ts, conv.truncated,
                        warnings + notes, machine, notes)


def trace_header(name: str, conv: _Converted, facts: LogFacts, source_notes: List[str],
                 path: Optional[str] = None) -> Tuple[Dict[str, Any], float, str, List[str]]:
    """(the trace header, end time, machine, notes) of a converted log: what its trace holds
    before and after its events. ``log_truncated``: a gzip that broke, or the one log file at
    ``path`` cut mid-line (log.ends_mid_line)."""
    processes = sorted(conv.processes.values(), key=lambda p: p.pid)
    start = conv.first_ts if conv.first_ts is not None else 0.0
    end = conv.last_ts if conv.last_ts is not None else start
    roots = [p.pid for p in processes if p.ppid not in conv.processes]
    machine, why = log_machine(conv.names, conv.numbers, facts.triplets)
    notes = list(facts.membership().notes) + list(source_notes)
    if any(p.pid == 0 for p in processes):
        notes.append("the log does not name its process (no pid column, no attach line): "
                     "give --pid N, the N of strace -p N")
    notes += cut_call_notes(conv.cut_calls)
    alone = [p.pid for p in processes if p.threads_partial]
    if alone:
        notes.append("strace attached to " + ", ".join(f"thread {p}" for p in alone)
                     + " alone (no -f): other threads of " + ("its" if len(alone) == 1
                                                               else "their")
                     + " process, if any, are not in the log, and no deadlock proof rests "
                     "on what they would do")
    header = trace.make_header(
        backends=["strace-log"], source="import-strace", targets=roots, start=start,
        processes=processes,
        options={"log": name, "capabilities": {**conv.capabilities,
                                               **view_capabilities(facts, processes)},
                 "lines": conv.lines + conv.unparsed, "unparsed": conv.unparsed,
                 "log_truncated": conv.truncated or bool(path and ends_mid_line(path)),
                 "machine_evidence": why, "notes": notes})
    header["machine"] = machine          # the log's, not this host's
    return header, end, machine, notes


def view_capabilities(facts: LogFacts, processes: List[ev.ProcessInfo]) -> Dict[str, bool]:
    """Whether the log is a whole view of what it traced (issue 32 item 5): ``one_session``
    (not several strace sessions joined in one file: their states are of different times)
    and ``all_threads`` (no process traced by one thread alone: strace -p TID without -f).
    The analysis proves no deadlock from a view that lacks either."""
    return {"one_session": facts.session_count() <= 1,
            "all_threads": not any(p.threads_partial for p in processes)}


def cut_call_notes(cut_calls: List[Tuple[int, str, str]]) -> List[str]:
    """What the report says of the calls the log ends in (convert.py ``cut_calls``)."""
    notes = []
    cut = [f"{tid} ({name})" for tid, name, how in cut_calls if how == "cut"]
    if cut:
        notes.append("the log ends while thread" + ("s " if len(cut) > 1 else " ")
                     + _listed(cut) + (" were" if len(cut) > 1 else " was")
                     + " in a call whose end it does not show (unfinished, cut by Ctrl-C, "
                     "strace's detach or the end of the file): taken as blocked in it from "
                     "its start to the end of the log")
    hit = [f"{tid} ({name})" for tid, name, how in cut_calls if how == "interrupted"]
    if hit:
        notes.append("a signal interrupted the last call of thread" + ("s " if len(hit) > 1
                                                                      else " ")
                     + _listed(hit) + " (= ? ERESTART...) and the log shows nothing of "
                     + ("them" if len(hit) > 1 else "it") + " after: taken as blocked in it "
                     "from its start to the signal")
    return notes


def _listed(items: List[str], most: int = 8) -> str:
    more = len(items) - most
    return ", ".join(items[:most]) + (f" and {more} more" if more > 0 else "")


def converter_for(facts: LogFacts, base_date: Optional[_dt.date]) -> StraceConverter:
    """The converter of a log whose first pass found ``facts``."""
    who = facts.membership()
    return StraceConverter(pid_of=who.pid_of.get, base_date=base_date, root_pid=who.root_pid,
                           alone=who.alone, unprefixed_tid=who.unprefixed_tid,
                           relative_times=facts.relative_ts)


def converted(source: Any, conv: StraceConverter) -> Iterator[List[ev.Event]]:
    """The hot loop: every log line through the converter, its events in lists (one per batch
    of lines), then what ``finish`` gives (the calls still in flight, the count of lines not
    understood) in the last."""
    events_of = conv.events_batch
    for batch in source.line_batches():
        yield events_of(batch)
    yield conv.finish(conv.last_ts)


def convert_log(source: Any, facts: LogFacts, base_date: Optional[_dt.date],
                take: Callable[[bytes], object]) -> _Converted:
    """One converter over the whole log, in this process: its events' trace rows to ``take``
    (bytes, a batch of lines' at a time: StraceConverter.rows_batch), and what the header
    needs of it."""
    conv = converter_for(facts, base_date)
    count = 0
    # Millions of short-lived, acyclic objects: reference counting frees them all; the cyclic
    # collector would only rescan them over and over (about 15% of the run).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        blocks = getattr(source, "line_blocks", None)     # one log: its bytes, read in C
        rows_of = conv.rows_batch if blocks is None else conv.rows_block
        for batch in (source.line_batches() if blocks is None else blocks()):
            rows, n = rows_of(batch)
            count += n
            take(rows)
        last = conv.finish(conv.last_ts)
        count += len(last)
        take(encode_rows(last))
    finally:
        if gc_was_enabled:
            gc.enable()
    return _Converted(count, conv.lines, conv.unparsed, conv.capabilities,
                      conv.processes, conv.first_ts, conv.last_ts, source.truncated,
                      frozenset(conv.names), dict(conv.numbers), list(conv.cut_calls))
