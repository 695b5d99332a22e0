"""What the traced processes appended to their log files during the window, as line templates.

Contract: ``log_lines_probe(pids, analyzer)`` is an ``EndProbe``. For each regular file a
process had as a log target at the start of the window (the start ``LogTargets`` the
analyzer's evidence table holds: fds 1, 2 and its log files) that grew since, the newest
``READ_MAX`` bytes appended and up to ``CONTEXT`` bytes before them are read as the process
may read them (linux/target_files.py ``read_held_file``: the file the fd holds, bounded) and
reduced to one ``LogLines`` event: lines turned into templates by ``line_template``, counted,
and each slot's changes from the same template's line before. The text itself never goes into
the trace, nor more than ``MAX_TEMPLATES`` templates of ``MAX_TEXT`` characters. A file whose
new bytes are not text (``is_binary``) gets no templates and ``why`` says so.
"""
from __future__ import annotations

import os
import re
import time
from typing import Any, Dict, List, Optional, Set, Tuple

from ...events.evidence import LogLines, LogTargets
from ...linux import cancel
from ...linux.bounded_stat import stat_all
from ...linux.target_files import TargetFileRefused, read_held_file

__all__ = ["log_lines_probe", "line_template", "templates_of", "TemplateMemory", "split_lines",
           "fill_lines", "READ_MAX", "CONTEXT"]

READ_MAX = 64 << 10
CONTEXT = 8 << 10
MAX_TEMPLATES = 64
MAX_TEXT = 240
MAX_SLOTS = 16
MAX_FILES = 8          # per process
SECONDS = 3.0          # the whole probe

_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b"
                  r"|\b(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b")
_ADDRESS = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?(?![\w.])")
# A progress bar's redraw (issue 44 item 4): what changes at every redraw whether or not the
# count advances is no slot: a spinner's glyph (Braille dots, or |/-\\ starting the line), the
# bar's fill, a clock (elapsed, time left: MM:SS), a rate (it/s, s/it, B/s). The count stays.
_SPINNER = re.compile(r"[\u2800-\u28ff]|^[|/\\-](?=\s)")
_BAR = re.compile(r"\|[\u2580-\u259f #=>.-]*\|")
_CLOCK = re.compile(r"(?<![\d:])\d{1,2}:\d{2}(?![\d:])")
_RATE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?(?:[kKMGT]?i?(?:it|B|b)/s|s/it)\b")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|(?<=[A-Za-z_])\d+"
                     r"|(?<=[A-Za-z_][._-])\d+")


def _is_epoch(text: str, value: float) -> bool:
    """Seconds or milliseconds since 1970 between 2001 and 2286: a time, not a counter."""
    digits = len(text.lstrip("+-").split(".")[0])
    return (digits == 10 and 1e9 <= value < 1e10) or (digits == 13 and 1e12 <= value < 1e13)


def line_template(line: str) -> Tuple[str, List[float]]:
    """(template, values of its <N> slots) of one log line.
    Numbers are masked as <N> and kept as values, times and dates as <T>, hex and UUIDs as <H>,
    IPv4 addresses (with a port) as <A>; of a progress bar's redraw, the spinner glyph as <S>,
    the bar's fill as <B>, a clock (MM:SS) as <T> and a rate as <R>: only its count is a slot."""
    line = _ADDRESS.sub("<A>", _HEX.sub("<H>", _TIME.sub("<T>", line[:1024].strip())))
    line = _RATE.sub("<R>", _CLOCK.sub("<T>", _SPINNER.sub("<S>", _BAR.sub("|<B>|", line))))
    values: List[float] = []

    def number(m: "re.Match[str]") -> str:
        text = m.group()
        if len(text) > 20:
            return "<N>"
        v = float(text)
        if _is_epoch(text, v):
            return "<T>"
        if len(values) < MAX_SLOTS:
            values.append(v)
        return "<N>"

    return _NUMBER.sub(number, line)[:MAX_TEXT], values


_LINE_END = re.compile(rb"[\r\n]")


def split_lines(before: bytes, window: bytes) -> Tuple[List[str], List[str]]:
    """The whole lines before the window and the lines in it (the line that spans the start
    counts as the window's; a first line cut by the read's start is dropped). A carriage return
    ends a line too: a progress bar (tqdm) redraws itself after one, in a file as on a tty."""
    head = _LINE_END.split(before)
    if before:
        head = head[1:]                    # cut by where the read began
    spanning = head.pop() if head else b""
    lines = _LINE_END.split(spanning + window)
    if lines and not lines[-1]:
        lines.pop()
    text = [x.decode("utf-8", "replace") for x in head if x.strip()]
    return text, [x.decode("utf-8", "replace") for x in lines if x.strip()]


