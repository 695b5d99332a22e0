"""The issue-20 proof material is consistent with itself: every truth file names a recording or
log that exists, and the pids and tids it names as the root cause are the recording's own.

These tests do not analyze anything (the verdict tests are the lead's): they catch a truth file
that no longer matches its trace (re-recorded without rewriting it), a missing backend, a README
row that is missing, or a trace grown too large for the repository.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from scenarios import REPO, available_scenarios, pid_tid
from tracer.tracefile.format import TraceReader

TRUTH = REPO / "fixtures" / "truth"
FIELD = REPO / "tests" / "data" / "strace" / "field"
BACKENDS = {"strace", "proc", "ebpf"}
VERDICTS = {"progressing", "busy-waiting", "deadlocked", "blocked", "idle", "exited", "unknown"}
MAX_TRACE_BYTES = 400 * 1024
GPU_TRUTH = REPO / "fixtures" / "gpu" / "truth"        # from record.py --from-gpu, once made
TRUTH_FILES = sorted(TRUTH.glob("*.json"))
FIELD_LOGS = sorted(FIELD.glob("*.log"))


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def thread_table(trace: Path) -> dict[int, set[int]]:
    """{pid: tids} of the trace header's process table (what the recording saw at its start)."""
    return {p.pid: set(p.threads) for p in TraceReader(str(trace)).info.processes}


def scenario_exists(name: str) -> bool:
    """A CPU scenario of fixtures/scenarios, or a GPU one named by its path (``gpu/serving``)."""
    return name in available_scenarios() or (REPO / "fixtures" / f"{name}.py").exists()


def test_there_is_truth_for_every_case_and_backend() -> None:
    names: dict[str, set[str]] = {}
    for path in TRUTH_FILES:
        name, backend = path.stem.rsplit(".", 1)
        names.setdefault(name, set()).add(backend)
    assert len(names) >= 10
    assert all(backends == BACKENDS for backends in names.values()), names


@pytest.mark.parametrize("path", TRUTH_FILES + sorted(GPU_TRUTH.glob("*.json")),
                         ids=lambda p: p.stem)
def test_truth_matches_its_trace(path: Path) -> None:
    truth = load(path)
    assert scenario_exists(truth["scenario"])
    assert truth["verdict"] in VERDICTS and set(truth["also_acceptable"]) <= VERDICTS
    assert truth["chain"] and truth["backend"] == path.stem.rsplit(".", 1)[1]
    trace = REPO / truth["trace"]
    assert trace.exists() and trace.stat().st_size <= MAX_TRACE_BYTES
    table = thread_table(trace)
    root = int(truth["ready"].split()[1])
    assert root in table
    dead = truth["facts"].get("dead")
    # a dead main thread (PID:PID) is a dead process (a zombie at most): its threads are gone
    dead_pid = pid_tid(dead)[0] if dead and len(set(pid_tid(dead))) == 1 else None
    for key, value in truth["facts"].items():
        if re.fullmatch(r"\d+:\d+", value):
            pid, tid = pid_tid(value)
            assert pid in table, (key, value)
            if pid == dead_pid:       # gone, but for the main thread of its zombie
                assert tid not in table[pid] or tid == pid, (key, value)
            else:
                assert (tid in table[pid]) == (value != dead), (key, value)   # the dead tid is gone
    cause = truth["root_cause"]
    if cause is not None:
        assert cause["pid"] in table
        assert f"{cause['pid']}:{cause['tid']}" == truth["facts"][cause["fact"]]


@pytest.mark.parametrize("path", FIELD_LOGS, ids=lambda p: p.name)
def test_field_log_has_truth_and_readme_row(path: Path) -> None:
    truth = load(path.with_suffix(".truth.json"))
    assert truth["log"] == path.name
    assert truth["verdict"] is None or truth["verdict"] in VERDICTS
    assert f"| `{path.name}` |" in (FIELD / "README.md").read_text()
    text = path.read_text()
    cause = truth["root_cause"]
    if cause is not None:                 # the log itself names the root cause's thread
        assert re.search(rf"(^|\[pid +|Process |getpid\(\) += |wait4\(.*\) += ){cause['tid']}\b",
                         text, re.M), cause           # (wait4's: a child reaped, issue 44 item 8)
