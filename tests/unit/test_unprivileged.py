"""Permission is its own answer: as an unprivileged user, doctor says which checks failed for
lack of privilege (tracefs is mounted but root's, not "not mounted") and what to run, and
``attach`` of a process it may not trace exits 1 with one line, as strace does. The runs as
``nobody`` need root (setpriv) and a checkout ``nobody`` can read; elsewhere they skip."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import report_schema
from tracer.linux.access import may_trace
from tracer.linux.tracefs import mounted_tracefs

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
REPO = Path(__file__).resolve().parents[2]


def _as_nobody(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(NOBODY + [sys.executable, "-m", "tracer", *args], capture_output=True,
                          text=True, timeout=120, cwd="/", env={**os.environ,
                                                                "PYTHONPATH": str(REPO)})


@pytest.fixture(scope="module")
def nobody_can_run():
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run as nobody")
    p = subprocess.run(NOBODY + [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]);"
                                 " import tracer.cli", str(REPO)], capture_output=True, timeout=60)
    if p.returncode != 0:
        pytest.skip(f"nobody cannot import hangtrace from {REPO}")


def test_mounted_tracefs_reads_the_mount_table(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text("sysfs /sys sysfs rw 0 0\n"
                      "tracefs /sys/kernel/tracing tracefs rw,nosuid 0 0\n")
    assert mounted_tracefs(mounts=str(mounts)) == "/sys/kernel/tracing"
    mounts.write_text("sysfs /sys sysfs rw 0 0\n")
    assert mounted_tracefs(mounts=str(mounts)) is None
    assert mounted_tracefs(mounts=str(tmp_path / "none")) is None


def test_may_trace_a_child_and_a_gone_process():
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert may_trace(child.pid)
    finally:
        child.kill()
        child.wait()
    assert may_trace(child.pid)          # gone: the recording says so, not a denial


def test_doctor_as_nobody_names_the_checks_denied(nobody_can_run):
    p = _as_nobody("doctor", "--json")
    facts = json.loads(p.stdout)
    report_schema.check(facts, "doctor")
    assert not facts["root"] and "bpf_syscall" in facts["denied"]
    assert not facts["privilege"]["ok"] and "CAP_BPF" in facts["privilege"]["fix"]
    assert "CAP_SYS_PTRACE" in facts["privilege"]["fix"]
    tfs = mounted_tracefs()
    if tfs and not _nobody_reads(tfs):
        assert {"tracefs", "tracepoints", "uprobes"} <= set(facts["denied"])
        assert "mounted" in facts["tracefs"]["detail"]
        assert "not mounted" not in facts["tracefs"]["detail"]
        assert "CONFIG_" not in facts["uprobes"]["fix"]
    for name in facts["denied"]:
        assert not facts[name]["ok"] and facts[name]["fix"], name
    text = _as_nobody("doctor").stdout
    assert "PERM bpf_syscall" in text and "failed for lack of privilege" in text


def _nobody_reads(path: str) -> bool:
    return subprocess.run(NOBODY + ["test", "-r", path, "-a", "-x", path]).returncode == 0


def test_attach_as_nobody_of_roots_process_is_one_line_and_exit_1(nobody_can_run):
    target = subprocess.Popen(["sleep", "60"])
    try:
        for backend in ("auto", "strace", "proc"):
            p = _as_nobody("attach", "-b", backend, "-p", str(target.pid), "-d", "1",
                           "-o", "/tmp/hangtrace-nobody-never.htrace.gz")
            assert p.returncode == 1, (backend, p.stderr)
            lines = p.stderr.strip().splitlines()
            assert len(lines) == 1 and "cannot trace pid" in lines[0], p.stderr
            assert "CAP_SYS_PTRACE" in lines[0]
    finally:
        target.kill()
        target.wait()
