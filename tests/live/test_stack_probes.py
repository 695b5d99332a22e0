"""The stack probes on real processes (issue 24): the GIL holder named by attach (py-spy), the
Flight Recorder probe finding a rank's dump through its environment, native frames from a
stack scan of a process py-spy cannot read (never paused)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scenarios import Scenario
from tracer.record.probes.elfsyms import read_maps
from tracer.record.probes.flight_recorder import flight_recorder_probe
from tracer.record.probes.stackscan import scan_thread
from tracer.record.pystacks import find_py_spy

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "fixtures" / "gpu" / "stacks_scenarios.py"
SKIP = REPO / "fixtures" / "flight-recorder" / "skip"
needs_py_spy = pytest.mark.skipif(find_py_spy() is None, reason="py-spy is not installed")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="reading another process's stack "
                                "memory needs root")


def _attach(pid: int, tmp: Path, *args: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "tracer", "attach", str(pid), "-d", "1.5",
                        "-o", str(tmp / "t.htrace.gz"), "--json", *args],
                       capture_output=True, text=True, timeout=120)
    return json.loads(p.stdout)


@needs_py_spy
@pytest.mark.parametrize("native", [False, True])
def test_gil_holder_is_on_the_wait_chain(tmp_path: Path, native: bool) -> None:
    with Scenario("gil", [sys.executable, str(SCENARIOS), "gil"], settle=0.8) as sc:
        holder = int(sc.extra_fields[0])
        report = _attach(sc.pid, tmp_path, "-b", "proc", *(["--native"] if native else []))
    threads = {t["tid"]: t for p in report["processes"] for t in p["threads"]}
    waiters = [t for t in threads.values() if t["rule"] == "waits-for-gil"]
    assert len(waiters) == 2, [(t["tid"], t["rule"]) for t in threads.values()]
    for w in waiters:
        assert f"held by thread {holder} (gil-holder)" in w["evidence"][0]
        assert "which blocks in read(" in w["evidence"][0]
    edges = report["wait_graph"]["edges"]
    assert {e["dst"] for e in edges if e["object"] == "GIL"} == {f"T{holder}"}
    assert any("holds the GIL" in e for e in threads[holder]["evidence"])
    if native:
        assert threads[holder]["native_stack"][0].startswith("read (libc.so")
    assert report["verdict"] == "deadlocked"


def test_flight_recorder_probe_reads_the_dump_the_environment_names(tmp_path: Path) -> None:
    prefix = tmp_path / "fr_rank_"
    shutil.copy(SKIP / "fr_rank_1", f"{prefix}1")
    env = dict(os.environ, TORCH_FR_BUFFER_SIZE="100", TORCH_FR_DUMP_TEMP_FILE=str(prefix),
               RANK="1")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], env=env)
    try:
        time.sleep(0.3)
        events = flight_recorder_probe([proc.pid])
        off = dict(env, TORCH_FR_BUFFER_SIZE="0")
        quiet = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"],
                                 env=off)
        try:
            time.sleep(0.3)
            assert flight_recorder_probe([quiet.pid]) == []      # not enabled: not read
        finally:
            quiet.kill()
            quiet.wait()
    finally:
        proc.kill()
        proc.wait()
    assert len(events) == 1
    d = events[0]
    assert (d.pid, d.rank, d.path, d.error) == (proc.pid, 1, f"{prefix}1", "")
    assert [e["collective_seq_id"] for e in d.entries] == [1, 2, 3]


@needs_root
def test_stack_scan_names_libc_without_stopping_the_thread() -> None:
    proc = subprocess.Popen(["sleep", "3600"])
    try:
        time.sleep(0.3)
        before = open(f"/proc/{proc.pid}/stat").read().split()[2]
        s = scan_thread(proc.pid, proc.pid, read_maps(proc.pid))
        after = open(f"/proc/{proc.pid}/stat").read().split()[2]
    finally:
        proc.kill()
        proc.wait()
    assert not s.error and s.source == "stack-scan"
    assert "nanosleep" in s.frames[0] and "(libc.so" in s.frames[0], s.frames
    assert before == after == "S"                # it never stopped
