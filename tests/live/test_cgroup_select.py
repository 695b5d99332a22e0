"""--cgroup and --container on a real cgroup v2 tree: a cgroup made where v2 is mounted
(/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid host like this VM) with children
named as Docker names its systemd scopes (docker-<64 hex>.scope), a scenario's two
processes moved into one, and a process outside it. attach and snapshot select exactly the
two, and the report (text and JSON) names the container, its runtime and its processes. The
cgroups are removed at the end (their processes moved back first). Root and cgroup v2 only."""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from pathlib import Path
from typing import Iterator, List

import pytest

from cli_run import hangtrace as run, one_line  # noqa: E402  (tests/cli_run.py)
from tracer.linux import procfs
from tracer.linux.containers import cgroup2_mount

MOUNT = Path(cgroup2_mount())     # /sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid host


def _cgroup2() -> bool:
    return (MOUNT / "cgroup.controllers").exists()


pytestmark = [pytest.mark.live,
              pytest.mark.skipif(os.geteuid() != 0, reason="making cgroups needs root"),
              pytest.mark.skipif(not _cgroup2(), reason="no cgroup v2 mounted")]


def _own_cgroup() -> Path:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return MOUNT / line[3:].lstrip("/")
    raise AssertionError("no cgroup v2 line in /proc/self/cgroup")


def _move(pids: List[int], into: Path) -> None:
    for pid in pids:
        try:
            (into / "cgroup.procs").write_text(f"{pid}\n")
        except ProcessLookupError:
            pass


@pytest.fixture()
def docker_like() -> Iterator[dict]:
    """Two container cgroups under a test parent: ids that share their first 4 hex digits."""
    parent = MOUNT / f"hangtrace-test-{secrets.token_hex(4)}"
    ids = ["beef" + secrets.token_hex(30), "beef" + secrets.token_hex(30)]
    scopes = [parent / f"docker-{cid}.scope" for cid in ids]
    back = _own_cgroup()
    parent.mkdir()
    try:
        for s in scopes:
            s.mkdir()
        yield {"parent": parent, "ids": ids, "scopes": scopes}
    finally:
        for s in scopes:
            if s.exists():
                _move([int(p) for p in (s / "cgroup.procs").read_text().split()], back)
                for _ in range(50):          # a process killed just now may take a moment
                    try:
                        s.rmdir()
                        break
                    except OSError:
                        time.sleep(0.1)
        parent.rmdir()
    assert not parent.exists()


def test_cgroup_and_container_select_exactly_the_containers_processes(scenario, docker_like,
                                                                      tmp_path):
    sc = scenario("pipe_deadlock")            # a parent and its child, deadlocked on pipes
    tree = sorted({sc.pid} | set(procfs.descendants([sc.pid])))
    assert len(tree) == 2
    outside = scenario("pipe_deadlock")       # the same program, left where it is
    other = subprocess.Popen(["sleep", "60"])
    try:
        _move(tree, docker_like["scopes"][0])
        _move([other.pid], docker_like["scopes"][1])
        cid = docker_like["ids"][0]
        rel = "/" + str(docker_like["scopes"][0].relative_to(MOUNT))
        for how in (["--cgroup", rel], ["--cgroup", str(docker_like["scopes"][0])],
                    ["--container", cid[:8]], ["--container", f"docker://{cid[:12].upper()}"]):
            p = run("attach", *how, "-b", "proc", "-d", "1", "--json",
                    "-o", str(tmp_path / f"t{len(how[1])}.htrace.gz"))
            doc = json.loads(p.stdout)
            assert sorted(x["pid"] for x in doc["processes"]) == tree, (how, p.stderr)
            assert doc["verdict"] == "deadlocked", how
            [c] = doc["evidence"]["containers"]
            assert (c["id"], c["runtime"], c["pids"]) == (cid, "docker", tree)
            assert c["cgroup"] == rel and c["pod_uid"] is None
            assert outside.pid not in [x["pid"] for x in doc["processes"]]
        # the container is a fact of the trace: analyze of the saved trace names it too
        again = json.loads(run("analyze", str(tmp_path / f"t{len(how[1])}.htrace.gz"),
                               "--json").stdout)
        assert again["evidence"]["containers"] == doc["evidence"]["containers"]
        # the test parent holds both containers: the cgroup below it selects both
        p = run("snapshot", "--cgroup", "/" + docker_like["parent"].name, "--json")
        snap = json.loads(p.stdout)
        assert sorted(snap["roots"]) == sorted(tree + [other.pid])
        assert {c["id"] for c in snap["evidence"]["containers"]} == set(docker_like["ids"])
        # the text report: one line per container, naming it, its runtime and its processes
        p = run("attach", "--container", cid[:12], "-b", "proc", "-d", "1",
                "-o", str(tmp_path / "text.htrace.gz"))
        lines = [line for line in p.stdout.splitlines() if "container docker" in line]
        assert len(lines) == 1, p.stdout
        assert f"container docker {cid[:12]}: 2 processes (pid {tree[0]}, pid {tree[1]})" \
            in lines[0] and rel in lines[0]
        # a prefix of both ids: one line naming both, usage status
        p = run("attach", "--container", "beef", "-d", "1", "-o", str(tmp_path / "x.htrace.gz"))
        line = one_line(p.stderr)
        assert p.returncode == 2 and "ambiguous" in line
        assert all(i[:12] in line for i in docker_like["ids"])
        p = run("attach", "--cgroup", "/hangtrace-no-such-cgroup", "-d", "1")
        assert p.returncode == 1 and "no cgroup" in one_line(p.stderr)
    finally:
        other.kill()
        other.wait()
