"""NCCL RAS: the client protocol against a stand-in server on loopback, and the parser.

tests/data/nccl_ras/h200-*.json and *.text are real answers of NCCL 2.28.9 on two H200s; the
others (shape_*, missing_comma) were written from NVIDIA/nccl 2.28.9's output code
(src/ras/client_support.cc) for the variants the device runs did not show (a DEAD section).
The recordings in fixtures/gpu/traces carry the probe's own answers (replay/test_expected_reports.py).
"""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracer.analysis.job.nccl_ras import lagging_ranks, missing_ranks, parse_ras, rank_of_pid
from tracer.record.probes.nccl_ras import ras_addresses, nccl_ras_probe, query, RasError

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_ras"

# A RAS server as NCCL runs it (protocol 2), answering VERBOSE STATUS with a file's content.
SERVER = r"""
import socket, sys
answer = open(sys.argv[1]).read().encode()
json_ok = sys.argv[2] == "json"
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(4)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    f = c.makefile("rb")
    for line in f:
        cmd = line.decode().strip()
        if cmd.startswith("CLIENT PROTOCOL"):
            c.sendall(b"SERVER PROTOCOL 2\n")
        elif cmd.startswith("TIMEOUT"):
            c.sendall(b"OK\n")
        elif cmd.startswith("SET FORMAT"):
            c.sendall(b"OK\n" if json_ok else b"ERROR: unknown command\n")
        elif cmd.endswith("STATUS"):
            c.sendall(answer); break
    f.close(); c.shutdown(socket.SHUT_RDWR); c.close()
"""


@pytest.fixture
def ras_server():
    procs = []

    def start(answer: str, fmt: str = "json"):
        p = subprocess.Popen([sys.executable, "-c", SERVER, str(DATA / answer), fmt],
                             stdout=subprocess.PIPE, text=True)
        port = int(p.stdout.readline())
        procs.append(p)
        return p, port
    yield start
    for p in procs:
        p.kill()
        p.wait()



def test_probe_asks_json_of_a_service_the_tree_listens_on(ras_server, monkeypatch):
    p, port = ras_server("shape_mismatch.json")
    monkeypatch.setattr("tracer.linux.procfs.read_environ_vars",
                        lambda pid, names, root="/proc": {"NCCL_RAS_ADDR": f"127.0.0.1:{port}"})
    assert ras_addresses([p.pid]) == {("127.0.0.1", port): p.pid}
    [e] = nccl_ras_probe([p.pid])
    assert (e.fmt, e.error, e.port) == ("json", "", port)
    st = parse_ras(e.text, e.fmt)
    assert st is not None and st.version == "2.28.9+cuda13.0"


def test_probe_falls_back_to_text_when_the_server_has_no_json(ras_server, monkeypatch):
    p, port = ras_server("shape_mismatch.text", fmt="text")
    monkeypatch.setattr("tracer.linux.procfs.read_environ_vars",
                        lambda pid, names, root="/proc": {"NCCL_RAS_ADDR": f"127.0.0.1:{port}"})
    [e] = nccl_ras_probe([p.pid])
    assert (e.fmt, e.error) == ("text", "")
    assert "Rank 1 has launched up to operation 6" in e.text


def test_probe_skips_disabled_ras_and_never_connects_elsewhere(ras_server, monkeypatch):
    p, port = ras_server("shape_mismatch.json")
    monkeypatch.setattr("tracer.linux.procfs.read_environ_vars",
                        lambda pid, names, root="/proc": {"NCCL_RAS_ENABLE": "0"})
    assert ras_addresses([p.pid]) == {}
    # the default port is not what this process listens on: nothing to ask
    monkeypatch.setattr("tracer.linux.procfs.read_environ_vars",
                        lambda pid, names, root="/proc": {})
    assert ras_addresses([p.pid]) == {}


