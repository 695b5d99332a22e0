"""--cgroup and --container over a /proc tree written here (linux/containers.py), the
ProcessCgroup fact through the trace codec, and the report's one line per container
(analysis/evidence/containers.py, render/evidence.py)."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from tracer.analysis.evidence.build import EvidenceTable, ProcFacts, build_evidence
from tracer.errors import TargetGone, UsageError
from tracer.events import evidence as xe
from tracer.linux.containers import select_by_cgroup, select_by_container
from tracer.tracefile import format as fmt  # noqa: F401  (registers every event class)
from tracer.tracefile.codec import RowCodec, encode_row
from tracer import events as ev

A = "3f2a1b9c4d5e" + "0" * 52
B = "3f2a77777777" + "1" * 52
C = "c0ffee000000" + "2" * 52
POD = ("/kubepods.slice/kubepods-burstable.slice/"
       "kubepods-burstable-pod1a2b3c4d_0000_1111_2222_333344445555.slice")
CGROUPS = {
    100: f"0::/system.slice/docker-{A}.scope\n",
    101: f"0::/system.slice/docker-{A}.scope\n",
    102: f"0::/system.slice/docker-{B}.scope\n",
    200: f"0::{POD}/cri-containerd-{C}.scope\n",
    201: f"0::{POD}/cri-containerd-{C}.scope/sub\n",
    300: "0::/user.slice/user-0.slice/session-1.scope\n",
    1: "0::/init.scope\n",
}


def _stat(pid: int, flags: int = 0) -> str:
    fields = ["S", "1", str(pid), "0"] + ["0"] * 4 + [str(flags)] + ["0"] * 40
    return f"{pid} (p{pid}) " + " ".join(fields)


@pytest.fixture()
def proc(tmp_path):
    root = tmp_path / "proc"
    for pid, text in CGROUPS.items():
        d = root / str(pid)
        d.mkdir(parents=True)
        (d / "cgroup").write_text(text)
        (d / "stat").write_text(_stat(pid))
        (d / "comm").write_text(f"p{pid}\n")
        (d / "cmdline").write_bytes(f"p{pid}\0".encode())
    mount = tmp_path / "cgroup"
    (mount / "system.slice" / f"docker-{A}.scope").mkdir(parents=True)
    (mount / "system.slice" / f"docker-{B}.scope").mkdir(parents=True)
    (mount / POD.lstrip("/") / f"cri-containerd-{C}.scope" / "sub").mkdir(parents=True)
    (mount / "cgroup.controllers").write_text("cpu memory pids\n")
    return str(root), str(mount)


def test_cgroup_selects_the_cgroup_and_those_below_it(proc):
    root, mount = proc
    assert select_by_cgroup(f"/system.slice/docker-{A}.scope", root=root, mount=mount) \
        == ([100, 101], [])
    assert select_by_cgroup(f"{mount}{POD}", root=root, mount=mount)[0] == [200, 201]
    assert select_by_cgroup("system.slice", root=root, mount=mount)[0] == [100, 101, 102]


def test_cgroup_errors_are_one_line(proc):
    root, mount = proc
    with pytest.raises(TargetGone, match="no cgroup '/nope' under"):
        select_by_cgroup("/nope", root=root, mount=mount)
    with pytest.raises(UsageError, match="not a cgroup path"):
        select_by_cgroup("/a/../b", root=root, mount=mount)
    with pytest.raises(UsageError, match="every process on the machine"):
        select_by_cgroup("/", root=root, mount=mount)
    (Path(mount) / "init.scope").mkdir()
    # pid 1 is left out and said so, as with --name; --force records it
    assert select_by_cgroup("/init.scope", root=root, mount=mount) \
        == ([], ["pid 1 (init: --force records it)"])
    assert select_by_cgroup("/init.scope", root=root, mount=mount, force=True) == ([1], [])


def test_container_prefix_selects_one_container(proc):
    root, _ = proc
    pids, which, left = select_by_container("3f2a1b9c", root=root)
    assert pids == [100, 101] and which.id == A and which.runtime == "docker" and not left
    pids, which, _ = select_by_container(f"containerd://{C[:8].upper()}", root=root)
    assert pids == [200, 201] and which.pod_uid == "1a2b3c4d-0000-1111-2222-333344445555"
    assert which.qos == "burstable"
    assert select_by_container("dead", root=root) == ([], None, [])


def test_an_ambiguous_prefix_names_the_candidates(proc):
    root, _ = proc
    with pytest.raises(UsageError) as exc:
        select_by_container("3f2a", root=root)
    msg = str(exc.value)
    assert "ambiguous" in msg and A[:12] in msg and B[:12] in msg and "\n" not in msg
    with pytest.raises(UsageError, match="at least 4 hex digits"):
        select_by_container("3f2", root=root)
    with pytest.raises(UsageError, match="at least 4 hex digits"):
        select_by_container("my-container", root=root)


def test_the_fact_reads_back_from_a_trace_row():
    fact = xe.ProcessCgroup(ts=1.5, pid=200, path=f"{POD}/cri-containerd-{C}.scope",
                            container_id=C, runtime="containerd", pod_uid="1a2b", qos="burstable",
                            phase="start")
    got = RowCodec(ev.schema()).line(encode_row(fact)[:-1])
    assert got == fact


def _evidence(facts):
    table = EvidenceTable()
    for f in facts:
        table.feed(f)
    procs = [ProcFacts(pid, 1, "", [f"p{pid}"], []) for pid in sorted({f.pid for f in facts})]
    return build_evidence(table, procs, window=(1.0, 6.0)).to_json()


def test_one_entry_per_container_with_its_processes():
    facts = [xe.ProcessCgroup(ts=1.0, pid=p, path=f"{POD}/cri-containerd-{C}.scope"
                              + ("/sub" if p == 201 else ""), container_id=C,
                              runtime="containerd", pod_uid="1a2b-3c4d", qos="burstable",
                              phase="start") for p in (200, 201)]
    facts.append(xe.ProcessCgroup(ts=1.0, pid=100, path=f"/system.slice/docker-{A}.scope",
                                  container_id=A, runtime="docker", phase="start"))
    facts.append(xe.ProcessCgroup(ts=1.0, pid=300, path="/user.slice", phase="start"))
    e = _evidence(facts)
    assert [(c["short"], c["pids"]) for c in e["containers"]] == [(A[:12], [100]),
                                                                  (C[:12], [200, 201])]
    pod = e["containers"][1]
    assert pod["cgroup"] == f"{POD}/cri-containerd-{C}.scope"
    assert (pod["runtime"], pod["pod_uid"], pod["qos"]) == ("containerd", "1a2b-3c4d",
                                                             "burstable")


def test_the_report_names_each_container_once():
    from rich.console import Console
    from tracer.render.evidence import render_evidence
    facts = [xe.ProcessCgroup(ts=1.0, pid=p, path=f"/system.slice/docker-{A}.scope",
                              container_id=A, runtime="docker", phase="start")
             for p in (100, 101, 102)]
    out = io.StringIO()
    render_evidence(_evidence(facts), Console(file=out, width=400, color_system=None))
    lines = [line for line in out.getvalue().splitlines() if "container" in line]
    assert len(lines) == 1, out.getvalue()
    assert f"container docker {A[:12]}: 3 processes (pid 100, pid 101, pid 102)" in lines[0]
    assert f"/system.slice/docker-{A}.scope" in lines[0]


def test_no_container_no_line():
    facts = [xe.ProcessCgroup(ts=1.0, pid=300, path="/user.slice", phase="start"),
             xe.ProcessVitals(ts=1.0, pid=300, start_time=0.5, phase="start")]
    e = _evidence(facts)
    assert e["containers"] == [] and e["processes"][0]["cgroup"] == "/user.slice"


def test_watch_looks_again_for_the_containers_processes(proc):
    from tracer.record.watch_looks import TreeSampler
    root, _ = proc
    sampler = TreeSampler([], container="3f2a1b9c", root=root, nvml=None)
    assert sampler._selected() == [100, 101]
    ambiguous = TreeSampler([], container="3f2a", root=root, nvml=None)
    assert ambiguous._selected() == []          # an error between looks is no crash
