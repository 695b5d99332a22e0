"""Reading strace logs from disk: one file (plain or gzip, told by content) as lines or blocks.

Contract:
- ``LogFile(path, progress=None)`` opens a log (``progress(offset)``: render/progress.py's
  callback); ``text_lines()``, ``line_batches()``, ``blocks(size)`` and ``head(n)`` read it.
  Every read is bounded: a line over tracefile/blocks.py's MAX_LINE_CHARS is an ImportError_. A
  gzip stream cut short ends the iteration and sets ``truncated``. ``close()`` is idempotent.
- ``ImportError_``: the importer's one-line error (missing file, binary data, not strace).
- A line that holds a NUL is never parsed (``LogFile.blocks``); other control bytes are the
  parser's: strace escapes them all, so a line that holds one raw does not parse.
- ``sniff(path)`` refuses a log only when most of its first MiB is not text (its docstring).
Below both importers (strace/importer.py, strace/parallel.py): neither imports the other for it.
"""
from __future__ import annotations

import os
from typing import Callable, Iterator, List, Optional

from ..errors import BadInput
from ..tracefile import format as trace
from .lines import glued_message, parse_line

__all__ = ["ImportError_", "LogFile", "sniff", "SNIFF_LINES", "NUL_LINE_MARK", "LINE_BLOCK",
           "ends_mid_line"]

SNIFF_LINES = 200
LINE_BLOCK = 1 << 20        # bytes of a block of line_batches
SNIFF_BYTES = 1 << 20
_BROKEN = trace.BROKEN


class ImportError_(BadInput):
    """The log cannot be imported; the message is one line for the user (errors.py). Opening
    trouble raises it here already (``LogFile``)."""


class LogFile:
    """A plain or gzip strace log; iteration stops (and says so) where a gzip breaks.
    ``progress(offset)`` is called after each block with the offset reached in the file as stored.
    ``text_lines()`` yields decoded lines (newline kept; bulk UTF-8 decoding in C, undecodable
    bytes survive as surrogates), ``line_batches()`` lists of lines (newline dropped) a block at a
    time, ``blocks(size)`` blocks of whole lines (bytes), ``head(n)`` the first bytes. Lines are
    split at "\\n" only, and a line over MAX_LINE_CHARS (64 MiB, the trace reader's bound) is an
    ImportError_."""

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

    def line_batches(self, size: int = LINE_BLOCK) -> Iterator[List[str]]:
        """The lines (without their newlines) in lists, one per block of ``size`` bytes:
        decoding and splitting in C, one Python step per block instead of per line."""
        for block in self.blocks(size):
            lines = block.decode("utf-8", "surrogateescape").split("\n")
            if lines[-1] == "":
                lines.pop()
            yield lines

    def blocks(self, size: int = 4 << 20, reuse: bool = False) -> Iterator[bytes]:
        """The log in blocks of whole lines (the last one may lack its newline); a line that
        holds a NUL comes out as ``_unparsable`` makes it (module doc). ``reuse``: blocks.py
        byte_blocks's (one bytearray refilled: for a reader that keeps nothing of a block).
        A line that holds a NUL: ``blocks()`` (which every reader of a log goes through: both
        passes, the -ff reader, the sharded workers) gives it marked (``NUL_LINE_MARK``, its NULs
        written \\0), so the importer counts it as a line not understood and shows it as such."""
        try:
            for block in trace.byte_blocks(self._stream, size, on_block=self._on_block,
                                           reuse=reuse):
                yield block if b"\0" not in block else _nul_lines_unparsable(block)
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


NUL_LINE_MARK = b"binary line: "      # no strace line starts so: the parsers understand none


def _unparsable(line: bytes) -> bytes:
    """A line that holds a NUL (a crash's zeros, a torn write; strace escapes every NUL it
    prints), as no parser understands it: marked, its NULs shown as \\0."""
    return NUL_LINE_MARK + line.replace(b"\0", b"\\0")