def test_the_listeners_the_last_look_saw_are_asked_without_reading_proc(ras_server,
                                                                         monkeypatch):
    """The analyzer's last ProcessInfo of a process says where it listens (the last look read
    it just before): its fds are not read again; a process it has no info of is."""
    p, port = ras_server("shape_mismatch.json")
    monkeypatch.setattr("tracer.linux.procfs.read_environ_vars",
                        lambda pid, names, root="/proc": {"NCCL_RAS_ADDR": f"127.0.0.1:{port}"})
    read: list = []
    monkeypatch.setattr("tracer.record.probes.nccl_ras.socket_inodes",
                        lambda pid: read.append(pid) or set())
    known = {p.pid: [f"tcp 127.0.0.1:{port}", "unix /tmp/x.sock"]}.get
    assert ras_addresses([p.pid, 1], known) == {("127.0.0.1", port): p.pid}
    assert read == [1]
    assert ras_addresses([p.pid], lambda pid: []) == {}


def test_query_is_bounded_when_the_server_never_answers():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)                     # accepts (backlog) but never speaks
    t0 = time.monotonic()
    with pytest.raises(RasError):
        query("127.0.0.1", s.getsockname()[1], deadline_s=1.0)
    assert time.monotonic() - t0 < 5.0
    s.close()


def test_json_answer_gives_counts_pids_and_gpus():
    st = parse_ras((DATA / "shape_mismatch.json").read_text(), "json")
    assert rank_of_pid(st) == {622: (0, 0), 623: (1, 1)}
    [lag] = lagging_ranks(st)
    assert (lag.op, lag.behind.rank, lag.behind.pid, lag.behind.counts["AllReduce"]) == \
        ("AllReduce", 1, 623, 6)
    assert [r.rank for r in lag.ahead] == [0] and lag.ahead_count == 7


def test_a_missing_comma_is_repaired():
    st = parse_ras((DATA / "missing_comma.json").read_text(), "json")
    assert st is not None and st.fmt == "json" and len(st.comms[0].ranks) == 2


def test_text_answer_gives_the_same_facts():
    st = parse_ras((DATA / "shape_mismatch.text").read_text(), "text")
    [lag] = lagging_ranks(st)
    assert (lag.behind.rank, lag.behind.pid, lag.behind.gpu, lag.ahead_count) == (1, 623, 1, 7)
    assert rank_of_pid(st) == {622: (0, 0), 623: (1, 1)}


def test_text_answer_with_a_dead_process():
    st = parse_ras((DATA / "shape_dead.text").read_text(), "text")
    [(comm, m)] = missing_ranks(st)
    assert (m.rank, m.pid, m.gpu, m.dead) == (1, 623, 1, True)
    assert st.dead_pids == [623] and lagging_ranks(st) == []


@pytest.mark.parametrize("text", ["", "garbage\n", "{not json", "{\"communicators\": 5}"])
def test_nonsense_is_no_answer_and_no_error(text):
    st = parse_ras(text, "json")
    assert st is None or st.comms == []


# --------------------------------------------------------------------------- real answers
# h200-*.json/.text: what NCCL 2.28.9's RAS service answered on two H200s (nvidia-h200-x2,
# fixtures/gpu/record_nccl.sh), asked right after each recording of fixtures/gpu/traces.
@pytest.mark.parametrize("shape", ["nccl", "nccl_kernel", "nccl_lock"])
@pytest.mark.parametrize("fmt", ["json", "text"])
def test_real_answers_with_rank_1_behind(shape, fmt):
    st = parse_ras((DATA / f"h200-{shape}.{fmt}").read_text(), fmt)
    assert st.version == "2.28.9"
    [lag] = lagging_ranks(st)
    assert (lag.op, lag.behind.rank, lag.behind.gpu) == ("AllReduce", 1, 1)
    assert (lag.behind.counts["AllReduce"], lag.ahead_count) == (3, 4)
    assert sorted(r for r, _ in rank_of_pid(st).values()) == [0, 1]


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_real_answer_with_rank_1_killed(fmt):
    text = (DATA / f"h200-nccl_kill.{fmt}").read_text()
    if fmt == "json":
        # NCCL 2.28.9 writes no comma after a missing rank's "nvml_dev": the repair is needed
        with pytest.raises(ValueError):
            import json
            json.loads(text)
    st = parse_ras(text, fmt)
    [(comm, m)] = missing_ranks(st)
    assert (m.rank, m.gpu) == (1, 1) and m.pid is not None
    assert lagging_ranks(st) == []
