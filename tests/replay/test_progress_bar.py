"""Progress bars of long reads (tracer/render/progress.py): the pass counting, the drawing
(with a controllable clock: nothing here depends on how fast the machine is), the callbacks of
the trace reader, the strace log reader and the sharded importer's workers that feed it, and the
bar itself in a pseudo-terminal (shown) and on a pipe (nothing)."""
from __future__ import annotations

import gzip
import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from terminal import run_on_pty
from tracer.render.progress import LATER_PASS_COST, FileProgress, PassCounter, eta_text
from tracer.strace.importer import import_strace
from tracer.tracefile.format import TraceReader

HANGTRACE = [sys.executable, "-m", "tracer"]
REPO = Path(__file__).resolve().parents[2]
H200_LOG = REPO / "fixtures" / "gpu-h200" / "startup.strace.gz"


# --------------------------------------------------------------------------- pass counting
def test_pass_counter_two_passes():
    c = PassCounter(size=4 << 20, passes=2)
    mib = 1 << 20
    steps = [(1 * mib, 1 * mib), (3 * mib, 3 * mib), (4 * mib, 4 * mib),   # the scan
             (1 * mib, 5 * mib),                  # the conversion starts over: pass 2
             (4 * mib, 8 * mib), (9 * mib, 8 * mib)]   # never beyond the total
    for offset, want in steps:
        assert c.update(offset) == want, (offset, c.completed, c.last)


