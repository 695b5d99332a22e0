"""Issue 16's hardening item 7 on a live target: the output path is checked before attaching,
so an unwritable one fails with one line and the target is never traced (the rest of issue 16's
items, which need no live target, are in unit/test_hardening.py)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cli_run import hangtrace, one_line  # noqa: E402  (tests/cli_run.py)


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
