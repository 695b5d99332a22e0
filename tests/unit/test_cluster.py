"""hangtrace cluster without a cluster: the command line each launcher runs (--dry-run), the
shell script slurm and pdsh tasks run (executed here by sh), collecting what each node left,
and the whole path through a launcher template whose "nodes" hand back traces made in advance
(test_merge.py's), one of them failing. tests/live/test_multinode.py runs it for real."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

import report_schema
from test_merge import A_SIDE, PID, two_nodes
from tracer.errors import UsageError
from tracer.record import cluster as cl
from cli_run import hangtrace as cli  # noqa: E402  (tests/cli_run.py)

ATT = cl.AttachArgs(["hangtrace"], [], "train.py --node {node}", 4.0, "strace", None)


# --------------------------------------------------------------------------- command lines
def test_per_node_launchers(tmp_path):
    out = str(tmp_path)
    att = ["hangtrace", "attach", "--name", "train.py --node gpu1", "--duration", "4",
           "--backend", "strace", "--output", "-"]
    ssh = cl.plan("ssh", ["gpu1"], ATT, out)[0]
    assert ssh.argv == ["ssh", "-o", "BatchMode=yes", "--", "gpu1", shlex.join(att)]
    assert (ssh.trace, ssh.log) == (f"{out}/gpu1.htrace.gz", f"{out}/gpu1.log")
    kube = cl.plan("kubectl", ["gpu1"], ATT, out, namespace="ml", container="main")[0]
    assert kube.argv == ["kubectl", "exec", "-n", "ml", "gpu1", "-c", "main", "--"] + att
    tmpl = cl.plan("ip netns exec {node}", ["gpu1"], ATT, out)[0]
    assert tmpl.argv == ["ip", "netns", "exec", "gpu1"] + att
    pods = cl.plan("kubectl", ["a@b:c", "gpu.01", "gpu.01.", "gpu.01"], ATT, out)
    assert [p.trace for p in pods] == [f"{out}/a@b_c.htrace.gz", f"{out}/gpu.01.htrace.gz",
                                       f"{out}/gpu.01-2.htrace.gz"]   # one file per name


@pytest.mark.parametrize("name,words", [
    ("--kubeconfig=/tmp/evil.kubeconfig", "option"), ("-oProxyCommand=touch x", "option"),
    ("gpu 01", "whitespace"), ("gpu/01", "'/'"), ("gpu01,gpu02", "','"), ("gpu\t1", "whitespace"),
    ("a\nb", "control"), ("", "empty")])
def test_node_names_a_launcher_would_misread_are_refused(tmp_path, name, words):
    for via in ("ssh", "kubectl", "pdsh", "ip netns exec {node}"):
        with pytest.raises(UsageError, match=words):
            cl.plan(via, ["ok1", name], ATT, str(tmp_path))
    with pytest.raises(UsageError):
        cl.plan("slurm", [name], ATT, str(tmp_path), jobid="1")
    assert cl.node_name_problem("gpu-01.rack[3]@x:22") is None


def test_dry_run_flags_the_node_names_it_would_refuse(tmp_path):
    evil = "--kubeconfig=/tmp/evil.kubeconfig"
    p = cli("cluster", "--via", "kubectl", "--pid", "1", "--dry-run", "--", "gpu01", evil)
    assert p.returncode == 2
    lines = p.stdout.splitlines()
    assert lines[0].startswith("# refused: --kubeconfig=/tmp/evil.kubeconfig: starts with '-'")
    assert len(lines) == 2 and lines[1].startswith("kubectl exec gpu01 -- hangtrace attach 1")
    p = cli("cluster", "--via", "ssh", "--pid", "1", "--", "-oProxyCommand=touch x",
            cwd=str(tmp_path))
    assert p.returncode == 2 and "refused node names" in p.stderr
    assert list(tmp_path.iterdir()) == []
    assert len(p.stderr.strip().splitlines()) == 1


def test_one_launcher_for_all_nodes(tmp_path):
    srun = cl.plan("slurm", [], ATT, str(tmp_path), jobid="77")[0]
    assert srun.argv[:5] == ["srun", "--overlap", "--jobid=77", "--ntasks-per-node=1",
                             "--label"] and srun.argv[5:7] == ["sh", "-c"]
    assert srun.shared_dir == str(tmp_path) and srun.node is None
    srun2 = cl.plan("slurm", ["n1", "n2"], ATT, str(tmp_path), jobid="77")[0]
    assert "--nodelist=n1,n2" in srun2.argv and "--nodes=2" in srun2.argv
    pdsh = cl.plan("pdsh", ["h1", "h2"], ATT, str(tmp_path))[0]
    assert pdsh.argv[:4] == ["pdsh", "-S", "-w", "h1,h2"]


@pytest.mark.parametrize("via,nodes,kw,words", [
    ("slurm", [], {}, "--jobid"), ("pdsh", [], {}, "hosts"), ("ssh", [], {}, "nodes"),
    ("kubectl", [], {}, "selector"), ("mpirun", ["a"], {}, "unknown launcher")])
def test_launchers_refuse_what_they_cannot_run(tmp_path, via, nodes, kw, words):
    with pytest.raises(UsageError, match=words):
        cl.plan(via, nodes, ATT, str(tmp_path), **kw)


def test_the_shared_directory_script_names_host_pattern_and_trace(tmp_path):
    """What a slurm or pdsh task runs, run by sh here with 'echo' for hangtrace."""
    att = cl.AttachArgs(["echo"], [], "it's {node}'s", 3.0, "proc", 10.0)
    script = cl.plan("pdsh", ["h"], att, str(tmp_path / "d ir"))[0].argv[-1]
    p = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30)
    host = subprocess.run(["hostname"], capture_output=True, text=True).stdout.strip()
    assert p.stderr.strip() == f"{cl.NODE_MARK}{host}"
    assert p.stdout.split("\n")[0] == (f"attach --name it's {host}'s --duration 3 --backend "
                                       f"proc --rate 10 --output {tmp_path}/d ir/{host}"
                                       ".htrace.gz")


def test_dry_run_prints_and_runs_nothing(tmp_path):
    p = cli("cluster", "--via", "ssh", "gpu01", "gpu02", "--name", "x", "--dry-run",
            "--output-dir", str(tmp_path / "o"))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("ssh -o BatchMode=yes -- gpu01 'hangtrace "
                                                   "attach --name x --duration 5")
    assert not (tmp_path / "o").exists()
    p = cli("cluster", "--via", "kubectl", "-l", "app=train", "-n", "ml", "--pid", "1",
            "--dry-run")
    assert p.stdout.splitlines()[0].startswith("kubectl get pods -l app=train -o name -n ml")
    assert "kubectl exec -n ml POD -- hangtrace attach 1" in p.stdout
    p = cli("cluster", "--via", "slurm", "--jobid", "9", "--name", "x", "--dry-run")
    assert p.stdout.startswith("srun --overlap --jobid=9 --ntasks-per-node=1 --label sh -c")


@pytest.mark.parametrize("args,words", [
    (("--via", "ssh", "a"), "--pid or --name"),
    (("--via", "slurm", "--name", "x"), "--jobid"),
    (("--via", "bogus", "a", "--name", "x"), "unknown launcher")])
def test_cluster_usage_errors_are_one_line(args, words, tmp_path):
    p = cli("cluster", *args, cwd=str(tmp_path))
    assert p.returncode == 2 and words in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []          # a refused run makes no directory


# --------------------------------------------------------------------------- collecting
def fake_nodes(tmp_path):
    """A launcher template whose node 'a' and 'b' hand back test_merge's traces on stdout
    (the remote 'hangtrace' is cat), and whose node 'c' has none."""
    src = tmp_path / "made"
    src.mkdir()
    two_nodes(src)
    via = f"env HT_TRACE={src}/{{node}}.htrace.gz"
    remote = "sh -c 'echo hangtrace: pretending >&2; exec cat \"$HT_TRACE\"' sh"
    return via, remote


def test_cluster_merges_the_nodes_that_answered_and_names_the_one_that_did_not(tmp_path):
    via, remote = fake_nodes(tmp_path)
    p = cli("cluster", "--via", via, "a", "b", "c", "--name", "x", "--remote-cmd", remote,
            "--output-dir", str(tmp_path / "out"), "--json")
    doc = json.loads(p.stdout)
    report_schema.check(doc)
    assert p.returncode == 7 and doc["verdict"] == "unknown", p.stderr   # c was not seen
    assert "node c: " in p.stderr and "No such file" in p.stderr
    assert [(n["name"], n["error"] is None) for n in doc["nodes"]] == [
        ("a", True), ("b", True), ("c", False)]
    assert "could not be recorded" in doc["root_cause"]["summary"]
    assert "node b, rank 1 (pid 4242) is idle" in doc["root_cause"]["summary"]
    a0 = next(x for x in doc["processes"] if x["pid"] == PID)
    assert A_SIDE in a0["waits_on"][0]["what"]
    assert sorted(os.listdir(tmp_path / "out")) == sorted(
        f"{n}.{e}" for n in "abc" for e in ("htrace.gz", "log"))


def test_cluster_with_every_node_answering_is_the_merge(tmp_path):
    via, remote = fake_nodes(tmp_path)
    p = cli("cluster", "--via", via, "a", "b", "--name", "x", "--remote-cmd", remote,
            "--output-dir", str(tmp_path / "out"), "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["verdict"] == "idle" and doc["root_cause"]["pid"] == 10_000_000 + PID


def test_no_node_answering_is_an_error(tmp_path):
    p = cli("cluster", "--via", "env HT={node}", "a", "b", "--name", "x", "--remote-cmd",
            "false", "--output-dir", str(tmp_path / "out"))
    assert p.returncode == 1 and "no node could be recorded" in p.stderr
    assert "Traceback" not in p.stderr


def test_a_launcher_that_is_not_installed_is_a_failed_node(tmp_path):
    runs = cl.plan("/nonexistent/launcher {node}", ["a"], ATT, str(tmp_path))
    res = cl.run(runs, timeout=10)
    assert res[0].trace is None and "No such file" in (res[0].error or "")


def test_nodes_still_running_at_the_deadline_are_stopped(tmp_path):
    t0 = time.monotonic()
    runs = cl.plan("sh -c 'sleep 60' {node}", ["a", "b"], ATT, str(tmp_path))
    res = cl.run(runs, timeout=1.0)
    assert time.monotonic() - t0 < 10
    assert all(r.trace is None and "still running after 1 s" in (r.error or "") for r in res)
    left = subprocess.run(["pgrep", "-f", "sleep 60' a"], capture_output=True, text=True)
    assert left.stdout.strip() == ""


def test_shared_directory_results_from_a_labelled_log(tmp_path):
    """srun --label output: who each task is, its errors, the traces it left."""
    src = tmp_path / "made"
    src.mkdir()
    a, _ = two_nodes(src)
    (tmp_path / "n1.htrace.gz").write_bytes(Path(a).read_bytes())
    log = tmp_path / "srun.log"
    log.write_text(f"0: {cl.NODE_MARK}n1\n1: {cl.NODE_MARK}n2\n"
                   "1: hangtrace: no process matches --name 'x'\n"
                   "0: hangtrace: trace written to standard output\n"
                   "srun: error: n2: task 1: Exited with exit code 1\n")
    run = cl.NodeRun(["srun"], None, log=str(log), shared_dir=str(tmp_path))
    res = cl._shared_results(run, 1, None)
    assert [(r.node, bool(r.trace), r.error) for r in res] == [
        ("n1", True, None), ("n2", False, "hangtrace: no process matches --name 'x'")]


def test_a_node_whose_attach_failed_after_writing_part_of_a_trace_is_merged_with_a_warning(
        tmp_path):
    src = tmp_path / "made"
    src.mkdir()
    a, _ = two_nodes(src)
    runs = cl.plan(f"sh -c 'cat {a}; echo hangtrace: disk full >&2; exit 1' {{node}}", ["a"],
                   ATT, str(tmp_path))
    res = cl.run(runs, timeout=30)
    assert res[0].trace and res[0].error is None
    assert res[0].warning == "hangtrace: disk full (exit status 1)"
