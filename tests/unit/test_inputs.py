"""What an input path names (tracer/load/inputs.py), told once: a table of real inputs."""
from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from tracer.errors import BadInput, CorruptTrace
from tracer.load.inputs import InputKind, open_input

TRACE = Path(__file__).resolve().parents[2] / "fixtures" / "traces" / "dead_worker.strace.htrace.gz"
LOG = b'1234  12:00:00.000001 read(3, "x", 1) = 1 <0.000010>\n'


def _write(tmp: Path, name: str, data: bytes) -> str:
    (tmp / name).write_bytes(data)
    return str(tmp / name)


@pytest.mark.parametrize("make, kind, why", [
    (lambda t: str(TRACE), InputKind.TRACE, None),
    (lambda t: _write(t, "plain.htrace", gzip.decompress(TRACE.read_bytes())), InputKind.TRACE,
     None),
    (lambda t: _write(t, "log.txt", LOG), InputKind.STRACE_LOG, "(no header)"),
    (lambda t: _write(t, "log.gz", gzip.compress(LOG)), InputKind.STRACE_LOG, "(no header)"),
    (lambda t: _write(t, "empty", b""), InputKind.STRACE_LOG, "empty file"),
    (lambda t: _write(t, "list.json", b"[1, 2]\n"), InputKind.STRACE_LOG, "(bad magic)"),
    (lambda t: str(t / "trace"), InputKind.FF_SET, None),          # strace -ff -o PREFIX
    (lambda t: str(t), InputKind.FF_SET, None),                    # a directory of logs
])
def test_what_a_path_names(tmp_path, make, kind, why):
    got = open_input(make(tmp_path))
    assert got.kind is kind
    assert (got.why is None) if why is None else why in got.why


def test_a_directory_of_dumps_unless_dumps_are_given_apart(tmp_path):
    for rank in range(2):
        _write(tmp_path, f"nccl_trace_rank_{rank}", b"\x80\x04" + b"\x00" * 16)
    assert open_input(str(tmp_path)).kind is InputKind.FR_DUMPS
    assert open_input(str(tmp_path), dumps=False).kind is InputKind.FF_SET


def test_a_fifo_is_left_to_the_trace_reader_unread(tmp_path):
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    assert open_input(fifo).kind is InputKind.TRACE      # opening it would block: not opened


@pytest.mark.parametrize("data, error", [
    (b'{"magic": "hangtrace-trace", "version"', CorruptTrace),     # cut inside its header
])
def test_a_trace_broken_in_its_header_is_said_as_the_reader_says(tmp_path, data, error):
    with pytest.raises(error, match="cut short inside its header"):
        open_input(_write(tmp_path, "cut.htrace", data))


def test_a_file_that_cannot_be_read_is_bad_input(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    path = _write(tmp_path, "secret", LOG)
    os.chmod(path, 0)
    with pytest.raises(BadInput, match="permission denied"):
        open_input(path)
