"""Special files and error lines (issue 22 item 5): a FIFO is read once or refused with a line,
never waited on forever (analyze, export, merge and import-strace of a FIFO without a writer
used to block with no message; merge of one hung even with a writer); a value shown in an
error is cut to 80 characters (one bad header value made a 1 MB line)."""
from __future__ import annotations

import contextlib
import io
import json
import os
import threading
import time
from pathlib import Path

import pytest

from cli_run import hangtrace, one_line
from tracer.cli import commands as cli
from tracer.errors import SHOWN_MAX, shown
from tracer.tracefile import inputs

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "fixtures" / "traces" / "spin.strace.htrace.gz"
LOG = REPO / "tests" / "data" / "strace" / "oneproc_t.log"


def run(*argv: str):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.run(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def fifo(tmp_path, monkeypatch) -> Path:
    monkeypatch.setattr(inputs, "FIFO_WAIT", 0.5)
    path = tmp_path / "in.fifo"
    os.mkfifo(path)
    return path


def _writer(path: Path, data: bytes, delay: float = 0.2) -> threading.Thread:
    def write() -> None:
        time.sleep(delay)
        with open(path, "wb") as f:
            f.write(data)
    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("argv,words", [
    (("analyze",), "is a FIFO with no writer (waited 0.5 s)"),
    (("export", "-f", "json"), "is a FIFO with no writer (waited 0.5 s)"),
    (("import-strace",), "is a pipe (FIFO), not a regular file"),
    (("merge",), "is a pipe (FIFO): merge reads each trace more than once"),
])
def test_a_fifo_without_a_writer_is_one_line_not_a_hang(fifo, argv, words) -> None:
    t0 = time.monotonic()
    code, out, err = run(argv[0], str(fifo), *argv[1:])
    assert code == 1 and out == "" and words in one_line(err)
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize("argv", [("analyze", "--json"), ("export", "-f", "json")])
def test_a_fifo_with_a_writer_is_read_once(fifo, argv) -> None:
    w = _writer(fifo, TRACE.read_bytes())
    code, out, err = run(argv[0], str(fifo), *argv[1:])
    w.join(10)
    assert code in (0, 3), err
    first = out.splitlines()[0] if argv[0] == "export" else out
    assert json.loads(first if argv[0] == "export" else out)


def test_merge_of_a_fifo_with_a_writer_is_refused_at_once(fifo) -> None:
    # the writer must not be left blocked: it opens, finds no reader, and is released here
    code, out, err = run("merge", str(TRACE), str(fifo))
    assert code == 1 and "merge reads each trace more than once" in one_line(err)


def test_the_real_command_on_a_fifo_without_a_writer_ends(tmp_path) -> None:
    path = tmp_path / "f"
    os.mkfifo(path)
    t0 = time.monotonic()
    p = hangtrace("import-strace", str(path), timeout=60)
    assert p.returncode == 1 and "is a pipe (FIFO)" in one_line(p.stderr)
    assert time.monotonic() - t0 < 30


def test_a_value_in_an_error_is_cut_to_80_characters(tmp_path) -> None:
    assert len(shown("x" * 1_000_000)) == SHOWN_MAX and shown("ok") == "'ok'"
    bad = tmp_path / "big.htrace"
    bad.write_text(json.dumps({"magic": "hangtrace-trace", "version": "9" * 1_000_000}) + "\n")
    code, out, err = run("analyze", str(bad))
    line = one_line(err)
    assert code == 1 and "'version' is not an integer" in line and len(line) < 300
    code, out, err = run("attach", "1", "--duration", "x" * 100_000)
    assert code == 2 and len(one_line(err)) < 300
    code, out, err = run("export", str(bad), "-f", "y" * 100_000)
    assert code == 2 and len(one_line(err)) < 300
