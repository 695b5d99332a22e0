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


# With proc, the kernel adds the reaped workers' and launchers' I/O to the subreaper's
# /proc/PID/io (wait_task_zombie): the backend takes it out (linux/reaped_io.py), else it read
# as the subreaper's own output ("wrote 2 B beyond wake-up writes": progressing).
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_subreaper_that_reaped_every_child_is_idle(scenario, backend, tmp_path):
    sc = scenario("subreaper_chain", "--reaped", "--exit-after", "0.6")
    report = _attach(sc.pid, backend, str(tmp_path / "t.htrace"))
    assert report["verdict"] == "idle", report["root_cause"]["summary"]
    assert report["root_cause"]["pid"] == sc.pid
