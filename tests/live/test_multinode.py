"""Two nodes made of two network namespaces (tests/netns_nodes.py: a veth pair, 192.0.2.1 and
192.0.2.2 inside them only): rank 0 on node A waits over TCP for rank 1 on node B, which is
stuck on a pipe nobody in the job writes (fixtures/scenarios/tcp_ranks.py). ``attach`` runs once
inside each namespace and ``merge`` must name the blocked rank's node and pid; ``cluster`` runs
the same through a launcher template (``ip netns exec {node}``), the code path of ssh and
kubectl exec, with a third node that does not exist, and the proc backend (waits from /proc
alone). Both namespaces share the machine's host name, so the nodes are told apart by their
network namespace. The strace backend records the keep-alives both ranks' helper threads
exchange: the clock offset comes from them (one kernel clock here: it must come out near
zero)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import netns_nodes
import report_schema
from netns_nodes import ADDR_A, ADDR_B, NodePair
from tracer.tracefile.nodes.merge import ID_STRIDE

pytestmark = [pytest.mark.live, pytest.mark.slow,
              pytest.mark.skipif(netns_nodes.unusable() is not None,
                                 reason=str(netns_nodes.unusable()))]

REPO = Path(__file__).resolve().parents[2]
RANKS = str(REPO / "fixtures" / "scenarios" / "tcp_ranks.py")
PY = sys.executable
VERDICT_STATUSES = (0, 3, 4, 5, 6, 7)


def blocked_in(pid: int, nr: str, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/syscall").read_text().split()[0] == nr:
                return True
        except (OSError, IndexError):
            return False
        time.sleep(0.05)
    return False


@pytest.fixture
def job():
    """(pair, rank 0's pid on A, rank 1's pid on B), both in their final wait."""
    with NodePair() as pair:
        pid1 = pair.start(pair.b, [PY, RANKS, "--node", pair.b, "--bind", ADDR_B],
                          {"RANK": "1"}, str(REPO))
        pid0 = pair.start(pair.a, [PY, RANKS, "--node", pair.a, "--connect", ADDR_B],
                          {"RANK": "0"}, str(REPO))
        assert blocked_in(pid1, "0"), "rank 1 is not blocked in read"
        assert blocked_in(pid0, "45"), "rank 0 is not blocked in recvfrom"
        assert sorted(pair.addresses(pair.a) + pair.addresses(pair.b)) == \
            [f"{ADDR_A}/24", f"{ADDR_B}/24"]              # no other address, not even lo
        yield pair, pid0, pid1
    assert pair.gone(), "a namespace or veth end was left behind"


def check_merged(doc: dict, pair: NodePair, pid0: int, pid1: int, pairs: bool = True) -> None:
    report_schema.check(doc)
    host = socket.gethostname()
    node_a, node_b = f"{host}/{pair.a}", f"{host}/{pair.b}"
    assert [n["name"] for n in doc["nodes"][:2]] == [node_a, node_b]
    k1 = ID_STRIDE + pid1                    # node B is the second node
    procs = {p["pid"]: p for p in doc["processes"]}
    assert set(procs) == {pid0, k1}, list(procs)
    assert (procs[k1]["node"], procs[k1]["node_pid"]) == (node_b, pid1)
    rc = doc["root_cause"]
    assert rc["pid"] == k1, rc
    assert f"node {node_b}, rank 1 (pid {pid1})" in rc["summary"]
    assert f"node {node_a}, rank 0 (pid {pid0}) reads TCP:[{ADDR_A}:" in rc["summary"] \
        and f"->{ADDR_B}:29500] whose peer is node {node_b}, rank 1 (pid {pid1})" \
        in rc["summary"], rc["summary"]
    w = procs[pid0]["waits_on"]
    assert [x["pids"] for x in w] == [[k1]] and w[0]["kind"] == "socket"
    b = doc["nodes"][1]
    if pairs:           # strace saw the keep-alives at both ends
        assert "both ways" in b["clock"], b["clock"]
        assert abs(b["clock_offset"]) < 0.005, b      # one clock: near zero
    else:               # /proc samples show no sends: the clock is left as it is, and said
        assert b["clock_offset"] == 0 and "no send/receive pairs" in b["clock"], b


def test_attach_in_each_namespace_then_merge_names_the_blocked_rank(job, tmp_path):
    pair, pid0, pid1 = job
    traces = [str(tmp_path / "a.htrace.gz"), str(tmp_path / "b.htrace.gz")]
    runs = [subprocess.Popen(["ip", "netns", "exec", ns, PY, "-m", "tracer", "attach",
                              str(pid), "-b", "strace", "-d", "4", "-o", out, "--json"],
                             cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
            for ns, pid, out in ((pair.a, pid0, traces[0]), (pair.b, pid1, traces[1]))]
    outs = [r.communicate(timeout=120) for r in runs]
    for r, (_, err) in zip(runs, outs):
        assert r.returncode in VERDICT_STATUSES, err
    # each trace knows its node: the same host name, different network namespaces
    idents = [json.loads(o)["processes"][0]["pid"] for o, _ in outs]
    assert idents == [pid0, pid1]
    p = subprocess.run([PY, "-m", "tracer", "merge", "--json", *traces], cwd=str(REPO),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr                 # idle: rank 1 waits outside the job
    doc = json.loads(p.stdout)
    check_merged(doc, pair, pid0, pid1)
    assert doc["verdict"] == "idle"
    assert [n["netns"] for n in doc["nodes"]] == [
        os.stat(f"/run/netns/{ns}").st_ino for ns in (pair.a, pair.b)]


def test_cluster_through_a_launcher_template_with_a_node_that_fails(job, tmp_path):
    pair, pid0, pid1 = job
    missing = pair.a.replace("htA", "htZ")           # no such namespace: that node fails
    out = tmp_path / "report.json"
    p = subprocess.run([PY, "-m", "tracer", "cluster", "--via", "ip netns exec {node}",
                        pair.a, pair.b, missing, "--name", "tcp_ranks.py --node {node}",
                        "-b", "proc", "-d", "4", "--remote-cmd", f"{PY} -m tracer",
                        "--output-dir", str(tmp_path / "nodes"), "--json", "-o", str(out)],
                       cwd=str(REPO), capture_output=True, text=True, timeout=180)
    doc = json.loads(out.read_text())
    # the job is idle but one node could not be seen: unknown, not "fine"
    assert p.returncode == 7 and doc["verdict"] == "unknown", p.stderr
    assert f"node {missing}: " in p.stderr
    check_merged(doc, pair, pid0, pid1, pairs=False)
    failed = doc["nodes"][2]
    assert failed["name"] == missing and failed["trace"] is None and failed["error"]
    assert any(missing in u for u in doc["unobserved"])
    assert "could not be recorded" in doc["root_cause"]["summary"]
    assert sorted(os.listdir(tmp_path / "nodes")) == sorted(
        [f"{n}.{ext}" for n in (pair.a, pair.b, missing) for ext in ("htrace.gz", "log")])
