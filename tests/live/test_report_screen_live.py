"""Issue 43 item 1, live: the report of an 8-GPU-server-sized tree (fixtures/scenarios/
tp8_server.py: about 800 threads) fits on one screen. The scenario's steady state is checked
from /proc first (its smoke test); the report test attaches with each backend and checks the
console report at 80 columns: at most 60 lines, the verdict, the root cause (the straggler's
runner, by pid) and its chain in it, the verdict and root cause at the end. Robust under load:
the scenario prints READY only once every thread is in place, nothing depends on timing."""
from __future__ import annotations

import os
import sys
from typing import Callable

import pytest

from terminal import run_on_pty
from scenarios import REPO, Scenario, pid_tid, pid_tids
from test_attach_verdicts import EBPF_PROBLEM, HAVE_STRACE

StartScenario = Callable[..., Scenario]
SYS_RECVFROM, SYS_FUTEX = "45", "202"

pytestmark = pytest.mark.live


def call(pid: int, tid: int) -> str:
    with open(f"/proc/{pid}/task/{tid}/syscall") as f:
        return f.read().split()[0]


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers are x86_64 Linux")
def test_tp8_server_is_in_its_steady_state(scenario: StartScenario) -> None:
    sc = scenario("tp8_server", ready_timeout=90.0)
    facts = sc.facts
    assert int(facts["threads"]) >= 800
    stuck_pid, stuck_tid = pid_tid(facts["stuck"])
    assert stuck_pid == int(facts["tp5"]) and call(stuck_pid, stuck_tid) == "running"
    for rank in range(8):
        pid, main = pid_tid(facts[f"main{rank}"])
        assert call(pid, main) == SYS_FUTEX
        assert len(os.listdir(f"/proc/{pid}/task")) == 100
        assert len(pid_tids(facts[f"watchdog{rank}"])[1]) == 4
        if rank != 5:
            assert call(*pid_tid(facts[f"runner{rank}"])) == SYS_RECVFROM
    assert call(int(facts["detok"]), int(facts["detok"])) == SYS_RECVFROM


# ---------------------------------------------------------------- the report on one screen

BACKENDS = [
    "proc",
    pytest.param("strace", marks=pytest.mark.skipif(not HAVE_STRACE,
                                                    reason="strace not installed")),
    pytest.param("ebpf", marks=pytest.mark.skipif(EBPF_PROBLEM is not None,
                                                  reason=f"ebpf: {EBPF_PROBLEM}")),
]
COLS, ROWS = 80, 60


def on_a_terminal(argv: list[str], cols: int, timeout: float = 240) -> tuple[list[str], int]:
    """(the lines ``argv`` wrote on a pseudo-terminal of ``cols`` columns (tests/terminal.py)
    from its verdict line on, escape sequences stripped; its exit status)."""
    run = run_on_pty(argv, cols=cols, rows=500, timeout=timeout, stderr="devnull", cwd=str(REPO),
                     env={"COLUMNS": str(cols), "LINES": "500"})
    lines = run.text.split("\n")
    start = max((i for i, line in enumerate(lines) if line.startswith("hangtrace verdict:")),
                default=0)
    lines = lines[start:]
    while lines and not lines[-1].strip():
        lines.pop()
    return lines, run.returncode


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_tree_s_report_fits_one_80_column_screen(scenario: StartScenario, tmp_path,
                                                      backend: str) -> None:
    sc = scenario("tp8_server", ready_timeout=90.0)
    pid, tid = pid_tid(sc.facts["stuck"])
    lines, rc = on_a_terminal([sys.executable, "-m", "tracer", "attach", str(sc.pid), "-d", "2",
                               "-b", backend, "-o", str(tmp_path / "t.htrace.gz")], COLS)
    text = "\n".join(lines)
    assert lines and lines[0].startswith("hangtrace verdict: busy-waiting"), text[-3000:]
    assert rc == 3, text[-3000:]
    assert len(lines) <= ROWS, text
    assert all(len(line) <= COLS for line in lines)
    end = lines[-8:]                    # what stays on the screen: verdict, root cause, chain
    assert any(line.startswith("verdict: busy-waiting") for line in end), text
    assert any(line.startswith(f"root cause pid {pid} tid {tid}:") for line in end), text
    chain = [line for line in end if line.startswith(("chain:", "       "))]
    assert len(chain) >= 2 and f"pid {pid} thread {tid}" in chain[-1], text
    assert any("scheduler TP0-4,6-7" in line for line in chain), text
