"""hangtrace watch on real processes (tests/data/watch_target.py): a process that logs and then
blocks is captured after the silence threshold and not before, and the recording begins after
the silence began; chatter (eventfd pokes, a TCP heartbeat) is silence; processes that keep
logging, keep sending or keep accepting connections are never captured in a bounded run."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import List

import pytest

import report_schema

pytestmark = [pytest.mark.live, pytest.mark.slow]

HANGTRACE = [sys.executable, "-m", "tracer"]
TARGET = Path(__file__).resolve().parents[1] / "data" / "watch_target.py"


class Target:
    """A watch_target.py process (its own session), its stdout lines kept with their times, its
    log lines appended to a file of its own too (--log): watch reads a log file's lines, not a
    pipe's, and a pipe's line a second is no more than a timer's report."""

    def __init__(self, *args: str) -> None:
        fd, self.log = tempfile.mkstemp(prefix="ht-watch-target-", suffix=".log")
        os.close(fd)
        self.proc = subprocess.Popen([sys.executable, str(TARGET), *args, "--log", self.log],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.DEVNULL, text=True,
                                     start_new_session=True)
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline().split()
        assert first[:1] == ["READY"], first
        self.pid = int(first[1])
        self.lines: List[str] = []
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def last_log(self) -> float:
        return max(float(line.split()[1]) for line in self.lines if line.startswith("LOG "))

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)
        os.unlink(self.log)


@pytest.fixture
def target():
    started: List[Target] = []

    def start(*args: str) -> Target:
        t = Target(*args)
        started.append(t)
        return t

    yield start
    for t in started:
        t.kill()


def watch(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(HANGTRACE + ["watch", *args], capture_output=True, text=True,
                          timeout=timeout)


SILENT_FOR = 2.5
INTERVAL = 0.5


def test_logs_then_blocks_is_captured_after_the_silence(target, tmp_path):
    t = target("logs-then-blocks", "--log-for", "3")
    started = time.time()
    p = watch(str(t.pid), "--silent-for", str(SILENT_FOR), "--once", "--duration", "1.5",
              "--backend", "proc", "--interval", str(INTERVAL), "--output-dir", str(tmp_path),
              "--json")
    assert len(p.stdout.splitlines()) == 1, p.stdout[:300]    # JSON Lines (issue 43 item 4)
    doc = json.loads(p.stdout)
    assert doc["verdict"] == "deadlocked" and p.returncode == doc["exit_code"] == 4, p.stderr
    last = t.last_log()
    assert last - started > 2.0                      # it did log while being watched
    w = doc["watch"]
    # The silence begins at a look after the last log line: the first one, INTERVAL apart, or
    # the next (progress is judged over a second); the bound is loose for a loaded machine.
    assert last <= w["silent_since"] <= last + 5.0, (last, w)
    # Captured after the threshold, not before: the recording began SILENT_FOR after the last
    # output at the earliest, and after the silence began.
    assert w["recorded_from"] - last >= SILENT_FOR, (last, w)
    assert w["recorded_from"] - w["silent_since"] >= SILENT_FOR
    assert doc["window"]["start"] == w["recorded_from"]
    assert re.fullmatch(r"the tree went silent at \d\d:\d\d:\d\d; recorded from "
                        r"\d\d:\d\d:\d\d", w["summary"])
    assert any("wrote" in s for s in w["last_progress"])
    (trace,) = tmp_path.glob("hangtrace-*.htrace.gz")
    stem = trace.name[:-len(".htrace.gz")]
    assert sorted(f.name for f in tmp_path.iterdir()) == sorted(
        [trace.name, f"{stem}.json", f"{stem}.txt"])
    assert json.loads((tmp_path / f"{stem}.json").read_text())["watch"] == w
    assert w["summary"] in (tmp_path / f"{stem}.txt").read_text()
    assert doc["trace"] == str(tmp_path / f"{stem}.htrace.gz")
    assert "capture 1: deadlocked" in p.stderr and t.proc.poll() is None   # never harmed
    report_schema.check(doc)    # last: skipped (with the reason) where jsonschema is missing


def test_chatter_is_not_progress(target, tmp_path):
    """eventfd pokes twice a second and a 24-byte TCP heartbeat a second: captured."""
    t = target("chatter", "--log-for", "1.5")
    p = watch(str(t.pid), "--silent-for", str(SILENT_FOR), "--once", "--duration", "1",
              "--backend", "proc", "--interval", str(INTERVAL), "--output-dir", str(tmp_path),
              "--json")
    doc = json.loads(p.stdout)
    last = t.last_log()
    assert doc["watch"]["recorded_from"] - last >= SILENT_FOR, p.stderr
    assert last <= doc["watch"]["silent_since"] <= last + 5.0, p.stderr
    report_schema.check(doc)    # last: skipped (with the reason) where jsonschema is missing


@pytest.mark.parametrize("mode", ["keeps-logging", "streams", "accepts"])
def test_progress_is_never_captured(target, tmp_path, mode):
    """A bounded run (3 x --silent-for) of a process that keeps making progress: logging
    once a second (with eventfd pokes), sending with send(2) only, or accepting connections."""
    t = target(mode)
    assert_never_captured(t.pid, tmp_path, silent_for=2.0, seconds=6.5)
    assert t.proc.poll() is None


def assert_never_captured(pid: int, out, silent_for: float, seconds: float) -> None:
    """Watch ``pid`` (proc backend) for ``seconds`` and stop it: it must never have gone
    silent for ``silent_for`` seconds nor recorded anything into ``out``."""
    w = subprocess.Popen(HANGTRACE + ["watch", str(pid), "--silent-for", f"{silent_for:g}",
                                      "--duration", "1", "--backend", "proc", "--interval",
                                      str(INTERVAL), "--output-dir", str(out), "-v"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(seconds)     # start-up (~0.5 s), then about three times --silent-for
        w.send_signal(signal.SIGTERM)
        _, err = w.communicate(timeout=30)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    assert w.returncode == 0 and "watch stopped" in err, err
    assert "no progress since" not in err and list(out.iterdir()) == [], err


def test_name_finds_a_process_that_starts_later(target, tmp_path):
    """With --name the watcher may start first (a sidecar): it waits for a match."""
    tag = f"0.{os.getpid():07d}1"      # a --log-for value no other process has (~0 s)
    w = subprocess.Popen(HANGTRACE + ["watch", "--name", f"--log-for {tag}", "--silent-for",
                                      "1.5", "--once", "--duration", "1", "--backend", "proc",
                                      "--interval", str(INTERVAL), "--output-dir",
                                      str(tmp_path), "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        assert w.poll() is None                             # nothing matches yet: it waits
        t = target("logs-then-blocks", "--log-for", tag)
        out, err = w.communicate(timeout=60)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    doc = json.loads(out)
    assert w.returncode == 4 and [q["pid"] for q in doc["processes"]] == [t.pid], err
    assert "watching nothing yet: waiting for a process matching" in err
