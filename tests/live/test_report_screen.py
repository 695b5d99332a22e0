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

from scenarios import Scenario, pid_tid, pid_tids

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
