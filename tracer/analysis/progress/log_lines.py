"""Whether what a process appended to a log file during the window is news or a heartbeat.

Contract: ``judge_log(e)`` -> ``LogNews`` for one ``LogLines`` event (record/probes/log_lines.py
made its templates), None when it has no line. The lines are news when a line of a shape not
seen just before the window appears once, when some number in a repeated shape changed (a
counter that advances, a throughput that is not constant; one counted against its total,
``<N>/<N>`` as tqdm and loaders print it, says how much is left), or when there are more shapes than
the probe keeps; otherwise every line repeats a shape seen before with the same numbers, and
it is a heartbeat: the process is alive, not progressing. ``news_by_fd(lines)``: fd -> LogNews of
one process's LogLines that gained lines; ``heartbeat_fds(lines)``: those that are a heartbeat.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional

from ...events.evidence import LogLines

__all__ = ["LogNews", "judge_log", "news_by_fd", "heartbeat_fds", "MAX_SHOWN"]

MAX_SHOWN = 96          # characters of a template in a sentence


@dataclass(frozen=True)
class LogNews:
    fd: int
    path: str
    heartbeat: bool
    text: str            # one sentence: what repeats, or what is new


def _shown(template: str) -> str:
    return template if len(template) <= MAX_SHOWN else template[:MAX_SHOWN - 3] + "..."


def _of_total(t: Dict[str, Any], i: int) -> str:
    """", 31 of 52 done, 21 left" when <N> slot ``i`` is followed by "/<N>" whose value stays
    and is not below it (a count against its total), else ""."""
    text, first, last = t["text"], t.get("first") or [], t.get("last") or []
    at = [m.start() for m in re.finditer("<N>", text)]
    changes = t.get("changes") or []
    if i + 1 >= min(len(at), len(first), len(last)) or \
            text[at[i]:at[i + 1]] != "<N>/" or (i + 1 < len(changes) and changes[i + 1]):
        return ""
    done, total = last[i], last[i + 1]
    if first[i + 1] != total or not 0 <= done <= total or total <= 0 or last[i] <= first[i]:
        return ""
    return f", {done:g} of {total:g} done, {total - done:g} left"


def _moved(t: Dict[str, Any]) -> Optional[str]:
    """The first number that changed, one counted against its total first."""
    changes = t.get("changes") or []
    counted = [i for i, n in enumerate(changes) if n and _of_total(t, i)]
    for i in counted + [i for i, n in enumerate(changes) if n and i not in counted]:
            first, last = t.get("first") or [], t.get("last") or []
            if i < len(first) and i < len(last):
                return (f"a number moved {first[i]:g} -> {last[i]:g} in '{_shown(t['text'])}'"
                        + _of_total(t, i))
            return f"a number changed in '{_shown(t['text'])}'"
    return None


def judge_log(e: LogLines) -> Optional[LogNews]:
    """News or heartbeat of one file's window lines (module doc)."""
    if e.lines <= 0 or not e.templates:
        return None
    where = f"fd {e.fd} ({e.path})" if e.path else f"fd {e.fd}"
    kept = sum(int(t.get("count") or 0) for t in e.templates)
    if kept < e.lines:
        return LogNews(e.fd, e.path, False, f"{where}: {e.lines} lines of more than "
                       f"{len(e.templates)} shapes")
    new: List[Dict[str, Any]] = [t for t in e.templates
                                 if int(t.get("count") or 0) == 1 and not t.get("before")]
    if new:
        return LogNews(e.fd, e.path, False, f"{where}: a new line '{_shown(new[0]['text'])}'"
                       + (f" and {len(new) - 1} more" if len(new) > 1 else ""))
    for t in e.templates:
        moved = _moved(t)
        if moved:
            return LogNews(e.fd, e.path, False, f"{where}: {moved}")
    top = max(e.templates, key=lambda t: int(t.get("count") or 0))
    shapes = len(e.templates)
    return LogNews(e.fd, e.path, True,
                   f"{where}: {e.lines} lines, {shapes} shape{'s' if shapes > 1 else ''} "
                   f"repeated with the same numbers ('{_shown(top['text'])}'): a heartbeat, "
                   "not progress")


def news_by_fd(lines: Iterable[LogLines]) -> Dict[int, LogNews]:
    """fd -> LogNews of each file of ``lines`` (one process's) that gained lines."""
    out: Dict[int, LogNews] = {}
    for e in lines:
        news = judge_log(e)
        if news is not None:
            out[e.fd] = news
    return out


def heartbeat_fds(lines: Iterable[LogLines]) -> Dict[int, LogNews]:
    """fd -> LogNews of the files of ``lines`` whose new lines are a heartbeat (the window's
    of a recording, ProcessStats.log_lines; or since watch's previous look)."""
    return {fd: n for fd, n in news_by_fd(lines).items() if n.heartbeat}
