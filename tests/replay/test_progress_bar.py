"""Progress bars of long reads (tracer/render/progress.py): the pass counting, the fd offsets it
follows, and the bar itself in a pseudo-terminal (shown) and on a pipe (nothing)."""
from __future__ import annotations

import fcntl
import importlib.util
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from tracer.render.progress import FileProgress, _PassCounter, fd_positions

HANGTRACE = [sys.executable, "-m", "tracer"]
REPO = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- pass counting
def test_pass_counter_two_passes_with_a_sniff_and_two_workers():
    c = _PassCounter(size=1000, passes=2)
    steps = [
        ({(1, 3): 64}, 64),                       # sniffing the first lines: not a pass
        ({}, 64),
        ({(1, 4): 300}, 300),                     # first pass (another fd)
        ({(1, 4): 900}, 900),
        ({}, 1000),                               # closed after reading most: pass 1 done
        ({(7, 3): 100, (8, 3): 50}, 1050),        # two workers: the slower one counts
        ({(7, 3): 600, (8, 3): 700}, 1600),
        ({(7, 3): 1000, (8, 3): 1000}, 2000),
        ({}, 2000),                               # never beyond the total
    ]
    for positions, want in steps:
        assert c.update(positions) == want, (positions, c.completed, c.last)


def test_pass_counter_a_fast_pass_seen_once():
    """A first pass seen at 16 MiB of 37 MiB, then closed: still a pass (it read over 1 MiB)."""
    mib = 1 << 20
    c = _PassCounter(size=37 * mib, passes=2)
    assert c.update({(1, 3): 16 * mib}) == 16 * mib
    assert c.update({(2, 5): 1 * mib}) == 38 * mib        # a worker: the second pass
    c = _PassCounter(size=37 * mib, passes=2)
    assert c.update({(1, 3): 64 << 10}) == 64 << 10       # a sniff of 64 KiB ...
    assert c.update({(1, 4): 2 * mib}) == 2 * mib         # ... is not a pass


def test_pass_counter_rewind_and_late_reader():
    c = _PassCounter(size=1000, passes=2)
    assert c.update({(1, 3): 800}) == 800
    assert c.update({(1, 3): 10}) == 1010          # the same fd went back: the second pass
    c = _PassCounter(size=1000, passes=1)
    assert c.update({(7, 3): 400}) == 400
    assert c.update({(7, 3): 450, (8, 3): 0}) == 400   # the slowest reader counts, but a
    assert c.update({(7, 3): 500, (8, 3): 450}) == 450  # late one does not send the bar back


def test_fd_positions_follow_an_open_file(tmp_path):
    f = tmp_path / "data.bin"
    f.write_bytes(b"x" * 10000)
    with open(f, "rb") as fh:
        fh.read(1234)
        pos = fd_positions(os.path.realpath(f), [os.getpid()])
        assert pos == {(os.getpid(), fh.fileno()): os.lseek(fh.fileno(), 0, os.SEEK_CUR)}
        assert list(pos.values())[0] >= 1234
    assert fd_positions(os.path.realpath(f), [os.getpid()]) == {}


def test_disabled_when_stderr_is_not_a_terminal(tmp_path):
    f = tmp_path / "x"
    f.write_text("x")
    with FileProgress(str(f), "reading", force=False) as p:
        assert p._thread is None


# --------------------------------------------------------------------------- in a terminal
def _generate_log(path: Path, lines: int) -> None:
    spec = importlib.util.spec_from_file_location("import_speed",
                                                  REPO / "bench" / "import_speed.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.generate(str(path), lines)


@pytest.fixture(scope="module")
def big_log(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("progress") / "server.strace.log"
    _generate_log(path, 300_000)         # ~39 MB: several seconds to import on 2 cores
    return path


def run_in_pty(args, cwd=None):
    """Run hangtrace with stderr on a pseudo-terminal (120 columns), stdout on a pipe."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    p = subprocess.Popen(HANGTRACE + list(args), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=slave, cwd=cwd,
                         env={**os.environ, "TERM": "xterm-256color"})
    os.close(slave)
    err = b""
    out_chunks = []
    open_fds = [master, p.stdout.fileno()]
    while open_fds:
        r, _, _ = select.select(open_fds, [], [], 1.0)
        for fd in r:
            try:
                data = os.read(fd, 65536)
            except OSError:       # EIO on the terminal: the child closed it
                data = b""
            if not data:
                open_fds.remove(fd)
            elif fd == master:
                err += data
            else:
                out_chunks.append(data)
        if not r and p.poll() is not None:
            break
    p.wait(timeout=60)
    os.close(master)
    return p.returncode, b"".join(out_chunks).decode(), err.decode("utf-8", "replace")


def _bar_frames(err: str, label: str) -> list:
    """The bar's frames: 'LABEL NAME ... 12.3/74.6 MiB 9.1 MB/s ETA 0:00:03'."""
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", err)
    return re.findall(label + r" [^\r\n]*? ([\d.]+)/([\d.]+) MiB +([\d.]+ [kMG]?B/s|\?) +ETA +"
                      r"(\d+:\d\d:\d\d|-:--:--)", plain)


@pytest.mark.slow
def test_import_analyze_export_show_a_bar_in_a_terminal(big_log, tmp_path):
    out = tmp_path / "t.htrace.gz"
    rc, stdout, err = run_in_pty(["import-strace", str(big_log), "-o", str(out)])
    assert rc == 0 and stdout == "", err
    frames = _bar_frames(err, "importing server.strace.log")
    assert len(frames) >= 3, err[-2000:]
    done = [float(f[0]) for f in frames]
    total = {f[1] for f in frames}
    size_mib = big_log.stat().st_size / 2**20
    assert total == {f"{2 * size_mib:.1f}"}                # two passes over the log
    # The bar only goes forward, and it followed at least one whole pass (the first one, which
    # takes a fraction of a second, may be seen only once or not at all).
    assert done == sorted(done) and done[-1] >= 0.9 * size_mib, done
    assert any(f[2].endswith("B/s") for f in frames) and any(":" in f[3] and "-" not in f[3]
                                                            for f in frames)
    assert "hangtrace: imported" in err

    rc, stdout, err = run_in_pty(["analyze", "--json", str(out)])
    assert stdout.lstrip().startswith("{") and _bar_frames(err, "analyzing t.htrace.gz"), err
    rc, stdout, err = run_in_pty(["export", "-f", "json", "-o", str(tmp_path / "t.jsonl"),
                                  str(out)])
    assert rc == 0 and _bar_frames(err, "exporting t.htrace.gz"), err


@pytest.mark.slow
def test_no_bar_when_stderr_is_not_a_terminal(big_log, tmp_path):
    """The same work with stderr on a pipe: only the usual one-line messages (the analysis of
    the log takes seconds, well past the bar's half-second delay)."""
    p = subprocess.run(HANGTRACE + ["analyze", "--json", str(big_log)], capture_output=True,
                       text=True, timeout=300)
    assert p.stdout.lstrip().startswith("{")
    assert p.stderr.splitlines() == [f"hangtrace: {big_log} is an strace log; imported "
                                     f"{p.stderr.split()[-2]} events"], p.stderr
    assert "\x1b" not in p.stderr and "MiB" not in p.stderr
