"""Live tier for the evidence of issue 14: attach (and snapshot) to real scenario processes and
check what a person would have checked by hand: the log that went silent, the port asked for
and never opened, the loaded NCCL/libcuda versions with the known-bug line, CUDA graph capture
from the Python stack and, where eBPF runs, from uprobes on (a stand-in for) libcuda."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from fake_gpu_libs import DRIVER, build_fake_libs
from tracer.record.backends.ebpf.cuda_uprobes import CudaUprobeBackend
from tracer.record.pystacks import find_py_spy

pytestmark = pytest.mark.live
UPROBES_PROBLEM = {loader: CudaUprobeBackend(loader=loader).check()
                   for loader in ("libbpf", "bcc")}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_json(*args: str, timeout: float = 60) -> dict:
    p = subprocess.run([sys.executable, "-m", "tracer", *args], capture_output=True, text=True,
                       timeout=timeout)
    assert p.stdout.strip(), p.stderr
    return json.loads(p.stdout)


def rules(doc: dict) -> dict:
    return {f["rule"]: f for f in doc["evidence"]["findings"]}


def process(doc: dict, pid: int) -> dict:
    return next(p for p in doc["evidence"]["processes"] if p["pid"] == pid)


def test_server_whose_log_went_silent_and_port_never_opened(scenario, tmp_path):
    log, port = tmp_path / "server.log", free_port()
    sc = scenario("silent_server", "--port", port, "--log", log, "--silent-for", 1800)
    trace = str(tmp_path / "t.htrace.gz")
    rep = run_json("attach", str(sc.pid), "--backend", "proc", "--duration", "1", "--json",
                   "--output", trace)
    found = rules(rep)
    assert found["port-not-listening"]["text"] == (
        f"the command line of pid {sc.pid} asks for port {port} (--port {port}); nothing in the "
        "tree listens on it")
    assert found["port-not-listening"]["severity"] == "warn"
    assert found["logs-silent"]["text"].startswith(
        "no log of the tree was written for 30 min before the window")
    assert str(log) in found["logs-silent"]["text"]
    p = process(rep, sc.pid)
    line = f"server starting on port {port}\n"
    by_role = {e["role"]: e for e in p["logs"]}
    assert by_role["stdout"]["path"] == by_role["stderr"]["path"] == str(log)
    assert by_role["stdout"]["size"] == len(line) and by_role["log"]["path"] == str(log)
    assert by_role["stdout"]["written_in_window"] is False
    assert p["age_s"] >= 0 and p["rss_bytes"] > 1 << 20 and p["cpu_s"] >= 0
    # the saved trace shows the same evidence
    again = run_json("analyze", trace, "--json")
    assert set(rules(again)) == set(found)
    assert process(again, sc.pid)["logs"] == p["logs"]
    # and so does a snapshot
    snap = run_json("snapshot", str(sc.pid), "--json")
    assert {"port-not-listening", "logs-silent"} <= set(rules(snap))
    assert sc.alive()


def test_listening_server_with_a_fresh_log_has_neither_finding(scenario, tmp_path):
    log, port = tmp_path / "server.log", free_port()
    sc = scenario("silent_server", "--port", port, "--log", log, "--listen")
    rep = run_json("attach", str(sc.pid), "--backend", "proc", "--duration", "1", "--json",
                   "--output", str(tmp_path / "t.htrace.gz"))
    assert not {"port-not-listening", "logs-silent"} & set(rules(rep))
    ports = rep["evidence"]["ports"]
    assert {"pid": sc.pid, "socket": f"tcp 127.0.0.1:{port}"} in ports["listening"]
    assert ports["asked"][0]["listened_by"] == [sc.pid]


@pytest.fixture(scope="module")
def fake_libs(tmp_path_factory):
    return build_fake_libs(tmp_path_factory.mktemp("fakegpu"))


@pytest.mark.skipif(find_py_spy() is None, reason="py-spy not installed")
def test_rank_inside_capture_with_a_known_bad_nccl(scenario, fake_libs, tmp_path):
    sc = scenario("gpu_libs_like", "--cuda", fake_libs["cuda"], "--nccl", fake_libs["nccl"])
    rep = run_json("attach", str(sc.pid), "--backend", "proc", "--duration", "1", "--json",
                   "--output", str(tmp_path / "t.htrace.gz"))
    found = rules(rep)
    cap = found["in-graph-capture"]
    assert cap["pids"] == [sc.pid]
    assert f"pid {sc.pid} thread {sc.pid} is inside CUDA graph capture (Python stack: with " \
        "graph(cuda) at main (gpu_libs_like.py:" in cap["text"]
    libs = {x["name"]: x for x in process(rep, sc.pid)["libs"]}
    assert libs["libcuda"]["version"] == DRIVER and libs["libcuda"]["source"] == "file name"
    assert (libs["nccl"]["version"], libs["nccl"]["detail"]) == ("2.21.5", "+cuda12.4")
    assert found["known-bug"]["text"].endswith(
        f"pid {sc.pid} is inside CUDA graph capture now")
    assert "NVIDIA/nccl#1251" in found["known-bug"]["text"]
    snap = run_json("snapshot", str(sc.pid), "--stacks", "--json")
    assert "in-graph-capture" in rules(snap)


@pytest.mark.parametrize("loader", sorted(UPROBES_PROBLEM))
def test_uprobes_count_graph_calls_and_see_the_open_capture(scenario, fake_libs, tmp_path,
                                                            loader):
    if UPROBES_PROBLEM[loader] is not None:
        pytest.skip(f"uprobes with {loader}: {UPROBES_PROBLEM[loader]}")
    sc = scenario("gpu_libs_like", "--cuda", fake_libs["cuda"], "--nccl", fake_libs["nccl"],
                  "--on-signal")
    trace = tmp_path / "t.htrace.gz"
    p = subprocess.Popen([sys.executable, "-m", "tracer", "attach", str(sc.pid), "--backend",
                          "ebpf", "--duration", "3", "--json", "--output", str(trace)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, HANGTRACE_EBPF_LOADER=loader))
    deadline = time.monotonic() + 120      # BCC compiles two programs first: long under load
    # The file is created before the backends attach; the header is written (and flushed)
    # when the window opens, once every backend, the uprobes included, is in place.
    while (not trace.exists() or trace.stat().st_size == 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert trace.exists() and trace.stat().st_size > 0, "attach did not open its window"
    os.kill(sc.pid, signal.SIGUSR1)                   # now begin the capture that never ends
    out, err = p.communicate(timeout=60)
    assert out, err
    rep = json.loads(out)
    assert "cuda-uprobes" in rep["backends"], err
    calls = {c["tid"]: c for c in rep["evidence"]["graph_calls"]}
    main = calls[sc.pid]
    assert (main["begins"], main["ends"], main["open_streams"]) == (1, 0, ["0xcafe"])
    launcher = [c for t, c in calls.items() if t != sc.pid]
    assert launcher and launcher[0]["launches"] >= 50        # every 20 ms for ~3 s
    texts = [f["text"] for f in rep["evidence"]["findings"] if f["rule"] == "in-graph-capture"]
    assert any("began capturing stream 0xcafe and has not ended it" in t for t in texts)
    assert sc.alive()
