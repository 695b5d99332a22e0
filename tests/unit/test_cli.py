"""The command line: exit codes, one-line errors, JSON output, ending a recording early."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tracer.tracefile.format import TraceReader
from cli_run import hangtrace as run  # noqa: E402  (tests/cli_run.py)



def one_line_error(p):
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hangtrace: "), p.stderr
    assert "Traceback" not in p.stderr


def free_pid() -> int:
    pid = 4_000_000
    while os.path.exists(f"/proc/{pid}"):
        pid -= 1
    return pid


def test_missing_pid_is_one_line_and_exit_1():
    p = run("attach", str(free_pid()), "--duration", "0.5")
    assert p.returncode == 1
    one_line_error(p)
    assert "no process with pid" in p.stderr


def test_no_target_is_a_usage_error():
    p = run("attach")
    assert p.returncode == 2
    one_line_error(p)


def test_bad_option_is_a_usage_error():
    p = run("attach", "1", "--backend", "nope")
    assert p.returncode == 2
    assert "Traceback" not in p.stderr


def test_name_matching_nothing():
    p = run("attach", "--name", "no-such-process-title-xyz", "--duration", "0.5")
    assert p.returncode == 1
    one_line_error(p)


def test_import_missing_log():
    p = run("import-strace", "/nonexistent/log.txt")
    assert p.returncode == 1
    one_line_error(p)


def test_snapshot_missing_pid():
    p = run("snapshot", str(free_pid()))
    assert p.returncode == 1
    one_line_error(p)


    # (How soon the verdict comes after --duration is bench/live_costs.py's.)
