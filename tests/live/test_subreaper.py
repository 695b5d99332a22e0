"""Live tier: a subreaper (PR_SET_CHILD_SUBREAPER) whose launchers exited, their workers
re-parented to it (issue 46 item 10). The three backends agree: the subreaper waits in wait4
for its children, the chain of waits goes on to what they wait on (pause: idle), the root cause
is a worker; one whose children all exited and were reaped is idle (in pause, no child).
With --exit-after the re-parenting happens inside the recording."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.live

BACKENDS = ["proc",
            pytest.param("strace", marks=pytest.mark.skipif(shutil.which("strace") is None,
                                                            reason="strace not installed")),
            "ebpf"]


def _attach(pid: int, backend: str, out: str) -> dict:
    if backend == "ebpf":
        from tracer.record.backends.ebpf.backend import EbpfBackend
        problem = EbpfBackend().check()
        if problem is not None:
            pytest.skip(f"ebpf: {problem}")
    p = subprocess.run([sys.executable, "-m", "tracer", "attach", str(pid), "-b", backend,
                        "-d", "2", "--json", "-o", out], capture_output=True, text=True,
                       timeout=90)
    assert p.stdout.strip(), p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("args", [[], ["--exit-after", "0.6"]], ids=["before", "inside"])
def test_a_subreaper_waits_for_its_adopted_workers(scenario, backend, args, tmp_path):
    sc = scenario("subreaper_chain", *args)
    workers = [int(p) for p in sc.extra_fields[0].split("=", 1)[1].split(",")]
    report = _attach(sc.pid, backend, str(tmp_path / "t.htrace"))
    summary = report["root_cause"]["summary"]
    assert report["verdict"] == "idle", summary
    assert report["root_cause"]["pid"] in workers, summary
    procs = {p["pid"]: p for p in report["processes"]}
    waits = [w for w in procs[sc.pid]["waits_on"] if w["kind"] == "child"]
    assert waits and set(workers) <= set(waits[0]["pids"]), procs[sc.pid]
    assert all(procs[w]["verdict"] == "idle" for w in workers)
    assert sc.alive()


# Known gap, proc only: the kernel adds a reaped child's I/O to its parent's /proc/PID/io
# (wait_task_zombie), so the subreaper's "writes" grow by what its workers wrote when it reaps
# them inside the window, and proc reads that as the subreaper's own output (seen 2 of 2 on a
# quiet VM). Per-thread io (task/TID/io) has no such sum; the backend does not use it yet.
_REAP_IO = pytest.mark.xfail(reason="proc: a reaped child's I/O is added to its parent's "
                             "/proc/PID/io and read as the parent's output", strict=False)


@pytest.mark.parametrize("backend", [pytest.param(b, marks=_REAP_IO) if b == "proc" else b
                                     for b in BACKENDS])
def test_a_subreaper_that_reaped_every_child_is_idle(scenario, backend, tmp_path):
    sc = scenario("subreaper_chain", "--reaped", "--exit-after", "0.6")
    report = _attach(sc.pid, backend, str(tmp_path / "t.htrace"))
    assert report["verdict"] == "idle", report["root_cause"]["summary"]
    assert report["root_cause"]["pid"] == sc.pid
