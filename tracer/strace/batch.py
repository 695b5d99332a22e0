"""The converter's batch path: many log lines at once, most complete calls made in C.

Contract: ``BatchFeed`` is a mixin of ``convert.StraceConverter`` (it reads and updates the
converter's counters, tables and flags, which convert.py owns and documents):
- ``feed_batch(texts)`` is ``feed_text`` over every line, the events in order;
- ``events_batch(texts)`` is the same events, most complete calls made in C where the
  compiled helpers are built (csrc/calls.c convert_calls): equal events whichever path made
  them (tests compare them); ``rows_batch(texts)`` their trace rows (codec.encode_rows'
  bytes), those of convert_calls's calls written in C without events (csrc/rowtext.c);
  ``rows_block(block)`` is ``rows_batch`` of a bytes block's lines (``block_lines``), in C
  read from the bytes themselves (csrc/block.c convert_block; its rows bytes-like, valid
  until the next call).
"""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple

from .. import events as ev
from ..tracefile.codec import encode_row, encode_rows
from .args import _parse_fd_cached
from .decode import (BUILDERS, DIR_CALLS as _DIR_CALLS, FD_FIRST, NV_NAMES as _NV_CACHE,
                     POLL_CALLS, READ_CALLS, WRITE_CALLS, ioctl_request, to_event)
from .lines import INTERRUPTED, split_line

__all__ = ["BatchFeed", "block_lines"]

# The dicts behind the memos of parse_fd (args.py), ioctl_request and the NVIDIA request
# names (decode.py): convert_calls reads them, Python fills them.
_FD_CACHE = getattr(_parse_fd_cached, "__self__", {})
_IOCTL_CACHE = getattr(ioctl_request, "__self__", {})
_HALVES = frozenset({"unfinished", "resumed"})      # the halves convert_calls takes too
# Polls whose kinds are the converter's (epoll_ctl's registrations): convert_calls leaves them
_EPOLL_CALLS = frozenset(n for n in POLL_CALLS if n.startswith("epoll"))
# The classes convert_calls makes events of (called with their fields in order)
_C_CLASSES = (ev.Syscall, ev.WriteCall, ev.ReadCall, ev.IoctlCall)


# Lines after a line convert_block left to Python while it cannot run (no pid column yet,
# a held call, -r times): decoded and fed as a list, this many bytes of them at least.
_WINDOW = 1 << 16


def _pick_calls(name: str) -> Optional[Callable]:
    from .fastpath import compiled
    fast = compiled()
    return None if fast is None else getattr(fast, name)


_CONVERT_CALLS = _pick_calls("convert_calls")
_CONVERT_BLOCK = _pick_calls("convert_block")
_ROW_BUFFER = _pick_calls("RowBuffer")
# Built for CPython 3.10's limited API (setup.py HANGTRACE_ABI3) a RowBuffer is no bytes-like
# object: its rows are handed over as bytes, its tobytes() (a copy).
_ROWS_COPIED = _ROW_BUFFER is not None and hasattr(_ROW_BUFFER, "tobytes")


def block_lines(block: bytes) -> List[str]:
    """The lines of a block of a log (log.py LogFile.line_batches: split at "\n" only, no
    newline kept, no empty last line after the block's final newline)."""
    lines = block.decode("utf-8", "surrogateescape").split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


