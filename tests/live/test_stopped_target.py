"""A stopped target (SIGSTOP, job control) shows as stopped in the events of every backend
(issue 22 item 5; the rule that turns it into a finding is the analysis's): the /proc
samples carry state "T" (proc alone, strace+proc, ebpf+proc), and strace's view of a
stopped tracee ("--- stopped by SIGSTOP ---") is a ThreadStopped for each thread, live and in
an imported log (sequential and sharded alike). The recording leaves the target as it found
it: still stopped, not traced.

``stopped_sleeper()`` is the scenario-free helper: a Python process with two threads that
sleep, stopped with SIGSTOP until every thread is in state T; continued and killed after."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from test_safety import BACKENDS
from tracer.events.states import ThreadStopped
from tracer import events as ev
from tracer.record.session import choose_backends, record
from tracer.strace.importer import import_strace
from tracer.tracefile.format import TraceReader

SLEEPER = r'''
import threading, time
threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
print("READY", flush=True)
time.sleep(600)
'''


def _states(pid: int) -> Dict[int, str]:
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        out[int(tid)] = stat[stat.rindex(")") + 2]
    return out


@contextlib.contextmanager
def stopped_sleeper(timeout: float = 30.0) -> Iterator[int]:
    """A two-thread process in a group-stop (state T) for the duration of the block."""
    p = subprocess.Popen([sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "READY"
        os.kill(p.pid, signal.SIGSTOP)
        deadline = time.monotonic() + timeout
        while set(_states(p.pid).values()) != {"T"}:
            assert time.monotonic() < deadline, _states(p.pid)
            time.sleep(0.05)
        yield p.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGCONT)
        p.kill()
        p.wait()


def _recorded(pid: int, backend: str, tmp_path: Path) -> List[ev.Event]:
    backends, _ = choose_backends(backend)
    out = str(tmp_path / f"{backend}.htrace.gz")
    record([pid], backends, duration=1.5, output=out)
    return list(TraceReader(out).events())


def _left_as_found(pid: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        status = Path(f"/proc/{pid}/status").read_text()
        if "TracerPid:\t0" in status or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert "TracerPid:\t0" in status
    assert set(_states(pid).values()) == {"T"}, "the recording must not continue the target"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stopped_target_is_stopped_in_the_events_of_every_backend(backend, tmp_path):
    with stopped_sleeper() as pid:
        tids = set(_states(pid))
        events = _recorded(pid, backend, tmp_path)
        samples = [e for e in events if isinstance(e, ev.ThreadSample) and e.pid == pid]
        stops = [e for e in events if isinstance(e, ThreadStopped) and e.pid == pid]
        if backend == "strace":        # strace alone: its own view, no /proc samples
            assert {e.tid for e in stops} == tids and {e.signal for e in stops} == {"SIGSTOP"}
        else:                          # proc, ebpf+proc: every sample says T
            assert {s.tid for s in samples} == tids
            assert {s.state for s in samples} == {"T"}, {s.state for s in samples}
        _left_as_found(pid)


@pytest.mark.skipif(shutil.which("strace") is None, reason="no strace")
def test_an_imported_log_of_a_stopped_target_says_so(tmp_path, monkeypatch):
    from tracer.strace import parallel
    with stopped_sleeper() as pid:
        log = tmp_path / "stopped.log"
        s = subprocess.Popen(["strace", "-f", "-ttt", "-T", "-yy", "-o", str(log),
                              "-p", str(pid)], stderr=subprocess.DEVNULL)
        # until strace has logged both threads' stops, however long its attach took
        deadline = time.monotonic() + 60                   # only bounds a hang
        while not (log.exists() and log.read_text().count("--- stopped by SIGSTOP ---") >= 2):
            assert time.monotonic() < deadline and s.poll() is None, log.read_text()
            time.sleep(0.05)
        s.send_signal(signal.SIGINT)
        s.wait(30)
        _left_as_found(pid)
    assert "--- stopped by SIGSTOP ---" in log.read_text()
    monkeypatch.setattr(parallel, "BATCH_LINES", 1)          # every line its own batch
    rows = []
    for workers in (1, 2):
        out = tmp_path / f"t{workers}.htrace"
        import_strace(str(log), str(out), workers=workers)
        stops = [e for e in TraceReader(str(out)).events() if isinstance(e, ThreadStopped)]
        assert {e.signal for e in stops} == {"SIGSTOP"} and len(stops) == 2
        rows.append(out.read_text().split("\n", 1)[1])
    assert rows[0] == rows[1]                                # sharded = sequential