def test_the_eta_counts_the_work_left_in_both_passes():
    """Issue 43: a 1 GB log, its scan at 54 MB/s, its conversion 6 times slower. Half-way
    through the scan the work left is the scan's other half and the whole conversion: about
    10 + 111 s, not the 28 s that the bytes left at the scan's rate give."""
    size, scan = 1000 << 20, 54 << 20
    c = PassCounter(size=size, passes=2)
    c.update(size // 2)
    left = c.seconds_left(pass_seconds=(size // 2) / scan, later_cost=LATER_PASS_COST)
    assert 115 < left < 125, left
    naive = (2 * size - size // 2) / scan
    assert naive < 30
    c.update(1 << 20)                   # the conversion begins: its own rate decides
    c.update(size // 4)
    assert abs(c.seconds_left(pass_seconds=(size // 4) / (9 << 20)) - 3 * (size // 4)
               / (9 << 20)) < 0.01
    assert eta_text(None) == "-:--:--" and eta_text(100.4) == "0:01:40"


def test_pass_counter_a_short_look_is_not_a_pass_and_it_never_goes_back():
    mib = 1 << 20
    c = PassCounter(size=37 * mib, passes=2)
    assert c.update(64 << 10) == 64 << 10       # a look at the first 64 KiB ...
    assert c.update(2 * mib) == 2 * mib         # ... is not a pass
    assert c.update(20 * mib) == 20 * mib
    assert c.update(1 * mib) == 38 * mib        # back to the start after 20 MiB: pass 2
    c = PassCounter(size=1000, passes=1)
    assert c.update(800) == 800
    assert c.update(900) == 900
    assert c.update(1000) == 1000
    assert c.update(10) == 1000                 # a second pass of a one-pass bar: not beyond


# --------------------------------------------------------------------------- drawing
class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _bar(tmp_path, size: int, **kw):
    f = tmp_path / "data.bin"
    f.write_bytes(b"x" * size)
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    clock = Clock()
    return FileProgress(str(f), "reading", force=True, clock=clock, console=console, **kw), \
        clock, out


def test_no_bar_before_the_delay_then_at_most_one_frame_per_interval(tmp_path):
    bar, clock, out = _bar(tmp_path, 1000, delay=0.5, interval=0.1)
    with bar:
        bar.update(100)
        clock.t += 0.4
        bar.update(200)
        assert bar.frames == 0 and out.getvalue() == ""   # under the delay: nothing drawn
        clock.t += 0.2
        bar.update(300)
        assert bar.frames == 1
        bar.update(400)                  # the same instant: throttled
        clock.t += 0.05
        bar.update(500)
        assert bar.frames == 1
        clock.t += 0.06
        bar.update(600)
        assert bar.frames == 2
    assert bar.frames == 3               # the last frame, drawn on exit
    frames = _bar_frames(out.getvalue(), "reading data.bin", unit="bytes")
    assert frames and frames[-1][0] == "600"


def test_work_that_ends_before_the_delay_draws_nothing(tmp_path):
    bar, clock, out = _bar(tmp_path, 1000, delay=0.5)
    with bar:
        bar.update(1000)
        clock.t += 0.3
    assert bar.frames == 0 and out.getvalue() == ""


def test_disabled_when_stderr_is_not_a_terminal(tmp_path):
    f = tmp_path / "x"
    f.write_text("x")
    with FileProgress(str(f), "reading", force=False) as p:
        p.update(1)
        assert p.counter is None and p.frames == 0


def test_a_failing_console_never_breaks_the_work(tmp_path):
    class Broken(io.StringIO):
        def write(self, s):          # noqa: D102
            raise OSError("terminal gone")
    f = tmp_path / "data.bin"
    f.write_bytes(b"x" * 10)
    bar = FileProgress(str(f), "reading", force=True, delay=0,
                       console=Console(file=Broken(), force_terminal=True))
    with bar:
        bar.update(5)                    # raises inside: swallowed, the bar gives up
        bar.update(10)


# --------------------------------------------------------------------------- the callbacks
def test_the_trace_reader_reports_its_offset_up_to_the_file_size(tmp_path):
    trace = tmp_path / "t.htrace.gz"
    import_strace(str(H200_LOG), str(trace))
    seen = []
    n = sum(1 for _ in TraceReader(str(trace), seen.append).events())
    assert n > 1000
    assert seen and seen == sorted(seen) and seen[-1] == trace.stat().st_size


def test_the_importer_reports_both_passes(tmp_path):
    log = tmp_path / "startup.log"
    log.write_bytes(gzip.decompress(H200_LOG.read_bytes()))
    seen = []
    import_strace(str(log), str(tmp_path / "t.htrace"), progress=seen.append)
    size = log.stat().st_size
    assert seen.count(size) == 2                      # the scan and the conversion
    counter = PassCounter(size, passes=2)
    assert [counter.update(o) for o in seen][-1] == 2 * size


def test_the_sharded_importers_workers_report_their_offset(tmp_path):
    log = tmp_path / "big.log"
    _generate_log(log, 60_000)         # several batches of BATCH_LINES per worker
    seen = []
    import_strace(str(log), str(tmp_path / "t.htrace"), workers=2, progress=seen.append)
    size = log.stat().st_size
    scan_end = seen.index(size)                   # the first pass, in this process
    workers = seen[scan_end + 1:]                 # then the slowest worker, batch by batch
    assert len(workers) >= 2 and workers == sorted(workers) and 0 < workers[-1] <= size


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
    _generate_log(path, 100_000)         # ~13 MB: over a dozen blocks, so over a dozen callbacks
    return path


def run_in_pty(args, cwd=None):
    """Run hangtrace with stderr on a pseudo-terminal (120 columns, tests/terminal.py), stdout
    on a pipe: (exit status, stdout, stderr)."""
    # No delay before the bar: it is drawn at the work's first callback whatever the speed of
    # the machine (the delay itself is tested above with a controllable clock).
    run = run_on_pty(HANGTRACE + list(args), cols=120, rows=40, timeout=600, stdout="pipe",
                     cwd=cwd, env={"HANGTRACE_PROGRESS_DELAY": "0"})
    return run.returncode, run.stdout.decode(), run.raw.decode("utf-8", "replace")


def _bar_frames(err: str, label: str, unit: str = "MiB") -> list:
    """The bar's frames: 'LABEL NAME ... 12.3/74.6 MiB 9.1 MB/s ETA 0:00:03'."""
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", err)
    return re.findall(label + r" [^\r\n]*? ([\d.,]+)/([\d.,]+) " + unit
                      + r" +([\d.]+ (?:[kMG]?B|bytes)/s|\?) +ETA +(\d+:\d\d:\d\d|-:--:--)",
                      plain)


@pytest.mark.slow
def test_import_analyze_export_show_a_bar_in_a_terminal(big_log, tmp_path):
    out = tmp_path / "t.htrace.gz"
    rc, stdout, err = run_in_pty(["import-strace", str(big_log), "-o", str(out)])
    assert rc == 0 and stdout == "", err
    frames = _bar_frames(err, "importing server.strace.log")
    assert len(frames) >= 2, err[-2000:]          # the first callback's frame and the last
    done = [float(f[0]) for f in frames]
    total = {f[1] for f in frames}
    size_mib = big_log.stat().st_size / 2**20
    assert total == {f"{2 * size_mib:.1f}"}                # two passes over the log
    # The bar only goes forward, and its last frame is where the work ended: both passes.
    assert done == sorted(done) and done[-1] == float(f"{2 * size_mib:.1f}"), done
    assert frames[-1][2].endswith("B/s")
    assert "hangtrace: imported" in err

    rc, stdout, err = run_in_pty(["analyze", "--json", str(out)])
    frames = _bar_frames(err, "analyzing t.htrace.gz")
    assert stdout.lstrip().startswith("{") and frames, err
    assert frames[-1][0] == frames[-1][1]           # the whole trace was read
    rc, stdout, err = run_in_pty(["export", "-f", "json", "-o", str(tmp_path / "t.jsonl"),
                                  str(out)])
    assert rc == 0 and _bar_frames(err, "exporting t.htrace.gz"), err


@pytest.mark.slow
def test_no_bar_when_stderr_is_not_a_terminal(big_log, tmp_path):
    """The same work with stderr on a pipe, the bar's delay 0: only the usual one-line
    messages."""
    p = subprocess.run(HANGTRACE + ["analyze", "--json", str(big_log)], capture_output=True,
                       text=True, timeout=300, env={**os.environ, "HANGTRACE_PROGRESS_DELAY": "0"})
    assert p.stdout.lstrip().startswith("{")
    assert p.stderr.splitlines() == [f"hangtrace: {big_log} is an strace log; imported "
                                     f"{p.stderr.split()[-2]} events"], p.stderr
    assert "\x1b" not in p.stderr and "MiB" not in p.stderr
