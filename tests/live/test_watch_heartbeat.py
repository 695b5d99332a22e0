"""hangtrace watch on the stats-line shapes of serving_tree.py: a tree whose only output is a
stats line that repeats with the same numbers (a heartbeat) while its runner spins is captured
after the silence; its slow twin, whose stats line counts tokens that advance, is never
captured in a bounded run (issue 30: watch reads the analyzer's answer)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from test_watch_recordings import assert_never_captured

pytestmark = [pytest.mark.live, pytest.mark.slow]

HANGTRACE = [sys.executable, "-m", "tracer"]


def watch_once(pid: int, out, backend: str, duration: str) -> dict:
    """``hangtrace watch --once`` of ``pid`` after 2.5 s of silence: its capture's report,
    checked to be busy-waiting (exit status 3)."""
    p = subprocess.run(HANGTRACE + ["watch", str(pid), "--silent-for", "2.5", "--once",
                                    "--duration", duration, "--backend", backend, "--interval",
                                    "0.5", "--output-dir", str(out), "--json"],
                       capture_output=True, text=True, timeout=120)
    doc = json.loads(p.stdout)
    assert doc["verdict"] == "busy-waiting" and p.returncode == 3, p.stderr
    return doc


@pytest.mark.parametrize("shape", ["stats-hang", "stats-hang-pipe"])
def test_a_stats_line_that_says_nothing_new_is_silence(scenario, tmp_path, shape):
    """To a log file (its lines read: the same numbers) or printed to a pipe every 2 s (its
    content unread: no faster than a timer's reports, progress/reports.py)."""
    sc = scenario("serving_tree", "--shape", shape, ready_timeout=40)
    doc = watch_once(sc.pid, tmp_path, "proc", "1.5")
    assert doc["watch"]["recorded_from"] - doc["watch"]["silent_since"] >= 2.5


@pytest.mark.parametrize("shape", ["stats-slow", "stats-slow-pipe"])
def test_the_slow_twin_whose_stats_advance_is_never_captured(scenario, tmp_path, shape):
    sc = scenario("serving_tree", "--shape", shape, ready_timeout=40)
    assert_never_captured(sc.pid, tmp_path, silent_for=2.5, seconds=8.0)


@pytest.mark.parametrize("shape", ["capture-slow", "load-slow"])
def test_slow_work_that_writes_nothing_is_never_captured(scenario, tmp_path, shape):
    """capture-slow: the runner's Python code moves (stack samples before a capture);
    load-slow: it faults the weights in (page faults while storage reads come in)."""
    if shape == "capture-slow":
        from tracer.record.pystacks import find_py_spy
        if find_py_spy() is None:
            pytest.skip("py-spy is not installed: code that moves cannot be seen")
    sc = scenario("serving_tree", "--shape", shape, ready_timeout=60)
    assert_never_captured(sc.pid, tmp_path, silent_for=2.5, seconds=10.0)


def _uprobes_or_skip() -> None:
    from tracer.record.backends.ebpf.cuda_uprobes import CudaUprobeBackend
    why = CudaUprobeBackend().check()
    if why is not None:
        pytest.skip(why)


@pytest.mark.parametrize("name,args", [
    ("serving_tree", ("--shape", "warmup-slow")),      # a warm-up: syncs that return
    ("nccl_ranks", ("--shape", "slow")),               # a slow collective
])
def test_gpu_work_that_writes_nothing_is_never_captured(scenario, tmp_path, name, args):
    """Work on (a stand-in for) the GPU writes nothing and its stacks stay on the sync's line:
    libcuda's uprobes, counting for a moment before a capture, see its syncs return."""
    _uprobes_or_skip()
    sc = scenario(name, *args, ready_timeout=60)
    assert_never_captured(sc.pid, tmp_path, silent_for=2.5, seconds=10.0)


def test_a_sync_that_never_returns_is_captured(scenario, tmp_path):
    _uprobes_or_skip()
    sc = scenario("serving_tree", "--shape", "warmup-hang", ready_timeout=60)
    watch_once(sc.pid, tmp_path, "ebpf", "2")


def test_a_step_longer_than_a_look_is_still_seen_completing(scenario):
    """A slow step (rank 1's kernels 300 ms each: a completion every 1.2-3 s, longer than the
    rule's RECENT_S and than LOOK_S; what a busy machine makes of a shorter step): every look
    of the driver-motion probe sees its GPU work complete, as the watch must before it records.
    With a look of LOOK_S alone, the last completion was older than RECENT_S at its end in
    about one look of two (all four looks passed in about one run of 16)."""
    _uprobes_or_skip()
    from tracer.analysis.watch_rules import driver_signals
    from tracer.record.probes.driver_motion import driver_motion_probe
    from scenarios import process_tree
    sc = scenario("nccl_ranks", "--shape", "slow", "--kernel-ms", "300", ready_timeout=60)
    pids = process_tree(sc.pid)
    for look in range(4):
        calls, why = driver_motion_probe(pids)
        assert driver_signals(calls), (look, why, calls)
