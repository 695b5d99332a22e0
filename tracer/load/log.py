"""An strace log (one file or an -ff set) read into the analyzer with no trace file between, for
``hangtrace analyze LOG``: strace/stream.py's events, fed to an Analyzer set up from the header
the log's trace would have (load/trace.py's ``analyzer_from``), give the report that analyze of
import-strace's trace gives, byte for byte.

Contract: ``open_log(given, progress=None)``, for load/inputs.py's STRACE_LOG and FF_SET
inputs, reads the log for that header (a ``LogStream``); a file the importer cannot read or
that holds no strace event is NotATrace with ``given.why`` (an -ff set: ImportError_ saying
why). ``analyze_log(log, progress=None)`` feeds it its events, closes it and returns the Report.
"""
from __future__ import annotations

from typing import Callable, Optional

from ..analysis.analyzer import collector_paused
from ..errors import NotATrace
from ..report import Report
from ..strace.importer import ImportError_
from ..strace.stream import LogStream
from .inputs import Input
from .trace import analyzer_from, compiled_helpers, header_notes, mark_cut_short

__all__ = ["analyze_log", "open_log"]

Progress = Callable[[int], None]


def open_log(given: Input, progress: Optional[Progress] = None) -> LogStream:
    """The log ``given`` names, read for its header (module doc)."""
    try:
        log = LogStream(given.path, progress)
    except ImportError_:
        if given.why is None:            # -ff files: the importer's reason
            raise
        raise NotATrace(given.why) from None
    if log.events == 0:
        log.close()
        raise NotATrace(given.why) if given.why else \
            ImportError_(f"{given.path}: no strace events in it")
    return log


def analyze_log(log: LogStream, progress: Optional[Progress] = None) -> Report:
    """The report of ``log``'s events (module doc); ``progress``: the offsets its last pass
    reaches."""
    an = analyzer_from(log.header, log.processes)
    with log, collector_paused():
        an.feed_batches(log.batches(progress), compiled_helpers())
    report = an.report(end=log.end, trace_path=None, extra_notes=header_notes(log.header),
                       truncated=bool((log.header.get("options") or {}).get("log_truncated")))
    return mark_cut_short(report, log.header)
