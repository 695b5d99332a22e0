"""Analysis is linear in blocked threads and processes, and a long line before the log's first
call is bounded (issue 46 item 8). CPU time (``time.process_time``), and a ratio far from
quadratic's, so that a loaded machine cannot fail them."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tracer.load.trace import analyze_trace
from tracer.strace.importer import import_strace

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from process_scale import blocked_log  # noqa: E402


def _trace(tmp_path: Path, kind: str, n: int) -> str:
    log, out = tmp_path / f"{kind}-{n}.log", tmp_path / f"{kind}-{n}.htrace"
    log.write_text(blocked_log(kind, n))
    import_strace(str(log), str(out))
    return str(out)


def _cpu(path: str) -> float:
    c = time.process_time()
    report = analyze_trace(path)
    assert report.verdict == "deadlocked"
    return time.process_time() - c


@pytest.mark.parametrize("kind,n", [("threads", 2000), ("procs", 1000)])
def test_analysis_is_linear_in_blocked_waiters(tmp_path: Path, kind: str, n: int) -> None:
    # main: threads 2,000 -> 8,000 x~20 (the GPU-poller and running lists per futex wait),
    # processes 1,000 -> 4,000 x~14 (the waiters of every process, every edge per process)
    small, big = _trace(tmp_path, kind, n), _trace(tmp_path, kind, 4 * n)
    _cpu(small)                                   # warm: imports, caches
    ratio = _cpu(big) / max(_cpu(small), 1e-3)
    assert ratio < 8, f"4x the {kind}: x{ratio:.1f} the CPU time (quadratic: 16)"


def test_a_1_mb_line_before_the_first_call_imports_in_bounded_time(tmp_path: Path) -> None:
    log = tmp_path / "long.log"
    log.write_text("strace -f " + "a" * 1_000_000 + "\n" + blocked_log("threads", 10))
    c = time.process_time()
    result = import_strace(str(log), str(tmp_path / "long.htrace"))
    cpu = time.process_time() - c
    assert cpu < 4, f"{cpu:.1f} s of CPU (main: 12 s, shlex.split of the line)"
    assert result is not None