class BatchFeed:
    """Batch feeding for StraceConverter (module doc)."""

    _rows = None                          # rows_block's RowBuffer, once made

    def _held_calls(self) -> bool:
        """A thread's last call is held (a 'cut' entry, a call a signal interrupted), or the
        log's times are -r deltas to sum: every line goes through feed_text (until the held
        call is released)."""
        return bool(self._cut_entries or self._interrupted  # type: ignore[attr-defined]
                    or self._times.relative)              # type: ignore[attr-defined]

    def feed_batch(self, texts: List[str]) -> List[ev.Event]:
        """``feed_text`` over many lines: the events of all of them, in order."""
        return self._feed_run(texts, 0, False)[0]

    def events_batch(self, texts: List[str]) -> List[ev.Event]:
        """``feed_batch(texts)``, where the compiled helpers are built most complete calls
        made in C (csrc/calls.c convert_calls: the same events), every other line through
        ``_feed_run``."""
        out: List[ev.Event] = []
        self._batch(texts, out, out.extend, None)
        return out

    def rows_batch(self, texts: List[str]) -> Tuple[bytes, int]:
        """(``encode_rows(events_batch(texts))``, how many events): where the compiled helpers
        are built, the rows of the calls convert_calls takes written by it (csrc/rowtext.c),
        without their events (the same bytes)."""
        if _CONVERT_CALLS is None:
            events = self.feed_batch(texts)
            return encode_rows(events), len(events)
        parts: List[bytes] = []
        count = self._batch(texts, parts, lambda events: parts.append(encode_rows(events)),
                            encode_row)
        return b"".join(parts), count

    def rows_block(self, block: bytes) -> Tuple[bytes, int]:
        """``rows_batch(block_lines(block))``: where the compiled helpers are built, the
        lines convert_calls would take read from the block's bytes (csrc/block.c
        convert_block), each line it leaves decoded and fed alone; while it cannot run, the
        lines in windows through ``_batch`` (the same bytes, tests compare them). The rows
        are then the converter's RowBuffer (csrc/rowbuf.c: bytes-like, refilled by the next
        call: no copy of them is made to hand them over), or where it is not bytes-like (the
        limited API's build) its rows as bytes (tobytes(): a copy)."""
        if _CONVERT_BLOCK is None:
            return self.rows_batch(block_lines(block))
        rows = self._rows
        if rows is None:
            rows = self._rows = _ROW_BUFFER()
        rows.clear()
        add = rows.add
        n, pos, count = len(block), 0, 0
        while pos < n:
            if self._c_ready():
                pos, made = self._run_c(_CONVERT_BLOCK, block, pos, rows, encode_row)
                count += made
                if pos >= n:
                    break
                end = block.find(b"\n", pos)
                end = n if end < 0 else end
                events = self._feed_run([block[pos:end].decode("utf-8", "surrogateescape")],
                                        0, False)[0]
                pos = end + 1
                count += len(events)
                add(encode_rows(events))
            else:
                end = block.find(b"\n", min(pos + _WINDOW, n - 1))
                end = n if end < 0 else end + 1
                parts: List[bytes] = []
                count += self._batch(block_lines(block[pos:end]), parts,
                                     lambda events: parts.append(encode_rows(events)),
                                     encode_row)
                for part in parts:
                    add(part)
                pos = end
        return (rows.tobytes() if _ROWS_COPIED else rows), count  # type: ignore[return-value]

    def _c_ready(self) -> bool:
        """convert_calls and convert_block may run: every line's thread has a pid column, the
        log's first time is known, no line is cut, no call held (``_held_calls``)."""
        return self._has_pid and self.first_ts is not None and self._cut is None \
            and not self._held_calls()

    def _run_c(self, fn: Callable, data: object, i: int, out: object,
               encode: Optional[Callable[[ev.Event], bytes]]) -> Tuple[int, int]:
        """convert_calls or convert_block over ``data`` from ``i``, into ``out``; the
        converter's counters updated: (where it stopped, how many events)."""
        ctx = (self._tid_pid, self.names, self._special, BUILDERS, FD_FIRST, _DIR_CALLS,
               _FD_CACHE, self._has_fd, _C_CLASSES, WRITE_CALLS, READ_CALLS, _IOCTL_CACHE,
               _NV_CACHE, encode, self._pending, self._entered, self.lines)
        i, k, last, has_dur, entered, tail, made = fn(data, i, ctx, out)
        if k:
            self.lines += k
            # strace -k frames after an entry half are its call's, else no call's
            self._line = (entered, "unfinished", self.lines) if tail else None
            self.last_ts = last
            if has_dur:
                self._has_dur = True
        if entered is not None:
            self.unfinished_tid = entered
        return i, made

    def _batch(self, texts: List[str], out: list, take: Callable[[List[ev.Event]], object],
               encode: Optional[Callable[[ev.Event], bytes]]) -> int:
        """Every line of ``texts``: convert_calls's into ``out`` (their events, or with
        ``encode`` their rows, as bytes), the others' events to ``take``; how many events."""
        plain = _CONVERT_CALLS
        n, i, count = len(texts), 0, 0
        while i < n:
            if plain is not None and self._c_ready():
                i, made = self._run_c(plain, texts, i, out, encode)
                count += made
                if i >= n:
                    break
            events, i = self._feed_run(texts, i, plain is not None)
            count += len(events)
            take(events)
        return count

    def _feed_run(self, texts: List[str], start: int,
                  stop_plain: bool) -> Tuple[List[ev.Event], int]:
        """Lines from ``texts[start]`` on: (their events, the index where it stopped). The
        commonest line (a complete call of a known thread, nothing special about it) takes a
        path with the converter's state in local variables; every other line goes through
        feed_text. ``stop_plain``: stop before a later line convert_calls can take (a complete
        call, an entry or resumed half)."""
        out: List[ev.Event] = []
        add, extend = out.append, out.extend
        split, to_ev, feed_text = split_line, to_event, self.feed_text
        tid_pid, names_add = self._tid_pid, self.names.add
        lines, last_ts, has_dur, has_fd = self.lines, self.last_ts, self._has_dur, self._has_fd
        special = self._special
        fast = self._c_ready()
        n = len(texts)
        i = start
        while i < n:
            text = texts[i]
            if fast:
                t = split(text)
                if stop_plain and i > start and t is not None and t[2] in _HALVES:
                    break                 # convert_calls's line (or its own to refuse)
                if t is not None and t[2] == "call" and t[0] is not None and t[1] is not None \
                        and not t[13] and t[14] is None and t[3] not in special \
                        and (t[6] is None or not t[6].startswith(INTERRUPTED)):
                    tid, ts, _, name, args, ret, err, _, dur = t[:9]
                    pid = tid_pid.get(tid)
                    if pid is not None:
                        if stop_plain and i > start and name not in _EPOLL_CALLS:
                            break             # convert_calls's line
                        lines += 1
                        last_ts = ts
                        names_add(name)
                        if dur is not None:
                            has_dur = True
                        e = to_ev(pid, tid, name, args, ret, err, dur, ts, False)
                        if e.fd_kind is not None:
                            if not has_fd:
                                self._decorated()
                                has_fd, special = True, self._special
                        elif e.fd is not None and not has_fd:
                            self._resolve(e, pid)
                        if e.TAG == "pl":
                            self._poll_kinds(e, pid, args)
                        add(e)
                        i += 1
                        continue
            self.lines, self.last_ts, self._has_dur = lines, last_ts, has_dur
            extend(feed_text(text))
            lines, last_ts, has_dur, has_fd = (self.lines, self.last_ts, self._has_dur,
                                               self._has_fd)
            special = self._special
            fast = self._c_ready()
            i += 1
        self.lines, self.last_ts, self._has_dur = lines, last_ts, has_dur
        return out, i
