"""Live: attach to real scenarios with each backend and assert the deadlock's exact proof (the
tids, pids and objects of its cycle or dead end), and that negative cases have none."""
from __future__ import annotations

import os

import pytest

from test_attach_verdicts import BACKENDS, attach_json

pytestmark = pytest.mark.live


def _proof(report):
    g = report["wait_graph"]
    assert g is not None
    return g["proof"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_lock_order_cycle_names_both_mutexes_and_holders(scenario, backend, tmp_path):
    sc = scenario("lock_order_deadlock")
    _, t1, t2 = sorted(int(t) for t in os.listdir(f"/proc/{sc.pid}/task"))
    a1, a2 = _blocked_addr_t(sc.pid, t1), _blocked_addr_t(sc.pid, t2)
    r = attach_json(sc.pid, backend, 1.5, str(tmp_path / "t.htrace.gz"))
    assert r["verdict"] == "deadlocked"
    p = _proof(r)
    assert p["kind"] == "cycle" and set(r["wait_graph"]["cycle"]) == {f"T{t1}", f"T{t2}"}
    assert f"thread {t1} of lock_order_dead (pid {sc.pid}) waits for mutex {a1:#x} held by " \
           f"thread {t2}" in p["text"]
    assert f"thread {t2} of lock_order_dead (pid {sc.pid}) waits for mutex {a2:#x} held by " \
           f"thread {t1}" in p["text"]
    assert "to exit (pthread_join" in p["text"]
    assert p["text"] in r["root_cause"]["summary"]


def _blocked_addr_t(pid: int, tid: int) -> int:
    return int(open(f"/proc/{pid}/task/{tid}/syscall").read().split()[1], 16)


@pytest.mark.parametrize("backend", BACKENDS)
def test_shared_mutex_held_by_killed_child_is_a_dead_end(scenario, backend, tmp_path):
    sc = scenario("shared_mutex_killed")
    child, addr = int(sc.extra_fields[0]), int(sc.extra_fields[1], 16)
    r = attach_json(sc.pid, backend, 1.5, str(tmp_path / "t.htrace.gz"))
    assert r["verdict"] == "deadlocked"
    assert r["root_cause"]["pid"] == child
    p = _proof(r)
    assert p["kind"] == "dead-end"
    assert p["path"][0]["src"] == f"T{sc.pid}" and p["path"][-1]["dst"] == f"T{child}"
    assert f"(pid {sc.pid}) waits for process-shared mutex {addr:#x} held by " \
           f"shared_mutex_ki (pid {child}), which was killed by SIGKILL" in p["text"]
    procs = {q["pid"]: q for q in r["processes"]}
    assert procs[sc.pid]["verdict"] == "deadlocked" and procs[child]["verdict"] == "exited"


@pytest.mark.parametrize("backend", BACKENDS)
def test_pipe_cycle_between_two_processes(scenario, backend, tmp_path):
    sc = scenario("pipe_deadlock")
    child = int(sc.extra_fields[0])
    r = attach_json(sc.pid, backend, 1.5, str(tmp_path / "t.htrace.gz"))
    p = _proof(r)
    assert r["verdict"] == "deadlocked" and p["kind"] == "cycle"
    assert set(r["wait_graph"]["cycle"]) == {f"T{sc.pid}", f"P{sc.pid}", f"T{child}",
                                             f"P{child}"}
    assert f"whose only writer is python3 (pid {child})" in p["text"] or \
        f"(pid {child})" in p["text"]
    assert {e["kind"] for e in p["path"]} == {"pipe"}
    assert all(e["object"].startswith("pipe:[") for e in p["path"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_eventfd_and_pipe_cycle_between_two_processes(scenario, backend, tmp_path):
    sc = scenario("eventfd_deadlock")
    child = int(sc.extra_fields[0])
    efd = int(open(f"/proc/{sc.pid}/syscall").read().split()[1], 16)
    eid = next(line.split(":")[1].strip() for line in open(f"/proc/{sc.pid}/fdinfo/{efd}")
               if line.startswith("eventfd-id:"))
    r = attach_json(sc.pid, backend, 1.5, str(tmp_path / "t.htrace.gz"))
    p = _proof(r)
    assert r["verdict"] == "deadlocked" and p["kind"] == "cycle", r["root_cause"]
    assert set(r["wait_graph"]["cycle"]) == {f"T{sc.pid}", f"P{sc.pid}", f"T{child}",
                                             f"P{child}"}
    assert {e["kind"] for e in p["path"]} == {"eventfd", "pipe"}
    ev = next(e for e in p["path"] if e["kind"] == "eventfd")
    assert (ev["src"], ev["dst"], ev["object"]) == (f"T{sc.pid}", f"P{child}",
                                                    f"eventfd:[{eid}]")
    assert f"(pid {sc.pid}) waits in read on eventfd:[{eid}], which " in p["text"]
    assert f"(pid {child}) holds and could write" in p["text"]
    procs = {q["pid"]: q for q in r["processes"]}
    assert procs[sc.pid]["verdict"] == procs[child]["verdict"] == "deadlocked"
    assert any(w["kind"] == "eventfd" and w["pids"] == [child]
               for w in procs[sc.pid]["waits_on"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_dead_worker_cycle_through_the_launcher(scenario, backend, tmp_path):
    sc = scenario("dead_worker")
    tp0, tp1 = int(sc.extra_fields[0]), int(sc.extra_fields[1])
    r = attach_json(sc.pid, backend, 1.5, str(tmp_path / "t.htrace.gz"))
    assert r["verdict"] == "deadlocked" and r["root_cause"]["pid"] == tp1
    p = _proof(r)
    assert p["kind"] == "cycle"
    assert f"scheduler TP0 (pid {tp0}) reads pipe:[" in p["text"]
    assert f"whose only writer is launcher (pid {sc.pid})" in p["text"]
    assert f"launcher (pid {sc.pid}) waits for scheduler TP0 (pid {tp0}) in wait4" in p["text"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,verdict", [("slow_peer", "progressing"), ("idle_server", "idle"),
                                          ("parked_pool", "progressing")])
def test_no_proof_for_healthy_waits(scenario, backend, name, verdict, tmp_path):
    sc = scenario(name)
    r = attach_json(sc.pid, backend, 2.0, str(tmp_path / "t.htrace.gz"))
    assert r["verdict"] == verdict, r["root_cause"]
    assert _proof(r) is None
    assert not any(n["stuck"] for n in r["wait_graph"]["nodes"])
    if name == "slow_peer":
        writer = int(sc.extra_fields[0])
        reader = next(q for q in r["processes"] if q["pid"] == sc.pid)
        assert reader["verdict"] != "deadlocked"
        assert any(e["dst"] == f"P{writer}" and e["kind"] == "pipe"
                   for e in r["wait_graph"]["edges"]) or reader["verdict"] == "progressing"


def test_dot_export_of_a_recorded_deadlock(scenario, tmp_path):
    import subprocess
    import sys
    sc = scenario("shared_mutex_killed")
    attach_json(sc.pid, "proc", 1.0, str(tmp_path / "t.htrace.gz"))
    out = tmp_path / "g.dot"
    p = subprocess.run([sys.executable, "-m", "tracer", "export", str(tmp_path / "t.htrace.gz"),
                        "--format", "dot", "-o", str(out)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    dot = out.read_text()
    assert dot.startswith("digraph waitfor {")
    assert f'"T{sc.pid}" -> "T{sc.extra_fields[0]}"' in dot and "color=red" in dot
