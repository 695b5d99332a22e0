"""stat() of paths that may hang (a file on a network filesystem whose server is gone), never
in the caller's thread and bounded in time.

Contract: ``stat_all(paths, timeout)`` -> {key: os.stat_result or an error text} for a
{key: path} dict: the stats run in one helper thread, which the calls of a pass over many
processes share (a thread each was most of a 2,000-process probe's time); what it did not
finish within ``timeout`` seconds says "stat timed out", and a helper stuck in a stat is left
behind (a daemon) and the next call gets a new one. A helper idle for ``IDLE_S`` ends.
"""
from __future__ import annotations

import os
import queue
import threading
from typing import Dict, Hashable, Optional, Tuple

__all__ = ["stat_all", "TIMED_OUT", "IDLE_S"]

TIMED_OUT = "stat timed out (a network filesystem not answering?)"
IDLE_S = 2.0

Job = Tuple[Dict[Hashable, str], Dict[Hashable, object], threading.Event]


class _Helper:
    """One daemon thread that runs the jobs put to it, in order, until idle for IDLE_S."""

    def __init__(self) -> None:
        self.jobs: "queue.Queue[Job]" = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="hangtrace-stat", daemon=True)
        self.ended = False
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                paths, out, done = self.jobs.get(timeout=IDLE_S)
            except queue.Empty:
                with _lock:
                    if self.jobs.empty():
                        self.ended = True
                        return
                continue
            for key, path in paths.items():
                try:
                    out[key] = os.stat(path)
                except OSError as exc:
                    out[key] = exc.strerror or str(exc)
            done.set()


_lock = threading.Lock()
_helper: Optional[_Helper] = None


def stat_all(paths: Dict[Hashable, str], timeout: float) -> Dict[Hashable, object]:
    """{key: os.stat_result or error text} (module doc)."""
    global _helper
    if not paths:
        return {}
    out: Dict[Hashable, object] = {}
    done = threading.Event()
    with _lock:
        if _helper is None or _helper.ended:
            _helper = _Helper()
        helper = _helper
        helper.jobs.put((paths, out, done))
    if not done.wait(timeout):
        with _lock:
            if _helper is helper:
                _helper = None          # stuck (or slow): the next call gets its own
    return {key: out.get(key, TIMED_OUT) for key in paths}
