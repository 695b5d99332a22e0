"""A trace file read into the analyzer: the one place where a trace's header sets an
``Analyzer`` up (``analyzer_for``; ``analyzer_from`` for a header alone) and its events are fed
to it (``analyze_trace``), for ``analyze``, ``import-strace --analyze``, the exports and the
tests alike; ``compiled_helpers``: the compiled twins of reading and feeding, where built;
``trace_notes``: the notes a trace brings to its report (``header_notes``: its header's;
``ended_early_note``: "recording ended early: REASON", as attach's own report words it);
``mark_cut_short``: what the report of a trace cut short says of it. Bad
files raise errors.BadInput (CorruptTrace, NotATrace).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional

from .. import events as ev
from ..analysis.analyzer import Analyzer, collector_paused
from ..report import Report
from ..tracefile.format import TraceReader

__all__ = ["analyze_trace", "analyzer_for", "analyzer_from", "compiled_helpers", "header_notes",
           "mark_cut_short", "trace_notes", "ended_early_note", "COMPLETE"]

COMPLETE = "complete"       # the end record's reason when the window ran its whole length


def analyzer_for(reader: TraceReader) -> Analyzer:
    """An Analyzer set up from a trace's header (start, backends, capabilities, processes)."""
    return analyzer_from(reader.info.header, reader.info.processes)


def analyzer_from(h: Dict[str, Any], processes: List[ev.ProcessInfo]) -> Analyzer:
    """An Analyzer set up from a trace header ``h`` and its processes (a trace's, or the one
    an strace log's trace would have: load/log.py)."""
    opts = h.get("options") or {}
    return Analyzer(start=h.get("start"), backends=h.get("backends"),
                    capabilities=opts.get("capabilities"), processes=processes,
                    roots=h.get("targets"), source=h.get("source", "attach"))


def analyze_trace(path: str, extra: Iterable[ev.Event] = (),
                  progress: Optional[Callable[[int], None]] = None) -> Report:
    """Read a trace file (streaming) and analyze it, with ``extra`` events after the trace's
    (Flight Recorder dumps given beside it). Raises errors.BadInput (CorruptTrace, NotATrace)
    on bad files. ``progress(offset)``: the reader's progress callback."""
    reader = TraceReader(path, progress)
    an = analyzer_for(reader)
    with collector_paused():
        fast = compiled_helpers()
        an.feed_batches(reader.batches(fast and fast.parse_rows), fast)
    for e in extra:
        an.feed(e)
    info = reader.info
    end = info.end.closed_at() if info.end is not None else None
    opts = info.header.get("options") or {}
    report = an.report(end=end, trace_path=path,
                       truncated=info.truncated or bool(opts.get("log_truncated")),
                       extra_notes=trace_notes(info))
    return mark_cut_short(report, info.header)


def mark_cut_short(report: Report, header: Dict[str, Any]) -> Report:
    """A trace cut short (a truncated file, a recording killed mid-write, a log whose end was
    cut) says so (issue 43 item 3): ``window["asked"]``, the seconds the recording was asked to
    last where its header has them, and where it ends, first among what was not observed (the
    verdict line shows it: Report.cut_short_text)."""
    if not report.truncated:
        return report
    asked = (header.get("options") or {}).get("duration")
    if isinstance(asked, (int, float)) and asked > 0:
        report.window["asked"] = asked
    report.unobserved.insert(0, f"{report.cut_short_text()}: what came after is unknown")
    return report


def compiled_helpers() -> Any:
    """The compiled helpers (strace/fastpath.py's module) whose reader of trace rows
    (tracefile/csrc/rows.c) and loop over calls (analysis/accumulate/csrc/) the analysis
    uses, or None: the pure-Python path."""
    from ..strace.fastpath import compiled
    return compiled()


def trace_notes(info: Any) -> List[str]:
    """The notes a trace brings to its report (a TraceReader's ``info`` once read): the
    recording's errors and notes from the header, and corrupt lines skipped."""
    notes = header_notes(info.header)
    if info.end is not None:
        notes.extend(ended_early_note(info.end.reason))
    if info.bad_lines:
        notes.append(f"{info.bad_lines} corrupt lines in the trace were skipped")
    return notes


def ended_early_note(reason: str, stopped_by: str = "") -> List[str]:
    """The note of a recording that ended for ``reason`` (its end record's: "interrupted",
    "targets-exited", "error"), with the signal that ended it where known; none when complete."""
    if not reason or reason == COMPLETE:
        return []
    return [f"recording ended early: {reason}" + (f" ({stopped_by})" if stopped_by else "")]


def header_notes(header: Dict[str, Any]) -> List[str]:
    """The recording's errors and notes a trace header holds, for its report."""
    opts = header.get("options") or {}
    return list(opts.get("errors", [])) + list(opts.get("notes", []))
