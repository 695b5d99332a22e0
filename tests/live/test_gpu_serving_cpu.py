"""fixtures/gpu/serving.py (the GPU serving shapes of issue 20) in its ``--cpu`` mode, checked
from /proc as test_serving_states.py checks the CPU tree: the torch ranks are titled, the key
threads named by the READY line are where the shape puts them, and each rank has torch's
threads (gloo, OpenMP) beside its own.

It needs an interpreter with torch: ``HANGTRACE_TORCH_PYTHON=/path/to/python`` (a side venv
with the CPU wheel, never the project's .venv), else this interpreter if it has torch;
otherwise the tests are skipped. The CUDA parts (the never-ending kernel, graph capture) run
only on the GPU machine (fixtures/gpu/record_serving.sh).
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from typing import Iterator

import pytest

from scenarios import REPO, Scenario, pid_tid, read_stat, thread_ids
from test_scenario_states import SYS_READ, SYS_WAIT4, assert_blocked_in_futex_forever, cmdline
from test_serving_states import SYS_FLOCK, assert_spins, call

SERVING = REPO / "fixtures" / "gpu" / "serving.py"
OMP_THREADS = 16


def torch_python() -> str | None:
    python = os.environ.get("HANGTRACE_TORCH_PYTHON")
    if python:
        return python
    return sys.executable if importlib.util.find_spec("torch") else None


PYTHON = torch_python()
pytestmark = [
    pytest.mark.skipif(PYTHON is None, reason="no torch (set HANGTRACE_TORCH_PYTHON)"),
    pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers are x86_64"),
]


@pytest.fixture
def serving() -> Iterator:
    running: list[Scenario] = []

    def start(shape: str) -> Scenario:
        sc = Scenario(f"gpu-serving-{shape}", [str(PYTHON), str(SERVING), "--shape", shape, "--cpu"],
                      ready_timeout=240, settle=0.5)
        running.append(sc)
        return sc

    yield start
    for sc in running:
        sc.stop()


def check_ranks(sc: Scenario) -> tuple[int, int]:
    f = sc.facts
    tp0, tp1 = int(f["tp0"]), int(f["tp1"])
    assert cmdline(tp0)[0] == "sglang::scheduler_TP0" and cmdline(tp1)[0] == "sglang::scheduler_TP1"
    for pid in (tp0, tp1):
        with open(f"/proc/{pid}/environ", "rb") as env:
            assert not any(v.startswith(b"RANK=") for v in env.read().split(b"\0"))
        assert len(thread_ids(pid)) >= OMP_THREADS          # OpenMP pool, gloo, our own
    assert call(sc.pid) == SYS_READ                          # the launcher's ready pipe
    for rank in (0, 1):
        assert_blocked_in_futex_forever(*pid_tid(f[f"main{rank}"]))
    return tp0, tp1


def test_spin(serving) -> None:
    sc = serving("spin")
    check_ranks(sc)
    assert pid_tid(sc.facts["stuck"]) == pid_tid(sc.facts["runner0"])
    assert_spins(*pid_tid(sc.facts["runner0"]))
    assert_blocked_in_futex_forever(*pid_tid(sc.facts["runner1"]))   # gloo all_reduce waits


def test_dead_runner(serving) -> None:
    sc = serving("dead-runner")
    tp0, tp1 = check_ranks(sc)
    pid, dead = pid_tid(sc.facts["dead"])
    assert pid == tp1 and dead not in thread_ids(tp1)
    assert_blocked_in_futex_forever(*pid_tid(sc.facts["runner0"]))


@pytest.mark.parametrize("shape", ["jit-lock", "jit-slow"])
def test_jit(serving, shape: str) -> None:
    sc = serving(shape)
    tp0, _ = check_ranks(sc)
    compiler, _ = pid_tid(sc.facts["compiler"])
    assert read_stat(compiler)[3] == str(tp0)
    assert call(*pid_tid(sc.facts["runner0"])) == SYS_WAIT4
    assert call(*pid_tid(sc.facts["runner1"])) == SYS_FLOCK


def test_serving_py_shapes_are_serving_trees() -> None:
    out = subprocess.run([str(PYTHON), str(SERVING), "--help"], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert out.returncode == 0 and "spin,dead-runner,jit-lock,jit-slow,ok" in out.stdout
