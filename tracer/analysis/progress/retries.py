"""Retries: a thread whose periodic wake-ups each carry the same failing call is retrying,
the root cause of a hang ("retries connect() every 0.5 s: ECONNREFUSED"), never a heartbeat.

Contract: ``retrying(t, wakeups, window, timed)`` -> a sentence when thread ``t`` woke up at
least ``MIN_WAKEUPS`` times (sleeps and timeouts, ``wakeups``) and one call failed with one
errno (``ThreadStats.failures``: errnos that are an event loop's normal answers, EAGAIN and
the like, are not failures) at least ``MIN_FAILURES`` times and on at least half of the
wake-ups, else None. Recordings with each call's result have failures (strace, imported
logs), and so do the eBPF backend's kernel counts (per thread, call and errno:
``ThreadCounts.failures``); /proc samples do not.
"""
from __future__ import annotations

from typing import Optional

from ..accumulate.stats import ThreadStats

__all__ = ["retrying", "MIN_WAKEUPS", "MIN_FAILURES"]

MIN_WAKEUPS = 2
MIN_FAILURES = 3


def retrying(t: ThreadStats, wakeups: int, window: float, timed: bool) -> Optional[str]:
    """The evidence that ``t`` retries one failing call (module doc), or None."""
    if wakeups < MIN_WAKEUPS or not t.failures:
        return None
    (name, err), n = t.failures.most_common(1)[0]
    if n < MIN_FAILURES or 2 * n < wakeups:
        return None
    every = f" every {window / n:.1f} s" if timed else ""
    return (f"retries {name}(){every}: {err} each time ({n} failures, {wakeups} wake-ups"
            + (f" in {window:.1f} s" if timed else "") + "); it never succeeds")
