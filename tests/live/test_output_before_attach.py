"""Regression tests for issue 16's hardening items that need no live target: bounded reads
(1), refusals (2), what could not be observed (3, on synthetic traces), NaN options and the
stop flag (4), huge numbers in strace logs (5), header and row validation (6), the output
path checked before attaching (7), messages and exit statuses (8). The live ones (attach to
kthreadd, an unprivileged user, the safety of the target) are in test_safety.py."""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import resource
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracer.cli import commands as cli
from tracer import events as ev
from tracer.analysis.analyzer import Analyzer
from tracer.load.trace import analyze_trace
from tracer.errors import CorruptTrace, NotATrace
from tracer.record.session import StopFlag
from tracer.report import EXIT_CODES
from tracer.tracefile.format import MAX_LINE_CHARS, TraceReader, TraceWriter, make_header
from tracer.strace.convert import StraceConverter
from tracer.strace.importer import import_strace
from cli_run import hangtrace, one_line  # noqa: E402  (tests/cli_run.py)

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "strace"


def test_an_unwritable_output_fails_before_attaching(tmp_path) -> None:
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        p = hangtrace("attach", str(target.pid), "-b", "strace", "-d", "5",
                      "-o", str(tmp_path / "no" / "such" / "dir.htrace.gz"))
        assert p.returncode == 1 and p.stdout == ""
        assert "cannot write the trace" in one_line(p.stderr)   # no "attaching to" line
        assert "TracerPid:\t0" in Path(f"/proc/{target.pid}/status").read_text()
    finally:
        target.kill()
        target.wait()
