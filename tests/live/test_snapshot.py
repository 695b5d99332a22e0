"""take_snapshot live against scenario.py (listener) and a plain sleeper; render_snapshot."""
import io
import json
import os
import subprocess
import sys
import time

import pytest
from rich.console import Console

from tracer.render.snapshot import render_snapshot
from tracer.record.snapshot import FORMAT, take_snapshot

SCENARIO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "procfs", "scenario.py")
DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "procfs")


def wait_blocked(pid, tids, timeout=5.0):
    """Wait until every thread in ``tids`` sleeps in a system call (not just started)."""
    deadline = time.monotonic() + timeout
    for tid in tids:
        while True:
            try:
                with open(f"/proc/{pid}/task/{tid}/syscall") as f:
                    line = f.read()
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                line, state = "", ""
            if state == "S" and line[:1].isdigit():
                break
            assert time.monotonic() < deadline, f"thread {tid} never blocked"
            time.sleep(0.005)


def _render(snap) -> str:
    buf = io.StringIO()
    render_snapshot(snap, Console(file=buf, width=200, color_system=None))
    return buf.getvalue()


@pytest.fixture
def scenario(tmp_path):
    sock = str(tmp_path / "s.sock")
    p = subprocess.Popen([sys.executable, SCENARIO, sock], stdout=subprocess.PIPE,
                         env={"PATH": "/usr/bin:/bin", "RANK": "0"})
    info = json.loads(p.stdout.readline())
    wait_blocked(p.pid, list(info["tids"].values()) + [p.pid])
    wait_blocked(info["odd"], [info["odd"]])
    yield p, info
    os.kill(info["odd"], 9)
    p.kill()
    p.wait()


def test_snapshot_of_listener(scenario):
    p, info = scenario
    snap = take_snapshot([p.pid])
    pids = [ps.pid for ps in snap.processes]
    assert pids[0] == p.pid and set(pids) == {p.pid, info["odd"], info["zombie"]}
    assert (p.pid, f"tcp 127.0.0.1:{info['tcp_port']}") in snap.listening()
    main = snap.processes[0]
    threads = {t.comm: t for t in main.threads}
    assert threads["locked"].blocking.endswith("no timeout")
    assert threads["locked"].syscall == "futex" and threads["locked"].has_timeout is False
    assert threads["poller"].blocking == "poll(1 fds) timeout 5000 ms"
    assert threads["acceptor"].blocking == f"accept4(7<TCP:[127.0.0.1:{info['tcp_port']}]>)"
    assert threads["reader"].blocking.startswith("read(3<pipe:[")
    assert main.environ_rank == "RANK=0"
    zombie = next(ps for ps in snap.processes if ps.pid == info["zombie"])
    assert zombie.state == "Z" and zombie.exit_code == 9

    doc = snap.to_json()
    assert doc["format"] == FORMAT == "hangtrace.snapshot/1"
    json.dumps(doc)  # serialisable
    assert doc["processes"][0]["fds"][0]["kind"]

    out = _render(snap)
    assert f"tcp 127.0.0.1:{info['tcp_port']}" in out
    assert "no listening sockets" not in out
    assert "a) b\\n(c" in out  # the newline of the odd comm is shown, not printed
    assert "futex(" in out and "no timeout" in out


def test_snapshot_without_listener():
    p = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                         stdin=subprocess.PIPE)
    try:
        wait_blocked(p.pid, [p.pid])
        snap = take_snapshot([p.pid, 999999999])
        assert snap.listening() == [] and [ps.pid for ps in snap.processes] == [p.pid]
        assert snap.errors == ["pid 999999999: no such process"]
        t = snap.processes[0].threads[0]
        assert t.syscall == "read" and t.blocking.startswith("read(0<pipe:[")
        out = _render(snap)
        assert "no listening sockets in this tree" in out
        assert "999999999: no such process" in out
    finally:
        p.stdin.close()
        p.wait()


def test_snapshot_from_captured_tree_folds_idle_threads():
    snap = take_snapshot([2312], root=DATA)
    ps = snap.processes[0]
    assert [t.blocking for t in ps.threads] == [
        "futex(0x7ffda087ef30, WAIT_BITSET|PRIVATE) no timeout", "poll(3 fds) no timeout",
        "poll(11 fds) timeout 100 ms"]
    out = _render(snap)
    assert "cuda-EvtHandlr" in out and "/dev/nvidia0" not in out  # device fds only counted
    assert "1 nvidia" in out and "no listening sockets in this tree" in out
