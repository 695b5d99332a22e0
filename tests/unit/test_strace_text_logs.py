"""Text logs with binary inside (issue 35 item 7): a NUL or a binary run inside a strace log,
and the 4 KB of NULs a crash leaves at its end, are lines not understood, counted, never a
refusal; a log is refused as binary only when most of its first MiB is not text; "no line
ends in its first 1 MiB" is said only when none does. Both paths (compiled helpers and the
pure-Python twins, HANGTRACE_PURE=1 in a child) count the same lines."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import hangtrace, one_line
from tracer.strace.log import NUL_LINE_MARK, LogFile

REPO = Path(__file__).resolve().parents[2]
LOG = REPO / "tests" / "data" / "strace" / "python_f_tt.log"
CLEAN = LOG.read_bytes()
LINES = CLEAN.split(b"\n")
CRASH_ZEROS = b"\0" * 4096

# the log's bytes and the lines the import must not understand: the shapes
SHAPES = {
    "nul-run-in-a-line": (b"\n".join(LINES[:100]) + b"\n"
                          + b"3825  11:52:50.9 wri\0\0\0te(1, \"x\", 1) = 1\n"
                          + b"\n".join(LINES[100:]), 1),
    "binary-run-line": (b"\n".join(LINES[:100]) + b"\n" + b"\x01\x02\x03\x04" * 64 + b"\n"
                        + b"\n".join(LINES[100:]), 1),
    "crash-zeros-at-the-end": (CLEAN + CRASH_ZEROS, 1),
    "a-short-log-then-crash-zeros": (b"\n".join(LINES[:3]) + b"\n" + CRASH_ZEROS, 1),
    "a-cut-line-then-crash-zeros": (b"\n".join(LINES[:3]) + b"\n3825  11:52:50.9 wri"
                                    + CRASH_ZEROS, 1),
}


def _imported(path: Path, pure: bool) -> dict:
    """import-strace in a child (HANGTRACE_PURE as asked): its events and unparsed lines."""
    code = ("import json, sys; from tracer.strace.importer import import_strace; "
            "r = import_strace(sys.argv[1], sys.argv[2]); "
            "print(json.dumps({'events': r.events, 'unparsed': r.unparsed}))")
    env = {**os.environ, "HANGTRACE_PURE": "1" if pure else "0"}
    p = subprocess.run([sys.executable, "-c", code, str(path), str(path) + ".htrace"],
                       capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.fixture(scope="module")
def clean_events(tmp_path_factory) -> int:
    path = tmp_path_factory.mktemp("clean") / "clean.log"
    path.write_bytes(CLEAN)
    got = _imported(path, pure=False)
    assert got["unparsed"] == 0
    return got["events"]


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_binary_inside_a_text_log_is_a_line_not_understood(tmp_path, clean_events, shape,
                                                           pure):
    data, bad_lines = SHAPES[shape]
    path = tmp_path / f"{shape}.log"
    path.write_bytes(data)
    got = _imported(path, pure)
    assert got["unparsed"] == bad_lines, got
    if shape.startswith("a-"):
        assert got["events"] > 0
    else:                     # every event of the clean log, and the Lost that counts the line
        assert got["events"] == clean_events + 1, got


def test_the_command_line_imports_it_and_says_how_many_lines(tmp_path):
    path = tmp_path / "crashed.log"
    path.write_bytes(CLEAN + CRASH_ZEROS)
    out = tmp_path / "crashed.htrace.gz"
    p = hangtrace("import-strace", str(path), "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert one_line(p.stderr).endswith("(1 lines not understood)")
    assert out.exists()


def test_one_nul_inside_a_real_line_is_that_line_not_understood(tmp_path, clean_events):
    at = CLEAN.index(b"\n", 300) - 5                   # inside a line of the first MiB
    path = tmp_path / "one-nul.log"
    path.write_bytes(CLEAN[:at] + b"\0" + CLEAN[at:])
    for pure in (False, True):
        assert _imported(path, pure)["unparsed"] == 1


def test_a_nul_line_comes_out_marked_and_whole(tmp_path):
    path = tmp_path / "marked.log"
    path.write_bytes(b"1 getpid() = 1\n2 wri\0te(1, \"\", 0) = 0\n3 getpid() = 3\n")
    with LogFile(str(path)) as log:
        lines = [line for batch in log.line_batches() for line in batch]
    assert lines == ["1 getpid() = 1", NUL_LINE_MARK.decode() + "2 wri\\0te(1, \"\", 0) = 0",
                     "3 getpid() = 3"]


def test_a_first_line_that_ends_is_not_no_line_ends(tmp_path):
    """Line 1 ends at byte 22; the next line is longer than the MiB the sniffer reads."""
    first = b"3825  getpid()   = 382\n"
    assert len(first) == 23 and first.index(b"\n") == 22
    path = tmp_path / "long-second-line.log"
    path.write_bytes(first + b"y" * (2 << 20) + b"\n" + b"3825  getppid() = 1\n")
    p = hangtrace("import-strace", str(path), "-o", str(tmp_path / "o.htrace.gz"))
    assert "no line ends" not in p.stderr, p.stderr
    assert p.returncode == 0 and one_line(p.stderr).endswith("(1 lines not understood)")


@pytest.mark.parametrize("data", [
    CRASH_ZEROS,                                         # nothing but a crash's zeros
    b"1234 getpid() = 1\n" + b"\x01\x02\x03" * 4000,     # one text line, then binary
    bytes(range(256)) * 64,                              # every byte value
    b"\x7fELF\x02\x01\x01\x00" + b"\x00\x3e\x00\x01" * 2000 + LINES[0] + b"\n",
])
def test_a_log_that_is_mostly_not_text_is_still_refused(tmp_path, data):
    path = tmp_path / "bin.log"
    path.write_bytes(data)
    p = hangtrace("import-strace", str(path), "-o", str(tmp_path / "o.htrace.gz"))
    assert p.returncode == 1 and "binary data" in one_line(p.stderr)
    assert not (tmp_path / "o.htrace.gz").exists()
