"""Python stacks (py-spy) at the end of a recording, joined to the kernel-level report by tid."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

from scenarios import SCENARIO_DIR, Scenario
from tracer import events as ev
from tracer.analysis.accumulate.stacks import failure_notes
from tracer.record.pystacks import NOT_INSTALLED, find_py_spy, format_frame

HAVE_PY_SPY = find_py_spy() is not None
needs_py_spy = pytest.mark.skipif(not HAVE_PY_SPY, reason="py-spy is not installed "
                                  "(pip install 'hangtrace[stacks]')")
HAVE_STRACE = shutil.which("strace") is not None

# A Python busy loop: one thread spins in pure Python (no syscalls), main waits in join().
# Kept here rather than in fixtures/scenarios/ (whose set of programs a smoke test pins).
PY_SPIN = r"""
import os, threading

def spin_forever():
    x = 0
    while True:
        x += 1

def main():
    t = threading.Thread(target=spin_forever, name="spinner", daemon=True)
    t.start()
    while t.native_id is None:
        pass
    print("READY", os.getpid(), t.native_id, flush=True)
    t.join()

main()
"""


def attach(pid: int, tmp: Path, *args: str, env: Dict[str, str] = None,
           as_json: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "tracer", "attach", str(pid), "--duration", "1",
           "--output", str(tmp / "t.htrace.gz"), *args] + (["--json"] if as_json else [])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def threads_of(report: dict, pid: int) -> Dict[int, dict]:
    p = next(p for p in report["processes"] if p["pid"] == pid)
    return {t["tid"]: t for t in p["threads"]}


def test_format_frame_and_notes() -> None:
    assert format_frame({"name": "take", "short_filename": "x.py", "line": 31}) == "take (x.py:31)"
    assert format_frame({"name": "f", "filename": "/a/b.py", "line": 0}) == "f (b.py)"
    fails = [ev.PyStack(ts=0, pid=1, tid=0, error="boom"),
             ev.PyStack(ts=0, pid=2, tid=0, error="boom"),
             ev.PyStack(ts=0, pid=3, tid=0, error="other")]
    assert failure_notes(fails) == ["Python stacks not taken for pid 1, 2: boom",
                                    "Python stacks not taken for pid 3: other"]


@needs_py_spy
@pytest.mark.live
def test_deadlock_stacks_at_their_threads(scenario, tmp_path: Path) -> None:
    sc = scenario("py_deadlock")
    p = attach(sc.pid, tmp_path, "--backend", "proc")
    report = json.loads(p.stdout)
    assert report["verdict"] == "deadlocked", p.stderr
    threads = threads_of(report, sc.pid)
    main, *workers = sc.threads()
    assert set(threads) == {main, *workers}
    for tid in workers:             # both workers: blocked in take() on the second lock
        assert threads[tid]["stack"][0].startswith("take (py_deadlock.py:"), threads[tid]
        assert threads[tid]["evidence"], threads[tid]      # kernel evidence next to it
    stack = threads[main]["stack"]
    assert any(f.startswith("Thread.join ") for f in stack), stack
    assert any(f.startswith("main (py_deadlock.py:") for f in stack), stack
    assert not any("Python stacks not taken" in n for n in report["notes"])
    # the stacks are in the trace: analyze of the saved file shows them too
    again = subprocess.run([sys.executable, "-m", "tracer", "analyze",
                            str(tmp_path / "t.htrace.gz"), "--json"],
                           capture_output=True, text=True, timeout=60)
    assert threads_of(json.loads(again.stdout), sc.pid)[workers[0]]["stack"] == \
        threads[workers[0]]["stack"]


@needs_py_spy
@pytest.mark.live
def test_rendered_report_shows_stack_under_its_thread(scenario, tmp_path: Path) -> None:
    sc = scenario("py_deadlock")
    p = attach(sc.pid, tmp_path, "--backend", "proc", as_json=False,
               env={"COLUMNS": "200"})
    out = p.stdout
    for worker in sc.threads()[1:]:
        line = re.search(rf"── {worker} python .*\n", out)     # the thread's own line
        assert line, out
        below = out[line.end():].splitlines()[0]
        assert "py: take (py_deadlock.py:" in below, out


@needs_py_spy
@pytest.mark.live
@pytest.mark.skipif(not HAVE_STRACE, reason="strace not installed")
def test_python_spin_stack_after_strace_detached(tmp_path: Path) -> None:
    with Scenario("py_spin", [sys.executable, "-c", PY_SPIN]) as sc:
        spinner = int(sc.extra_fields[0])
        p = attach(sc.pid, tmp_path, "--backend", "strace")
        report = json.loads(p.stdout)
        threads = threads_of(report, sc.pid)
        assert threads[spinner]["stack"][0].startswith("spin_forever ("), threads[spinner]
        assert threads[spinner]["verdict"] == "busy-waiting", threads[spinner]
        assert any(f.startswith("Thread.join ") for f in threads[sc.pid]["stack"])
        assert report["verdict"] == "busy-waiting"
        # --nonblocking, after strace detached: the target is left running, untraced
        with open(f"/proc/{sc.pid}/status") as f:
            assert "TracerPid:\t0" in f.read()
        assert sc.alive()


@pytest.mark.live
def test_without_py_spy_one_note(scenario, tmp_path: Path) -> None:
    sc = scenario("py_deadlock")
    p = attach(sc.pid, tmp_path, "--backend", "proc", env={"HANGTRACE_PY_SPY": ""})
    report = json.loads(p.stdout)
    notes = [n for n in report["notes"] if "Python stacks" in n]
    assert notes == [f"Python stacks not taken for pid {sc.pid}: {NOT_INSTALLED}"]
    assert all(not t["stack"] for t in threads_of(report, sc.pid).values())


@pytest.mark.live
def test_not_a_python_process_no_stacks_no_note(scenario, tmp_path: Path) -> None:
    sc = scenario("spin")
    report = json.loads(attach(sc.pid, tmp_path, "--backend", "proc").stdout)
    assert not any("Python stacks" in n for n in report["notes"])
    assert all(not t["stack"] for t in threads_of(report, sc.pid).values())


@needs_py_spy
@pytest.mark.live
def test_snapshot_stacks(scenario) -> None:
    sc = scenario("py_deadlock")
    p = subprocess.run([sys.executable, "-m", "tracer", "snapshot", str(sc.pid), "--stacks",
                        "--json"], capture_output=True, text=True, timeout=60)
    snap = json.loads(p.stdout)
    threads = {t["tid"]: t for t in snap["processes"][0]["threads"]}
    for tid in sc.threads()[1:]:
        assert threads[tid]["stack"][0].startswith("take (py_deadlock.py:")
    plain = subprocess.run([sys.executable, "-m", "tracer", "snapshot", str(sc.pid), "--stacks"],
                           capture_output=True, text=True, timeout=60, env={**os.environ,
                                                                           "COLUMNS": "200"})
    assert "py: take (py_deadlock.py:" in plain.stdout
    without = subprocess.run([sys.executable, "-m", "tracer", "snapshot", str(sc.pid), "--json"],
                             capture_output=True, text=True, timeout=60)
    assert all(not t["stack"] for t in json.loads(without.stdout)["processes"][0]["threads"])


def test_scenario_dir_exists() -> None:   # the inline program runs from the scenarios dir
    assert Path(SCENARIO_DIR).is_dir()
