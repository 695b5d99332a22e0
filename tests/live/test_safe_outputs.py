"""Recordings and their output files (issue 22 items 1 and 5), with a real target: a link
planted at ``-o`` or at the predictable default name never gets followed, an existing trace
is replaced by rename (a SIGKILL mid-recording still leaves a readable trace at the name),
and SIGHUP (a closed terminal, a dropped ssh session) ends a recording as SIGTERM does, on
every backend: the end record written, the report printed, the target untouched."""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_run import hangtrace, one_line
from test_safety import (BACKENDS, _bpf_before, _drain, _start, _wait_recording,  # noqa: F401
                         wait_clean, worker)
from tracer.tracefile.format import TraceReader

SECRET = b"root's precious file\n"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim"
    v.write_bytes(SECRET)
    v.chmod(0o644)
    return v


def _wait_catching(pid: int, sig: int, timeout: float = 60.0) -> None:
    """Until ``pid`` has a handler for ``sig`` (/proc/PID/status SigCgt): ready for it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:") and int(line.split()[1], 16) >> (sig - 1) & 1:
                return
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} never caught signal {sig}")


def _untouched(victim: Path) -> None:
    assert victim.read_bytes() == SECRET and stat.S_IMODE(victim.stat().st_mode) == 0o644


def test_attach_refuses_a_link_at_its_output_before_attaching(worker, tmp_path, victim):
    out = tmp_path / "l.htrace.gz"
    out.symlink_to(victim)
    p = hangtrace("attach", str(worker.pid), "-b", "strace", "-d", "1", "-o", str(out))
    assert p.returncode == 1 and p.stdout == ""
    line = one_line(p.stderr)                         # no "attaching to" line before it
    assert f"{out}: is a symbolic link" in line and "not written" in line
    _untouched(victim)
    assert "TracerPid:\t0" in Path(f"/proc/{worker.pid}/status").read_text()


def test_the_default_name_never_follows_a_planted_link(worker, tmp_path, victim):
    # the default name is hangtrace-PID-TIME.htrace.gz in the working directory: links are
    # planted at it for every second the command could start in
    now = time.time()
    for dt in range(0, 30):
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now + dt))
        (tmp_path / f"hangtrace-{worker.pid}-{stamp}.htrace.gz").symlink_to(victim)
    p = hangtrace("attach", str(worker.pid), "-b", "proc", "-d", "0.5", "--json",
                  cwd=str(tmp_path), preexec_fn=lambda: os.umask(0o022))
    # the recording ran and saved its trace: a verdict's status, not an error (1) or a usage
    # error (2); which verdict a 0.5 s window of the worker gets is not this test's matter (on
    # a machine at load 20 the starved worker's one write in it read as "blocked", status 6)
    assert p.returncode not in (1, 2), p.stderr
    saved = [ln for ln in p.stderr.splitlines() if "trace saved to " in ln]
    path = tmp_path / saved[0].split("trace saved to ", 1)[1]
    assert path.name.endswith("-2.htrace.gz") and not path.is_symlink()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert TraceReader(str(path)).info.header["targets"] == [worker.pid]
    _untouched(victim)


def test_sigkill_mid_recording_over_an_existing_trace_leaves_a_readable_one(worker,
                                                                            tmp_path):
    trace = tmp_path / "t.htrace.gz"
    trace.write_bytes(b"an older trace, 0644")
    trace.chmod(0o644)
    os.link(trace, tmp_path / "older")               # the old inode keeps its content
    h = _start(["attach", str(worker.pid), "-b", "proc", "-d", "60", "--json",
                "-o", str(trace)])
    _wait_recording(h, trace)
    h.kill()
    h.wait()
    r = TraceReader(str(trace))
    assert sum(1 for _ in r.events()) > 0 and r.info.truncated
    assert stat.S_IMODE(trace.stat().st_mode) == 0o600
    assert (tmp_path / "older").read_bytes() == b"an older trace, 0644"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["older", "t.htrace.gz"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_sighup_ends_a_recording_like_sigterm(worker, backend, tmp_path):
    """SIGHUP used to kill hangtrace with status 129: no report, no end record (strace's
    trace then read as unknown)."""
    before = _bpf_before(backend)
    trace = tmp_path / "t.htrace.gz"
    h = _start(["attach", str(worker.pid), "-b", backend, "-d", "60", "--json",
                "-o", str(trace)], start_new_session=True)
    _wait_recording(h, trace)
    os.killpg(h.pid, signal.SIGHUP)        # as a closed terminal: its whole foreground group
    out, err = h.communicate(timeout=60)
    doc = json.loads(out)
    assert h.returncode == doc["exit_code"] and doc["verdict"] == "progressing", err
    assert any("ended early: interrupted (SIGHUP)" in n for n in doc["notes"]), doc["notes"]
    reader = TraceReader(str(trace))
    events = sum(1 for _ in reader.events())
    assert events > 0 and not reader.info.truncated
    assert reader.info.end is not None and reader.info.end.reason == "interrupted"
    wait_clean(backend, h.pid, [worker.pid], before)
    assert worker.poll() is None and _drain(worker)


def test_sighup_stops_watch_as_sigterm_does(tmp_path):
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        h = subprocess.Popen([sys.executable, "-m", "tracer", "watch", str(target.pid),
                              "--silent-for", "600", "-o", str(tmp_path)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _wait_catching(h.pid, signal.SIGHUP)
        h.send_signal(signal.SIGHUP)
        out, err = h.communicate(timeout=60)
        assert h.returncode == 0 and err.strip().splitlines()[-1] == "hangtrace: watch stopped"
    finally:
        target.kill()
        target.wait()


# ----------------------------------------------------------------- a full stdout (issue 35 item 6)
FULL_LINE = "hangtrace: standard output: cannot write: No space left on device"


def _into_full(args):
    with open("/dev/full", "w") as full:
        return subprocess.run([sys.executable, "-m", "tracer", *args], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("as_json", [False, True])
def test_attach_into_a_full_stdout_saves_the_trace_and_says_one_line(worker, tmp_path,
                                                                     as_json):
    out = tmp_path / "t.htrace.gz"
    p = _into_full(["attach", str(worker.pid), "-b", "proc", "-d", "0.5", "-o", str(out)]
                   + (["--json"] if as_json else []))
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert lines[-2:] == [f"hangtrace: trace saved to {out}", FULL_LINE], p.stderr
    info = TraceReader(str(out))
    assert sum(1 for _ in info.events()) > 0 and info.info.end is not None   # whole


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_watch_into_a_full_stdout_keeps_its_capture_files(tmp_path):
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        p = _into_full(["watch", str(target.pid), "--silent-for", "0.5", "-d", "0.3", "-b",
                        "proc", "--once", "--interval", "0.2", "-o", str(tmp_path)])
    finally:
        target.kill()
        target.wait()
    assert p.returncode == 1 and p.stderr.strip().splitlines()[-1] == FULL_LINE, p.stderr
    assert "Traceback" not in p.stderr
    names = sorted(f.name for f in tmp_path.iterdir())
    assert [n.rsplit(".", 1)[-1] for n in names] == ["gz", "json", "txt"], names
