"""Reading strace logs from disk: one file (plain or gzip, told by content) as lines or blocks.

Contract:
- ``LogFile(path, progress=None)`` opens a log (``progress(offset)``: called after each block
  with the offset reached in the file as stored, render/progress.py's callback); ``text_lines()`` yields decoded lines (newline kept; bulk UTF-8
  decoding in C, undecodable bytes survive as surrogates), ``line_batches()`` lists of lines
  (newline dropped) a block at a time, ``raw_lines()`` bytes lines, ``blocks(size)`` blocks of
  whole lines (bytes). A gzip stream cut short ends the
  iteration and sets ``truncated``. ``close()`` is idempotent.
- ``ImportError_`` is the importer's one-line error for the user (missing file, binary data, not
  strace); opening trouble raises it here already.
- ``sniff(path)`` refuses binary files and files where nothing in the first lines parses.

This module sits below both the sequential importer (strace/importer.py) and the sharded one
(strace/parallel.py), so neither imports the other for it.
"""
from __future__ import annotations

import io
from typing import Callable, Iterator, List, Optional

from ..errors import BadInput
from ..tracefile import format as trace
from .lines import parse_line

__all__ = ["ImportError_", "LogFile", "sniff", "SNIFF_LINES"]

SNIFF_LINES = 200
_BROKEN = trace.BROKEN


class ImportError_(BadInput):
    """The log cannot be imported; the message is one line for the user (errors.py)."""


class LogFile:
    """A plain or gzip strace log; iteration stops (and says so) where a gzip breaks."""

    def __init__(self, path: str, progress: Optional[Callable[[int], None]] = None) -> None:
        self.path = path
        self.truncated = False
        # Read two or three times (sniff, first pass, conversion): a regular file only.
        self._raw, self._stream = trace.open_input(path, ImportError_, pipes=False)
        self._on_block = trace.offset_reporter(self._raw, progress)

    def offset(self) -> int:
        """Where reading got to in the file as stored."""
        return self._raw.tell()

    def raw_lines(self) -> Iterator[bytes]:
        try:
            for line in self._stream:
                yield line
        except _BROKEN:
            self.truncated = True

    def text_lines(self) -> Iterator[str]:
        text = io.TextIOWrapper(self._stream, encoding="utf-8",  # type: ignore[arg-type]
                                errors="surrogateescape", newline="")
        try:
            for line in text:
                yield line
        except _BROKEN:
            self.truncated = True
        finally:
            text.detach()

    def line_batches(self, size: int = 1 << 20) -> Iterator[List[str]]:
        """The lines (without their newlines) in lists, one per block of ``size`` bytes:
        decoding and splitting in C, one Python step per block instead of per line."""
        for block in self.blocks(size):
            lines = block.decode("utf-8", "surrogateescape").split("\n")
            if lines[-1] == "":
                lines.pop()
            yield lines

    def blocks(self, size: int = 4 << 20) -> Iterator[bytes]:
        """The log in blocks of whole lines (the last one may lack its newline)."""
        try:
            yield from trace.byte_blocks(self._stream, size, on_block=self._on_block)
        except _BROKEN:
            self.truncated = True
        except trace.LineTooLong as e:
            raise ImportError_(f"{self.path}: not a strace log: {e}") from None

    def close(self) -> None:
        self._stream.close()
        self._raw.close()

    def __enter__(self) -> "LogFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sniff(path: str) -> None:
    """Refuse binary files and files where nothing looks like strace output."""
    seen = parsed = 0
    with LogFile(path) as log:
        for raw in log.raw_lines():
            if b"\0" in raw:
                raise ImportError_(f"{path}: binary data, not a strace text log")
            seen += 1
            if parse_line(raw.decode("utf-8", "surrogateescape")) is not None:
                parsed += 1
                break
            if seen >= SNIFF_LINES:
                break
    if seen == 0:
        raise ImportError_(f"{path}: empty log" if not log.truncated
                           else f"{path}: gzip data is corrupt from the start")
    if parsed == 0:
        raise ImportError_(f"{path}: does not look like strace output "
                           f"(none of the first {seen} lines parse)")
