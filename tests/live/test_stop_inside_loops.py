"""SIGTERM and SIGINT at a recording's slow points, inside the loops over what a target
controls (issue 46 item 5): hangtrace stops soon, detaches everything (no BPF program or uprobe
left, the target untouched), saves a trace that reads back as interrupted, and exits with its
report's status, one JSON document and no traceback.

- Inside attach: a target maps a library of 2*10**6 function names as ``libcuda.so.1`` (every
  bound holds: short names, under 2**21 symbols) and a 4 KiB ``libnccl.so.2`` whose section 0
  claims 2**40 sections; the signal comes once the eBPF programs are loaded, while the uprobes'
  symbols are read. Main (5e78431) read on: about 24 s of CPU (a sort and a match per family
  and name, the table cached whole), 51 s under load with 10**6 names.
- Inside the end: a RAS service that accepts and drips a byte every 0.5 s; the signal comes
  once the probe connected. Main waited for the probe's 3 s; the probe now says the signal
  ended it. Inside the window, the same service: the end has 1 s after the signal (main: all
  of its budget, the RAS probe's 3 s in it).
The bounds are generous (a loaded 2-core machine); what fails main is far above them.
"""
from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Set

import pytest

from hostile_elf import named_symbol_bomb, section_count_bomb
from test_safety import (BACKENDS, BPFTOOL, EBPF_PROBLEM, HANGTRACE, _bpf_holders,
                         bpf_programs, wait_clean)
from tracer import events as ev
from tracer.record import stopflag
from tracer.tracefile.format import TraceReader

pytestmark = pytest.mark.live
assert BACKENDS

NAMES = 2_000_000              # under MAX_SYMBOLS (2**21): every bound holds
STOP_BOUND_S = 10.0            # signal -> exit inside the symbol read (main: 24 s of CPU)
END_STOP_BOUND_S = 2.5         # signal -> exit inside the RAS probe (main: its 3 s, then more)
UPROBE_PROGRAMS = ("on_",)     # bpf/cuda_calls.bpf.c's entry points

MAPPER = """import mmap, sys, time
files = [open(p, 'rb') for p in sys.argv[1:]]
maps = [mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) for f in files]
print('READY', flush=True)
while True: time.sleep(1)
"""

DRIP = """import socket, sys, threading, time
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1])))
srv.listen(16)
print("READY", flush=True)
def drip(c):
    try:
        while True:
            c.send(b"S")
            time.sleep(0.5)
    except OSError:
        pass
while True:
    c, _ = srv.accept()
    print("ASKED", flush=True)
    threading.Thread(target=drip, args=(c,), daemon=True).start()
"""


def _ready(p: subprocess.Popen) -> None:
    assert p.stdout is not None and p.stdout.readline().strip() == "READY"


def _stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.kill()
    p.wait(timeout=30)


@functools.lru_cache(maxsize=1)
def _symbol_bomb() -> bytes:
    """Built once a process (70 MB, seconds): a fixture of a wider scope would bind the
    module to one worker (tests/parallel.py's SHARED_FIXTURES)."""
    return named_symbol_bomb(NAMES)