def _nul_lines_unparsable(block: bytes) -> bytes:
    """``block`` with each of its lines that holds a NUL made ``_unparsable``."""
    return b"\n".join(_unparsable(line) if b"\0" in line else line
                      for line in block.split(b"\n"))


def _is_binary_line(line: bytes) -> bool:
    """A NUL or a control byte strace never prints raw (it escapes every one)."""
    return len(line.translate(None, _CONTROL_BYTES)) != len(line)


def _mostly_not_text(head: bytes) -> bool:
    """Whether the bytes of the binary lines of ``head`` (NULs not counted: the zeros a crash
    leaves weigh nothing) are at least those of its text lines (module doc)."""
    text = binary = 0
    for line in head.split(b"\n"):
        if _is_binary_line(line):
            binary += len(line) - line.count(b"\0")
        else:
            text += len(line)
    return binary >= text


# NUL and the control bytes but tab, newline, CR, VT, FF and ESC (which a log may hold)
_CONTROL_BYTES = bytes(c for c in range(32) if c not in b"\t\n\r\x0b\x0c\x1b") + b"\x7f"


def sniff(path: str) -> None:
    """Refuse a log that is mostly not text, or where nothing looks like strace output, from
    its first ``SNIFF_BYTES`` (module doc; bounded: a 1 GB file without a newline is refused
    at once).
    It reads at most ``SNIFF_BYTES`` (the first MiB) and refuses a log only when most of that is
    not text: a line holding a NUL or a control byte strace never prints raw is a binary line, and
    the log is refused ("binary data") when its binary lines' bytes, NULs not counted, are not
    fewer than its text lines' bytes (a log of nothing but NULs too). So a NUL or a binary run
    inside a text log, and the NULs a crash leaves at its end, are lines the importer counts as not
    understood, never a refusal. Then it refuses a log where no line ends in that MiB, and one
    where nothing in the first ``SNIFF_LINES`` lines parses."""
    with LogFile(path) as log:
        head = log.head(SNIFF_BYTES)
        truncated = log.truncated
    if not head:
        raise ImportError_(f"{path}: empty log" if not truncated
                           else f"{path}: gzip data is corrupt from the start")
    if _mostly_not_text(head):
        raise ImportError_(f"{path}: binary data, not a strace text log")
    lines = head.split(b"\n")
    if len(head) == SNIFF_BYTES and b"\n" not in head:
        raise ImportError_(f"{path}: does not look like strace output (no line ends in its "
                           f"first {SNIFF_BYTES >> 20} MiB)")
    if len(head) == SNIFF_BYTES:
        lines.pop()                        # cut at the limit: not a whole line
    seen = 0
    for raw in lines[:SNIFF_LINES]:
        seen += 1
        text = raw.decode("utf-8", "surrogateescape")
        k = glued_message(text)          # "read(5, ^CProcess 7716 detached": the call's part
        if parse_line(text[:k] if k > 0 else text) is not None:
            return
    raise ImportError_(f"{path}: does not look like strace output "
                       f"(none of the first {seen} lines parse)")


_TAIL_BYTES = 64 * 1024


def ends_mid_line(path: str) -> bool:
    """Whether the plain-text log at ``path`` was cut mid-line: its last line lacks its newline
    and is no strace line (the entry of a call strace was stopped inside, ``read(3, ``, is one:
    kind 'cut'). A gzip log says so by breaking (``LogFile.truncated``); a pipe, an -ff set or
    an unreadable file: False."""
    try:
        with open(path, "rb") as f:
            if f.read(2) == b"\x1f\x8b":
                return False
            end = f.seek(0, os.SEEK_END)
            f.seek(max(0, end - _TAIL_BYTES))
            tail = f.read(_TAIL_BYTES)
    except OSError:
        return False
    if not tail or tail.endswith(b"\n"):
        return False
    last = tail.rsplit(b"\n", 1)[-1].decode("utf-8", "surrogateescape")
    return bool(last.strip()) and parse_line(last) is None
