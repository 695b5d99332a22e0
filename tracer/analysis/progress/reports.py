"""Reports a timer makes: a thread that wakes on a timer and writes a small report each time to
a pipe or a terminal (a stats line every 2 s) shows its process is alive, not that it advances.

Contract: ``periodic_report(t, wakeups, window, cpu)`` -> a sentence when thread ``t`` woke on a
timer ``MIN_WAKEUPS`` times or more, at most ``MAX_HZ`` a second (a loop that writes 20 times a
second works: a rate limit, not a report), wrote at most ``MAX_WRITES`` calls and
``MAX_BYTES`` per wake-up, all to ``REPORT_KINDS`` (pipes, FIFOs, terminals: log files are
log_lines.py's, sockets traffic.py's), read nothing, made no connection and used under
``MAX_CPU`` of a CPU; else None. Where only a process's /proc io totals are known, its stream
output shows no progress by itself when its timers could have written it all:
``timer_reports(nbytes, writes, wakeups)`` (the proc backend: wake-ups of its timers of at most
``MAX_HZ``, from /proc samples), ``stream_is_report(nbytes, span)`` (watch: ``REPORT_MAX_RATE``).
"""
from __future__ import annotations

import re
from typing import Optional

from ...linux.fdtarget import fd_kind
from ..accumulate.stats import ThreadStats

__all__ = ["periodic_report", "timer_reports", "stream_is_report", "MIN_WAKEUPS", "MAX_HZ",
           "MAX_WRITES", "MAX_BYTES", "MAX_CPU", "REPORT_KINDS", "REPORT_MAX_RATE"]

MIN_WAKEUPS = 2
MAX_HZ = 2.0            # a report's timer wakes every 0.5 s or less often
MAX_WRITES = 8          # write calls per wake-up: one line, unbuffered (text, then "\n"), or a few
MAX_BYTES = 4096        # bytes per wake-up
MAX_CPU = 0.05
REPORT_KINDS = frozenset({"pipe", "fifo", "tty"})
REPORT_MAX_RATE = 1024  # bytes a second: a stats line of 120 B every 2 s is 60 B/s
_TARGET = re.compile(r"^fd \d+ \((.*)\)$")


def _kind(label: str) -> Optional[str]:
    m = _TARGET.match(label)
    return fd_kind(m.group(1)) if m else None


def periodic_report(t: ThreadStats, wakeups: int, window: float,
                    cpu: Optional[float]) -> Optional[str]:
    """The evidence that ``t``'s output is a timer's report (module doc), or None."""
    if wakeups < MIN_WAKEUPS or wakeups > MAX_HZ * window or t.output_writes <= 0 \
            or not t.output_targets:
        return None
    if t.output_writes > MAX_WRITES * (wakeups + 1) or t.output_bytes > MAX_BYTES * (wakeups + 1):
        return None
    if t.input_bytes or t.file_reads or t.accepts or t.connects or t.keepalives:
        return None
    if cpu is not None and cpu >= MAX_CPU:
        return None
    if any(_kind(label) not in REPORT_KINDS for label in t.output_targets):
        return None
    where = ", ".join(label for label, _ in t.output_targets.most_common(2))
    return (f"wrote {t.output_bytes} B in {t.output_writes} writes to {where} from a loop of "
            f"{wakeups} timed wake-ups (one every {window / wakeups:.1f} s): a report its "
            "timer makes, whose content is not read there; it shows the process is alive, not "
            "that its work advances")


def timer_reports(nbytes: int, writes: int, wakeups: int) -> bool:
    """Whether ``nbytes`` in ``writes`` calls could all be reports made on ``wakeups`` timer
    wake-ups: at least ``MIN_WAKEUPS``, at most ``MAX_WRITES`` and ``MAX_BYTES`` per wake-up."""
    return wakeups >= MIN_WAKEUPS and writes <= MAX_WRITES * wakeups \
        and nbytes <= MAX_BYTES * wakeups


def stream_is_report(nbytes: int, span: float) -> bool:
    """Whether ``nbytes`` written to pipes or terminals in ``span`` seconds, known only as a
    process's total, could all be a timer's reports (module doc)."""
    return nbytes <= REPORT_MAX_RATE * max(span, 1e-9)