@pytest.fixture
def hostile_libs(tmp_path):
    """A process mapping the symbol bomb as libcuda.so.1 and the section bomb as libnccl.so.2."""
    d = tmp_path / "hostile-libs"
    d.mkdir()
    cuda, nccl = d / "libcuda.so.1", d / "libnccl.so.2"
    cuda.write_bytes(_symbol_bomb())
    nccl.write_bytes(section_count_bomb(1 << 40))
    os.truncate(nccl, 256 << 20)                     # sparse, as the issue's
    p = subprocess.Popen([sys.executable, "-c", MAPPER, str(cuda), str(nccl)],
                         stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        _ready(p)
        yield p
    finally:
        _stop(p)


def _programs_of(pid: int) -> Set[int]:
    """ids of the BPF programs process ``pid`` holds an fd of."""
    held = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fdinfo"):
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                held.update(int(line.split()[1]) for line in f if line.startswith("prog_id:"))
    except OSError:
        pass
    return held


def _uprobes_left(before: Set[int], timeout: float = 10.0) -> list:
    """The uprobe programs loaded since ``before`` that no live process holds, looked at until
    there are none or ``timeout`` passed (another test's may be between its load and its
    first fd as the two are read)."""
    deadline = time.monotonic() + timeout
    while True:
        programs = bpf_programs()
        held = _bpf_holders()
        left = [f"{i} {n}" for i, n in programs.items()
                if i not in before and n.startswith(UPROBE_PROGRAMS) and i not in held]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def _read_back(path: Path, reason: str) -> TraceReader:
    """The trace, whole (its end record), ended for ``reason``; its events in ``events_read``."""
    r = TraceReader(str(path))
    events = list(r.events())
    assert r.info.end is not None and r.info.end.reason == reason, r.info.end
    assert not r.info.truncated
    r.events_read = events                            # type: ignore[attr-defined]
    return r


def _signal_and_time(h: subprocess.Popen, sig: int, limit: float):
    """(stdout, stderr, seconds from the signal to the exit); kills hangtrace past ``limit``
    seconds more (main's minutes) so that nothing it holds outlives the test."""
    t0 = time.monotonic()
    h.send_signal(sig)
    try:
        out, err = h.communicate(timeout=limit + 60)
    except subprocess.TimeoutExpired:
        h.kill()
        h.communicate()
        raise AssertionError(f"hangtrace still ran {limit + 60:g} s after {sig!r}")
    return out, err, time.monotonic() - t0


@pytest.mark.skipif(EBPF_PROBLEM is not None, reason=f"ebpf: {EBPF_PROBLEM}")
@pytest.mark.skipif(BPFTOOL is None, reason="bpftool is not installed")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_inside_a_librarys_symbol_read_stops_attach(hostile_libs, sig, tmp_path):
    before = set(bpf_programs())
    trace = tmp_path / "t.htrace.gz"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}   # read, not cached
    h = subprocess.Popen(HANGTRACE + ["attach", str(hostile_libs.pid), "-b", "ebpf", "-d", "30",
                                      "--json", "-o", str(trace)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 90
        while not _programs_of(h.pid):               # the eBPF backend is in; the uprobes next
            assert h.poll() is None, h.communicate()
            assert time.monotonic() < deadline, "hangtrace loaded no BPF program in 90 s"
            time.sleep(0.05)
        time.sleep(0.5)                              # into the symbols' read
        out, err, took = _signal_and_time(h, sig, STOP_BOUND_S)
    finally:
        if h.poll() is None:
            h.kill()
            h.wait()
    print(f"stop inside attach: {took:.2f} s")
    assert took < STOP_BOUND_S, (took, err[-2000:])
    assert "Traceback" not in err and "internal error" not in err, err[-2000:]
    doc = json.loads(out)
    assert h.returncode == doc["exit_code"], err[-2000:]
    assert any("ended early: interrupted" in n for n in doc["notes"]), doc["notes"]
    assert _read_back(trace, "interrupted").info.header["backends"][0] == "ebpf"
    wait_clean("ebpf", h.pid, [hostile_libs.pid], before)
    assert not _uprobes_left(before)
    assert hostile_libs.poll() is None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dripping_target() -> subprocess.Popen:
    """A process that names a RAS listener of its own (DRIP) in NCCL_RAS_ADDR."""
    port = _free_port()
    return subprocess.Popen([sys.executable, "-c", DRIP, str(port)], stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True,
                            env={**os.environ, "NCCL_RAS_ADDR": f"127.0.0.1:{port}"})


def _attach_proc(pid: int, duration: str, trace) -> subprocess.Popen:
    """``hangtrace attach PID -b proc -d DURATION --json -o TRACE``, its output piped."""
    return subprocess.Popen(HANGTRACE + ["attach", str(pid), "-b", "proc", "-d", duration,
                                         "--json", "-o", str(trace)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_inside_the_ras_probe_stops_the_end(sig, tmp_path):
    target = _dripping_target()
    trace = tmp_path / "t.htrace.gz"
    try:
        _ready(target)
        h = _attach_proc(target.pid, "1", trace)
        try:
            assert target.stdout is not None
            assert target.stdout.readline().strip() == "ASKED", h.communicate()  # in the probe
            out, err, took = _signal_and_time(h, sig, END_STOP_BOUND_S)
        finally:
            if h.poll() is None:
                h.kill()
                h.wait()
        assert "Traceback" not in err and "internal error" not in err, err[-2000:]
        doc = json.loads(out)
        assert h.returncode == doc["exit_code"], err[-2000:]
        name = signal.Signals(sig).name
        r = _read_back(trace, "complete")        # the window was whole; its end was cut
        ras = [e for e in r.events_read if isinstance(e, ev.NcclRasStatus)]  # type: ignore
        assert ras and all(f"{name} ended the recording" in e.error for e in ras), \
            [e.error for e in ras]
        print(f"stop inside the end: {took:.2f} s")
        assert took < END_STOP_BOUND_S, (took, err[-2000:])
        wait_clean("proc", h.pid, [target.pid], set())
    finally:
        _stop(target)


def test_a_signal_inside_the_window_leaves_the_end_a_second(tmp_path):
    target = _dripping_target()
    trace = tmp_path / "t.htrace.gz"
    try:
        _ready(target)
        h = _attach_proc(target.pid, "60", trace)
        try:
            deadline = time.monotonic() + 60
            while not (trace.exists() and trace.stat().st_size > 200):   # recording
                assert h.poll() is None and time.monotonic() < deadline, h.communicate()
                time.sleep(0.1)
            time.sleep(0.5)
            out, err, took = _signal_and_time(h, signal.SIGTERM, END_STOP_BOUND_S)
        finally:
            if h.poll() is None:
                h.kill()
                h.wait()
        assert "Traceback" not in err and "internal error" not in err, err[-2000:]
        doc = json.loads(out)
        assert h.returncode == doc["exit_code"], err[-2000:]
        r = _read_back(trace, "interrupted")
        ras = [e for e in r.events_read if isinstance(e, ev.NcclRasStatus)]  # type: ignore
        assert not any("within the probe's" in e.error for e in ras), [e.error for e in ras]
        print(f"stop inside the window: {took:.2f} s")
        assert took < stopflag.STOP_GRACE_S + END_STOP_BOUND_S, (took, err[-2000:])
        wait_clean("proc", h.pid, [target.pid], set())
    finally:
        _stop(target)
