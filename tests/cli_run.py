"""Running the ``hangtrace`` command line from tests: ``hangtrace(*args)`` runs
``python -m tracer ARGS`` as a user would (output captured as text) and validates what a
``--json`` command printed against the shipped schema of its command (report_schema.check_output),
``one_line(stderr)`` checks that an error is the single ``hangtrace: ...`` line the command line
promises and returns it."""
from __future__ import annotations

import subprocess
import sys

import report_schema

HANGTRACE = [sys.executable, "-m", "tracer"]


def hangtrace(*args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(HANGTRACE + list(args), capture_output=True, text=True,
                       timeout=timeout, **kw)
    if isinstance(p.stdout, str):
        report_schema.check_output(args, p.stdout)
    return p


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hangtrace: "), stderr
    assert "Traceback" not in stderr
    return lines[0]
