"""The command line: exit codes, one-line errors, JSON output, ending a recording early."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tracer.tracefile.format import TraceReader
from cli_run import hangtrace as run  # noqa: E402  (tests/cli_run.py)

from cli_run import HANGTRACE  # noqa: E402


@pytest.mark.live
def test_json_is_exactly_one_document(scenario, tmp_path):
    sc = scenario("spin")
    out = tmp_path / "t.htrace.gz"
    p = run("attach", str(sc.pid), "--backend", "proc", "--duration", "1", "--json",
            "--output", str(out))
    doc = json.loads(p.stdout)
    assert doc["format"] == "hangtrace.report/1"
    assert doc["verdict"] == "busy-waiting" and p.returncode == 3
    assert set(doc["root_cause"]) == {"pid", "tid", "summary", "node", "node_pid", "node_tid"}
    assert doc["root_cause"]["node"] is None            # one trace: no node
    proc = doc["processes"][0]
    for key in ("pid", "ppid", "role", "cmdline", "verdict", "waits_on", "threads"):
        assert key in proc
    for key in ("tid", "name", "state", "verdict", "evidence"):
        assert key in proc["threads"][0]
    assert out.exists() and f"trace saved to {out}" in p.stderr


@pytest.mark.live
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_ends_recording_early_and_keeps_the_trace(scenario, tmp_path, sig):
    sc = scenario("healthy_worker")
    out = tmp_path / "t.htrace.gz"
    proc = subprocess.Popen(HANGTRACE + ["attach", str(sc.pid), "--backend", "proc",
                                         "--duration", "60", "--json", "--output", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The signal goes once the recording has begun and saved some events (a loaded machine may
    # take seconds to start it); the deadline only bounds a hang.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _saved_events(out) <= 10:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=20)
    doc = json.loads(stdout)
    assert doc["verdict"] == "progressing", stderr
    assert any("ended early: interrupted" in n for n in doc["notes"])
    r = TraceReader(str(out))
    n = sum(1 for _ in r.events())
    assert n > 10 and r.info.end is not None and r.info.end.reason == "interrupted"
    assert sc.alive()


def _saved_events(path) -> int:
    """Events readable in a trace being written (0 before its header)."""
    try:
        return sum(1 for _ in TraceReader(str(path)).events())
    except Exception:  # not there yet, or cut in its header
        return 0


@pytest.mark.live
def test_target_exiting_ends_the_recording(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    try:
        out = tmp_path / "t.htrace.gz"
        # --duration 30, but the recording ends with the target (run()'s timeout is 60 s)
        p = run("attach", str(child.pid), "--backend", "proc", "--duration", "30", "--json",
                "--output", str(out))
        assert json.loads(p.stdout)["window"]["duration"] < 30
    finally:
        child.wait()
    doc = json.loads(p.stdout)
    assert doc["verdict"] == "exited" and p.returncode == 5, p.stderr


@pytest.mark.live
def test_name_picks_every_scheduler_by_title(scenario, tmp_path):
    sc = scenario("sglang_like")
    schedulers = [int(p) for p in sc.extra_fields
                  if open(f"/proc/{p}/cmdline").read().startswith("sglang::scheduler")]
    assert len(schedulers) == 2
    p = run("attach", "--name", "sglang::scheduler", "--backend", "proc", "--duration", "3.5",
            "--json", "--output", str(tmp_path / "t.htrace.gz"))
    doc = json.loads(p.stdout)
    pids = {q["pid"] for q in doc["processes"]}
    assert set(schedulers) <= pids and sc.pid not in pids, p.stderr
    # another copy of the suite may run its own sglang_like (and its own attach --name, whose
    # command line holds the pattern) at the same time: --name matches them too
    assert {q["role"] for q in doc["processes"] if q["pid"] in schedulers} == \
        {"scheduler TP0", "scheduler TP1"}
    assert doc["verdict"] == "busy-waiting" and doc["root_cause"]["pid"] in pids
