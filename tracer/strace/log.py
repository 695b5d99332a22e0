"""Reading strace logs from disk: one file (plain or gzip, told by content) as lines or blocks.

Contract:
- ``LogFile(path, progress=None)`` opens a log (``progress(offset)``: called after each block
  with the offset reached in the file as stored, render/progress.py's callback); ``text_lines()`` yields decoded lines (newline kept; bulk UTF-8
  decoding in C, undecodable bytes survive as surrogates), ``line_batches()`` lists of lines
  (newline dropped) a block at a time, ``blocks(size)`` blocks of whole lines (bytes),
  ``head(n)`` the first bytes. Every read is bounded: lines are split at "\\n" only, and a
  line over tracefile/blocks.py's MAX_LINE_CHARS (64 MiB, the trace reader's bound) is an
  ImportError_. A gzip stream cut short ends the iteration and sets ``truncated``.
  ``close()`` is idempotent.
- ``ImportError_`` is the importer's one-line error for the user (missing file, binary data, not
  strace); opening trouble raises it here already.
- ``sniff(path)`` refuses binary files (from the first block: NUL or control bytes) and files
  where nothing in the first lines parses, reading at most ``SNIFF_BYTES``.

This module sits below both the sequential importer (strace/importer.py) and the sharded one
(strace/parallel.py), so neither imports the other for it.
"""
from __future__ import annotations

from typing import Callable, Iterator, List, Optional

from ..errors import BadInput
from ..tracefile import format as trace
from .lines import parse_line

__all__ = ["ImportError_", "LogFile", "sniff", "SNIFF_LINES"]

SNIFF_LINES = 200
SNIFF_BYTES = 1 << 20
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

    def text_lines(self) -> Iterator[str]:
        """The lines, decoded, each with its newline (the last may lack it): split at "\\n"
        only, as ``line_batches``, and read in bounded blocks."""
        for block in self.blocks(1 << 20):
            parts = block.decode("utf-8", "surrogateescape").split("\n")
            last = parts.pop()
            for text in parts:
                yield text + "\n"
            if last:
                yield last

    def head(self, size: int) -> bytes:
        """The first ``size`` bytes at most (fewer when the log is shorter, or when a gzip log
        breaks before: ``truncated``)."""
        out: List[bytes] = []
        have = 0
        read = getattr(self._stream, "read1", None) or self._stream.read   # what a gzip
        try:                                                  # gave before it broke is kept
            while have < size:
                chunk = read(size - have)
                if not chunk:
                    break
                out.append(chunk)
                have += len(chunk)
        except _BROKEN:
            self.truncated = True
        return b"".join(out)

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


def _binary(head: bytes) -> bool:
    """NUL bytes, or more than 1% of control bytes (strace escapes every one it prints)."""
    if b"\0" in head:
        return True
    sample = head[:1 << 16]
    controls = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    return controls * 100 > len(sample)


_CONTROL_BYTES = bytes(c for c in range(32) if c not in b"\t\n\r\x0b\x0c\x1b") + b"\x7f"


def sniff(path: str) -> None:
    """Refuse binary files and files where nothing looks like strace output, from the first
    ``SNIFF_BYTES`` of the log (bounded: a 1 GB file without a newline is refused at once)."""
    with LogFile(path) as log:
        head = log.head(SNIFF_BYTES)
        truncated = log.truncated
    if not head:
        raise ImportError_(f"{path}: empty log" if not truncated
                           else f"{path}: gzip data is corrupt from the start")
    if _binary(head):
        raise ImportError_(f"{path}: binary data, not a strace text log")
    lines = head.split(b"\n")
    if len(head) == SNIFF_BYTES and len(lines) > 1:
        lines.pop()                        # cut at the limit: not a whole line
    if len(lines) == 1 and len(head) == SNIFF_BYTES:
        raise ImportError_(f"{path}: does not look like strace output (no line ends in its "
                           f"first {SNIFF_BYTES >> 20} MiB)")
    seen = 0
    for raw in lines[:SNIFF_LINES]:
        seen += 1
        if parse_line(raw.decode("utf-8", "surrogateescape")) is not None:
            return
    raise ImportError_(f"{path}: does not look like strace output "
                       f"(none of the first {seen} lines parse)")