class TemplateMemory:
    """The last values of each template seen so far: what the lines of a window are compared
    with (the lines just before it, or, for ``watch``, every earlier look's)."""

    def __init__(self) -> None:
        self.last: Dict[str, List[float]] = {}
        self.seen: Dict[str, int] = {}

    def remember(self, lines: List[str]) -> None:
        for line in lines:
            text, values = line_template(line)
            self._keep(text, values)

    def _keep(self, text: str, values: List[float]) -> None:
        if text not in self.last and len(self.last) >= 4 * MAX_TEMPLATES:
            oldest = next(iter(self.last))                 # the oldest shape goes
            del self.last[oldest]
            self.seen.pop(oldest, None)
        self.last[text] = values
        self.seen[text] = min(self.seen.get(text, 0) + 1, 1 << 30)

    def window(self, lines: List[str]) -> Tuple[List[Dict[str, Any]], int]:
        """(templates, lines left out past MAX_TEMPLATES) of a window's lines (module doc),
        remembered afterwards."""
        out: Dict[str, Dict[str, Any]] = {}
        left_out = 0
        for line in lines:
            text, values = line_template(line)
            t = out.get(text)
            prev = self.last.get(text)
            if t is None:
                if len(out) >= MAX_TEMPLATES:
                    left_out += 1
                    continue
                t = out[text] = {"text": text, "count": 0, "before": self.seen.get(text, 0),
                                 "changes": [0] * len(values),
                                 "first": values if prev is None else prev, "last": values}
            if prev is not None:
                for i, (a, b) in enumerate(zip(prev, values)):
                    if a != b and i < len(t["changes"]):
                        t["changes"][i] += 1
            t["count"] += 1
            t["last"] = values
            self.last[text] = values
        for text, t in out.items():
            self.seen[text] = self.seen.get(text, 0) + t["count"]
        return list(out.values()), left_out


def templates_of(before: List[str], window: List[str]) -> Tuple[List[Dict[str, Any]], int]:
    """(templates, lines left out past MAX_TEMPLATES) of the window's lines, compared with the
    lines before it (module doc)."""
    memory = TemplateMemory()
    memory.remember(before)
    return memory.window(window)


def _start_targets(analyzer: object, pid: int) -> Optional[LogTargets]:
    table = getattr(analyzer, "evidence", None)
    logs = getattr(table, "logs", None) or {}
    return logs.get(pid, {}).get("start")


def lines_of_file(pid: int, fd: int, path: str, since: int, now: float,
                  seconds: float) -> Optional[LogLines]:
    """The LogLines of one file (module doc), or None when it did not grow."""
    ev = LogLines(ts=now, pid=pid, fd=fd, path=path)
    try:
        got = read_held_file(pid, fd, tail=READ_MAX + CONTEXT, seconds=seconds)
    except TargetFileRefused as exc:
        ev.why = f"not read: {exc}"
        return ev
    if got.size < since:                   # truncated or rotated: all of it is new
        since = 0
    if got.size - since <= 0:
        return None
    return fill_lines(ev, got.data, got.size - since, TemplateMemory())


_CONTROL = bytes(c for c in range(32) if c not in (9, 10, 13, 27))


def is_binary(data: bytes) -> bool:
    """Bytes no log is made of: a NUL, text that is not UTF-8, or more than 1 in 20 control
    characters (tabs, newlines and ANSI escapes are text).
    Such a file (an object file a compiler appends to) gets no templates: its growth is output as
    any unread file's is."""
    if not data:
        return False
    if b"\0" in data:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(data) - 4:     # (a character cut at the end of the read is text)
            return True
    return len(data) - len(data.translate(None, _CONTROL)) > len(data) // 20


def fill_lines(ev: LogLines, data: bytes, appended: int, memory: TemplateMemory) -> LogLines:
    """``ev`` filled from ``data``, the file's last bytes, of which the last ``appended`` are
    the window's (at most READ_MAX of them are read; the rest of ``data`` is the context that
    ``memory`` learns first)."""
    ev.appended = appended
    start_in_data = max(0, len(data) - min(appended, READ_MAX))
    before, window = data[:start_in_data], data[start_in_data:]
    ev.read = len(window)
    if appended > READ_MAX:
        before = b""                       # the window's own start was not read
    if is_binary(window):                  # an object file, a database: bytes, not lines
        ev.why = "not a text log (binary data)"
        return ev
    old, new = split_lines(before, window)
    memory.remember(old)
    ev.lines = len(new)
    ev.templates, _ = memory.window(new)
    return ev


def _unchanged(files: Dict[Tuple[int, int], int], seconds: float) -> Set[Tuple[int, int]]:
    """The (pid, fd) of ``files`` (-> size at the start) whose file has that size now, or is
    empty: ``lines_of_file`` would find nothing new in them. One stat of each held file, all
    in one helper thread (linux/bounded_stat.py); one it could not stat is not among them."""
    got = stat_all({k: f"/proc/{k[0]}/fd/{k[1]}" for k in files}, seconds)
    return {k for k, st in got.items()
            if isinstance(st, os.stat_result) and st.st_size in (files[k], 0)}


def log_lines_probe(pids: List[int], analyzer: object = None) -> List[LogLines]:
    """EndProbe (session.py): the LogLines of ``pids``' log files (module doc). A file whose
    size did not change is not opened (``_unchanged``)."""
    deadline = time.monotonic() + SECONDS
    now = time.time()
    out: List[LogLines] = []
    wanted: Dict[Tuple[int, int], Dict[str, Any]] = {}
    for pid in cancel.checked(pids, every=64):
        start = _start_targets(analyzer, pid)
        if start is None:
            continue
        for t in [t for t in start.targets if t.get("kind") == "file"
                  and isinstance(t.get("size"), int)][:MAX_FILES]:
            wanted[(pid, t["fd"])] = t
    same = _unchanged({k: t["size"] for k, t in wanted.items()}, 1.0) if wanted else set()
    for (pid, fd), t in wanted.items():
        left = deadline - time.monotonic()
        if left <= 0:
            continue
        if (pid, fd) in same:
            continue
        got = lines_of_file(pid, fd, t.get("path") or "", t["size"], now, min(1.0, left))
        if got is not None:
            out.append(got)
    return out


log_lines_probe.__name__ = "log lines"
