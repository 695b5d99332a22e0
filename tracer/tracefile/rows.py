"""A trace file written from rows encoded ahead of its header.

Contract: ``RowSink`` holds the rows (codec.encode_rows / encode_row output) while the header
cannot be written yet; ``write_trace`` writes header, rows and end record exactly as
format.TraceWriter does, from a file of rows (used by the importer, which can only write the
header once it has seen every process of the log).
"""
from __future__ import annotations

import gzip
import shutil
from typing import IO, Callable, Dict

from ..outputs import replacing
from .codec import end_line, header_line

__all__ = ["RowSink", "write_trace"]


class RowSink:
    """Where event rows go before the header can be written (it lists every process): a temp
    file next to the output, gzip-compressed on the way when the trace will be (level 3, as
    TraceWriter), so no second pass over the uncompressed rows is needed."""

    def __init__(self, tmp: IO[bytes], compress: bool) -> None:
        self._gz = (gzip.GzipFile(fileobj=tmp, mode="wb", compresslevel=3, mtime=0)
                    if compress else None)
        self.write: Callable[[bytes], object] = (self._gz or tmp).write

    def close(self) -> None:
        """End the gzip member; tmp itself stays open. A second call does nothing."""
        if self._gz is not None:
            self._gz.close()


def write_trace(out_path: str, header: Dict[str, object], rows_path: str, count: int, *,
                 compress: bool, end_ts: float, reason: str) -> None:
    """The trace file as TraceWriter writes it (header line, rows, end record), from rows
    already encoded in ``rows_path``. Compressed, the file is three gzip members (header,
    rows, end record): one stream to gzip.GzipFile (TraceReader), zcat and gzip -t."""
    head = header_line(header)
    tail = end_line(float(header["start"]), count, reason, end_ts)  # type: ignore[arg-type]
    with replacing(out_path, text=False) as out:     # old file kept until it is whole
        out.write(gzip.compress(head, compresslevel=3) if compress else head)
        with open(rows_path, "rb") as rows:
            shutil.copyfileobj(rows, out, 1 << 20)
        out.write(gzip.compress(tail, compresslevel=3) if compress else tail)
