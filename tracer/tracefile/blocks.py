"""Bounded block reading of line-oriented files (traces and strace logs).

Contract: ``byte_blocks(stream, size, limit)`` yields the stream in blocks of whole lines
(bytes); a gzip stream cut short raises one of ``BROKEN`` after yielding every complete line
before the break; a line longer than ``limit`` raises ``LineTooLong``: every read is bounded,
so a file without newlines cannot fill memory, and each byte is copied once whatever the line
lengths (a long line's pieces are joined when it ends). ``MAX_LINE_CHARS`` is the cap every
reader uses: traces and strace logs alike. ``on_block()``, when given, is called before each
block is yielded (progress callbacks: the caller knows where its file is);
``offset_reporter(raw, progress)`` makes one that reports the offset reached in the raw file.
``reuse=True``: every block is the same bytearray, refilled (for readers that keep nothing).
"""
from __future__ import annotations

import gzip
import zlib
from typing import IO, Callable, Iterator, List, Optional

from ..errors import CorruptTrace

__all__ = ["BROKEN", "BLOCK", "MAX_LINE_CHARS", "LineTooLong", "byte_blocks", "offset_reporter"]

# Longest line read (header or event): a longer one is a corrupt trace. A ProcessInfo row with
# 100,000 fds is about 6 MB; a header of 1,000 such processes would not fit, nor be sane.
MAX_LINE_CHARS = 64 << 20
BROKEN = (EOFError, zlib.error, gzip.BadGzipFile, OSError)
BLOCK = 1 << 20


class LineTooLong(CorruptTrace):
    """A line longer than the cap: no trace or strace log holds one; every read is bounded."""


def byte_blocks(stream: IO[bytes], size: int = BLOCK, limit: int = MAX_LINE_CHARS,
                on_block: Optional[Callable[[], None]] = None,
                reuse: bool = False) -> Iterator[bytes]:
    """The stream in blocks of whole lines (bytes; the last may lack its newline). A gzip
    stream cut short raises one of ``BROKEN`` after every complete line before the break was
    yielded: reads go through readinto1 (read1), so the data of a failing read is all that is
    lost. A line longer than ``limit`` bytes raises LineTooLong (the caller adds the file's
    name). The stream is read into one buffer, reused (a block is its one copy out of it: a
    new buffer per read cost a page fault per 4 KiB); a long line grows it (doubling, so each
    byte is copied a bounded number of times). ``reuse``: each block is copied into one
    bytearray, the same object every time (valid until the next block is asked for): no new
    memory per block, whose first touch costs a page fault a page."""
    readinto = getattr(stream, "readinto1", None) or stream.readinto
    out = bytearray() if reuse else None
    buf = bytearray(size)
    have = 0                          # bytes in buf
    tail = 0                          # of which after the last newline: the line being read
    try:
        while True:
            if have + size > len(buf):              # a long line: room for one more read
                buf.extend(bytes(max(len(buf), have + size - len(buf))))
            with memoryview(buf) as view:
                got = readinto(view[have:have + size])
            if not got:
                break
            nl = buf.rfind(b"\n", have, have + got)
            have += got
            if nl < 0:      # no newline: one long line grows here (never joined), up to a cap
                tail += got
                if tail > limit:
                    raise LineTooLong(f"a line is longer than {limit >> 20} MiB")
                continue
            tail = have - nl - 1
            if have < size:              # readinto1 gives what one read gave: gather a block
                continue
            if on_block is not None:
                on_block()
            yield _taken(buf, have - tail, have, out)
            have = tail
    except BROKEN:
        if have > tail:
            yield _taken(buf, have - tail, have, out)
        raise
    if have:
        if on_block is not None:
            on_block()
        yield _taken(buf, have, have, out)


def _taken(buf: bytearray, cut: int, have: int, out: Optional[bytearray] = None) -> bytes:
    """``buf[:cut]`` as bytes, or copied into ``out`` (one copy); what follows, up to
    ``have``, moved to its start."""
    with memoryview(buf) as view:
        if out is None:
            block = bytes(view[:cut])
        else:
            out[:] = view[:cut]
    buf[:have - cut] = buf[cut:have]
    return block if out is None else out  # type: ignore[return-value]


def offset_reporter(raw: IO[bytes], progress: Optional[Callable[[int], None]]
                    ) -> Optional[Callable[[], None]]:
    """``byte_blocks``'s on_block for a progress callback: the offset reached in ``raw`` (a
    pipe has none: nothing is reported)."""
    if progress is None:
        return None

    def tick() -> None:
        try:
            pos = raw.tell()
        except (OSError, ValueError):
            return
        progress(pos)
    return tick
