"""A strace log (one file or an -ff set) as the events its trace would hold, with no trace file
between: what ``hangtrace analyze LOG`` feeds the analyzer (load/log.py).

Contract: ``LogStream(path, progress=None, pid=None)`` reads the log as import_strace does
(importer.py: the first pass, then one conversion, its rows counted and dropped) for what
that trace's header says: ``header``, ``processes``, ``end`` and ``events`` (how many); it
raises ImportError_ as import_strace does. ``batches(progress=None)`` converts the log again
and yields its events in lists, in the trace's order (the same log, the same events), the
memory bounded as an import's. ``close()`` (or leaving its ``with``) closes the log.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional

from .. import events as ev
from .importer import convert_log, converted, converter_for, open_log, trace_header

__all__ = ["LogStream"]

Progress = Callable[[int], None]


class LogStream:
    """A log's header facts at once, its events on demand (module doc)."""

    def __init__(self, path: str, progress: Optional[Progress] = None,
                 pid: Optional[int] = None) -> None:
        self._source, self._facts, self._base_date = open_log(path, progress, pid)
        try:
            conv = convert_log(self._source, self._facts, self._base_date, _dropped)
            header, end, _, _ = trace_header(self._source.name, conv, self._facts,
                                             self._source.notes,
                                             getattr(self._source, "path", None))
        except BaseException:
            self._source.close()
            raise
        self.header: Dict[str, Any] = header
        self.processes: List[ev.ProcessInfo] = sorted(conv.processes.values(),
                                                      key=lambda p: p.pid)
        self.end: float = end
        self.events: int = conv.rows

    def batches(self, progress: Optional[Progress] = None) -> Iterator[List[ev.Event]]:
        """The log's events, converted once more, in lists (module doc); ``progress``: the
        offsets this pass reaches (one log file), instead of the constructor's."""
        if progress is not None:
            self._source.progress = progress
        return converted(self._source, converter_for(self._facts, self._base_date))

    def close(self) -> None:
        self._source.close()

    def __enter__(self) -> "LogStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _dropped(rows: bytes) -> None:
    """The first conversion's rows: counted by convert_log, not kept."""
