"""Live tier: attach to real scenario processes with each backend and assert the verdicts.

These run as root in CI (strace needs ptrace). Each case states the verdict a correct analysis
gives (fixtures/scenarios/README.md) and what the root cause must name, by pid, never by name.
"""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import pytest

from scenarios import Scenario

pytestmark = pytest.mark.live

HAVE_STRACE = shutil.which("strace") is not None


def _ebpf_problem():
    from tracer.record.backends.ebpf.backend import EbpfBackend
    return EbpfBackend().check()


EBPF_PROBLEM = _ebpf_problem()
BACKENDS = [
    "proc",
    pytest.param("strace", marks=pytest.mark.skipif(not HAVE_STRACE,
                                                    reason="strace not installed")),
    pytest.param("ebpf", marks=pytest.mark.skipif(EBPF_PROBLEM is not None,
                                                  reason=f"ebpf: {EBPF_PROBLEM}")),
    "auto",
]


@dataclass
class Case:
    verdict: str
    duration: float = 2.0
    root: Callable[[Scenario], Optional[int]] = lambda sc: sc.pid
    contains: List[str] = field(default_factory=list)
    processes: Callable[[Scenario], Dict[int, str]] = lambda sc: {}

    def check(self, report: dict, sc: Scenario) -> None:
        """Assert a report (JSON form) against this case: verdict, root cause, processes."""
        summary = report["root_cause"]["summary"]
        assert report["verdict"] == self.verdict, json.dumps(report, indent=1)[:4000]
        want_root = self.root(sc)
        if want_root is not None:
            assert report["root_cause"]["pid"] == want_root, summary
        for text in self.contains:
            assert text in summary, summary
        procs = {p["pid"]: p for p in report["processes"]}
        for pid, verdict in self.processes(sc).items():
            assert procs[pid]["verdict"] == verdict, (pid, procs[pid])


CASES: Dict[str, Case] = {
    "spin": Case("busy-waiting", contains=["busy-waits", "no output"]),
    "yield_spin": Case("busy-waiting", contains=["busy-waits"]),
    "lock_order_deadlock": Case("deadlocked", contains=["blocked without timeout"]),
    "py_deadlock": Case("deadlocked", contains=["blocked without timeout"]),
    "idle_server": Case("idle", contains=["listening on tcp 127.0.0.1"]),
    "pipe_deadlock": Case(
        "deadlocked", root=lambda sc: None, contains=["reads pipe:["],
        processes=lambda sc: {sc.pid: "deadlocked", int(sc.extra_fields[0]): "deadlocked"}),
    "dead_worker": Case(
        "deadlocked", root=lambda sc: int(sc.extra_fields[1]),
        contains=["exited with status 3", "scheduler TP0", "reads pipe:["],
        processes=lambda sc: {sc.pid: "deadlocked", int(sc.extra_fields[0]): "deadlocked",
                              int(sc.extra_fields[1]): "exited"}),
    "sglang_like": Case(
        "busy-waiting", duration=4.0, root=lambda sc: None,
        contains=["scheduler TP", "busy-waits", "launcher"],
        processes=lambda sc: {sc.pid: "blocked"}),
    "healthy_worker": Case("progressing", contains=["makes progress"]),
    # The tree progresses (its log grows) while 3 workers wait for a mutex a stuck thread holds.
    "partial_hang": Case("progressing", contains=["makes progress"]),
    # Its only output is what it sends on a TCP socket (and the connections it makes).
    "chatty_client": Case("progressing", duration=2.0, root=lambda sc: None,
                          contains=["makes progress"],
                          processes=lambda sc: {sc.pid: "progressing"}),
    # Helper threads chat (30 B each way every 0.5 s) while rank0's main thread spins and
    # rank1's waits forever: keep-alives are not progress.
    "heartbeat_hang": Case("busy-waiting", duration=3.0, contains=["busy-waits", "no output"],
                           processes=lambda sc: {int(sc.extra_fields[0]): "blocked"}),
    "parked_pool": Case("progressing", contains=["makes progress"]),
}


def attach_json(pid: int, backend: str, duration: float, out: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "tracer", "attach", str(pid), "--backend", backend,
                        "--duration", str(duration), "--json", "--output", out],
                       capture_output=True, text=True, timeout=duration + 30)
    assert p.stdout.strip(), p.stderr
    report = json.loads(p.stdout)          # exactly one JSON document
    assert p.returncode == report["exit_code"], p.stderr
    return report


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_attach_gives_the_right_verdict(scenario, name, backend, tmp_path):
    case = CASES[name]
    sc = scenario(name)
    report = attach_json(sc.pid, backend, case.duration, str(tmp_path / "t.htrace.gz"))
    case.check(report, sc)
    procs = {p["pid"] for p in report["processes"]}
    assert set(sc.all_pids()) <= procs, "every process of the tree is in the report"
    # The saved trace replays to the same verdict.
    p = subprocess.run([sys.executable, "-m", "tracer", "analyze", str(tmp_path / "t.htrace.gz"),
                        "--json"], capture_output=True, text=True, timeout=60)
    assert json.loads(p.stdout)["verdict"] == case.verdict
    assert sc.alive(), "the target must survive being traced"
    if name == "partial_hang":      # named in a section of its own, with the mutex and holder
        [h] = report["partial_hangs"]
        tids = sorted(int(t) for t in __import__("os").listdir(f"/proc/{sc.pid}/task"))
        assert (h["kind"], h["pid"], h["tids"], h["certain"]) == ("mutex", sc.pid, tids[2:],
                                                                    True)
        assert f"held by thread {tids[1]}" in h["object"] and "waits in read(" in h["evidence"]


@pytest.mark.skipif(not HAVE_STRACE, reason="strace not installed")
def test_idle_server_still_serves_after_strace_detached(scenario, tmp_path):
    sc = scenario("idle_server")
    attach_json(sc.pid, "strace", 1.0, str(tmp_path / "t.htrace.gz"))
    port = int(sc.extra_fields[0])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert b"200" in s.recv(100)
    state = open(f"/proc/{sc.pid}/stat").read().rsplit(")", 1)[1].split()[0]
    assert state not in ("t", "T"), "target left stopped"
    left = subprocess.run(["pgrep", "-f", f"strace .*-p {sc.pid}( |$)"], capture_output=True,
                          text=True).stdout
    assert left.strip() == "", f"strace children left behind: {left}"
    tracer_pid = next(line.split()[1] for line in open(f"/proc/{sc.pid}/status")
                      if line.startswith("TracerPid:"))
    assert tracer_pid == "0", "the target is still being traced"
