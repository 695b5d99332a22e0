"""scripts/find_pythons.py: the CPythons the wheel scripts build with and check on
(build_wheels.sh, check_dist.py): HANGTRACE_PYTHONS names them, else the usual folders; one per
minor version, oldest first; one older than 3.10, without Python.h or free-threaded is left out
with its reason on stderr."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "find_pythons.py"


def _fake(tmp_path: Path, name: str, answer: str) -> str:
    """An 'interpreter' that answers the probe as a real one would."""
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\necho '{answer}'\n")
    path.chmod(0o755)
    return str(path)


def _run(listed: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HANGTRACE_PYTHONS=listed)
    env.pop("PYTHONS", None)
    return subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True,
                          text=True, timeout=60)


def test_the_listed_ones_one_per_minor_version_oldest_first(tmp_path):
    fakes = [_fake(tmp_path, "py313", "3.13 cpython True False"),
             _fake(tmp_path, "py310", "3.10 cpython True False"),
             _fake(tmp_path, "py310b", "3.10 cpython True False"),
             _fake(tmp_path, "py312", "3.12 cpython True False")]
    p = _run(" ".join(fakes))
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [fakes[1], fakes[3], fakes[0]]


def test_what_cannot_build_the_wheel_is_left_out_with_why(tmp_path):
    ok = _fake(tmp_path, "py311", "3.11 cpython True False")
    old = _fake(tmp_path, "py39", "3.9 cpython True False")
    bare = _fake(tmp_path, "py312", "3.12 cpython False False")
    free = _fake(tmp_path, "py313t", "3.13 cpython True True")
    pypy = _fake(tmp_path, "pypy", "3.10 pypy True False")
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    p = _run(" ".join([ok, old, bare, free, pypy, str(broken)]))
    assert p.returncode == 0 and p.stdout.split() == [ok], p.stderr
    err = p.stderr
    assert "3.9: not CPython 3.10+" in err and "no Python.h" in err and "free-threaded" in err
    assert "pypy 3.10: not CPython 3.10+" in err and "does not run (exit 3)" in err


def test_none_found_is_one_line_and_status_1(tmp_path):
    p = _run(_fake(tmp_path, "py39", "3.9 cpython True False"))
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.splitlines()[-1].startswith("find_pythons: no CPython 3.10+ with headers")
