"""``hangtrace cluster`` through real launchers (tests/launchers.py starts them as root, on
loopback): a job step started with ``srun`` on a one-node Slurm recorded ``--via slurm``, a
local process recorded ``--via ssh 127.0.0.1`` and ``--via pdsh``; each run's traces come back
and merge into one report that names the node and the process's own pid. kubectl is checked by
its command lines only (tests/unit/test_cluster.py). Skipped, with the reason, without root or
without the packages (scripts/setup-launchers.sh); CI installs them."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import launchers
from cli_run import HANGTRACE
from tracer.tracefile.format import TraceReader

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "fixtures" / "scenarios" / "py_deadlock.py"
REMOTE = f"{sys.executable} -m tracer"        # how the "nodes" run hangtrace: this checkout


def _cluster(args, env, tmp_path, timeout=240):
    out = tmp_path / "out"
    p = subprocess.run(HANGTRACE + ["cluster", *args, "-d", "2", "-b", "proc", "--json",
                                    "--output-dir", str(out), "--remote-cmd", REMOTE],
                       capture_output=True, text=True, timeout=timeout, env=env,
                       cwd=str(REPO))
    return p, out


def _deadlock(env=None) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, str(SCENARIO)], stdout=subprocess.PIPE, text=True,
                         env=env, start_new_session=True)
    assert p.stdout is not None and p.stdout.readline().startswith("READY")
    return p


def _kill(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, 9)
    except ProcessLookupError:
        pass
    p.wait(30)


def _one_node_report(p, pid: int) -> dict:
    assert p.returncode == 4, p.stderr[-3000:]           # the merged verdict: deadlocked
    doc = json.loads(p.stdout)
    assert doc["verdict"] == "deadlocked" and len(doc["nodes"]) == 1, doc["nodes"]
    node = doc["nodes"][0]
    assert node["error"] in (None, "") and node["trace"]
    proc = next(x for x in doc["processes"] if x["node_pid"] == pid)
    assert proc["node"] == node["name"] and proc["verdict"] == "deadlocked"
    assert doc["root_cause"]["node"] == node["name"] and doc["root_cause"]["node_pid"] == pid
    return doc


@pytest.fixture
def ssh(tmp_path):
    why = launchers.why_not("/usr/sbin/sshd", "ssh", "ssh-keygen")
    if why:
        pytest.skip(why)
    with launchers.exclusive():
        server = launchers.SshServer(tmp_path / "ssh")
        (tmp_path / "ssh").mkdir()
        try:
            server.start()
        except RuntimeError as exc:
            server.stop()
            pytest.skip(f"sshd could not be started here: {exc}")
        try:
            yield server
        finally:
            server.stop()


@pytest.mark.slow
def test_cluster_via_ssh_records_a_local_process(ssh, tmp_path):
    target = _deadlock()
    try:
        p, out = _cluster(["--via", "ssh", "127.0.0.1", "-p", str(target.pid)], ssh.env,
                          tmp_path)
    finally:
        _kill(target)
    doc = _one_node_report(p, target.pid)
    trace = out / "127.0.0.1.htrace.gz"
    assert doc["nodes"][0]["trace"] == str(trace)
    assert TraceReader(str(trace)).info.header["source"] == "attach"
    assert (out / "127.0.0.1.log").exists()


@pytest.mark.slow
def test_cluster_via_pdsh_over_ssh(ssh, tmp_path):
    why = launchers.why_not("pdsh")
    if why:
        pytest.skip(why)
    target = _deadlock()
    try:
        p, out = _cluster(["--via", "pdsh", "127.0.0.1", "-p", str(target.pid)], ssh.env,
                          tmp_path)
    finally:
        _kill(target)
    doc = _one_node_report(p, target.pid)
    assert Path(doc["nodes"][0]["trace"]).parent == out      # written by the task itself


@pytest.fixture
def slurm(tmp_path):
    why = launchers.why_not("slurmctld", "slurmd", "srun", "squeue", "munged", "munge")
    if why:
        pytest.skip(why)
    with launchers.exclusive():
        (tmp_path / "slurm").mkdir()
        cluster = launchers.Slurm(tmp_path / "slurm")
        try:
            cluster.start()
        except (RuntimeError, subprocess.CalledProcessError, OSError) as exc:
            cluster.stop()
            pytest.skip(f"a one-node Slurm could not be started here: {exc}")
        try:
            yield cluster
        finally:
            cluster.stop()


@pytest.mark.slow
def test_cluster_via_slurm_records_a_job_step(slurm, tmp_path):
    # the step's program carries a name the cluster command line does not: its pattern is a
    # glob ('[d]' matches 'd'), as in `ps aux | grep [p]attern`
    script = tmp_path / "ht_step_target_py_deadlock.py"
    script.write_text(SCENARIO.read_text())
    job, step = slurm.job_step([sys.executable, str(script)], "ht-step")
    try:
        assert step.stdout is not None and step.stdout.readline().startswith("READY")
        p, out = _cluster(["--via", "slurm", "--jobid", job, "--name",
                           "*ht_step_target_py_[d]eadlock*"], slurm.env, tmp_path)
    finally:
        subprocess.run(["scancel", job], env=slurm.env, capture_output=True, timeout=30)
        step.wait(60)
    assert p.returncode == 4, p.stderr[-3000:]
    doc = json.loads(p.stdout)
    node = doc["nodes"][0]
    assert node["trace"] == str(out / f"{slurm.host}.htrace.gz"), doc["nodes"]
    recorded = [x for x in doc["processes"] if "ht_step_target" in " ".join(x["cmdline"])]
    assert recorded and all(x["node"] == node["name"] for x in recorded)
    assert doc["verdict"] == "deadlocked" and doc["root_cause"]["node"] == node["name"]
