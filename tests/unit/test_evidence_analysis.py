"""Evidence analysis (tracer/analysis/evidence*.py): ports, logs, GPU health, Xid lines, library
versions and known bugs, capture; and the evidence events through a trace file, old traces
included. Pure: tables of inputs, no /proc."""
from __future__ import annotations

from pathlib import Path

import pytest

from tracer import events as ev
from tracer.events import evidence as xe
from tracer.load.trace import analyze_trace
from tracer.analysis.evidence.build import EvidenceTable, ProcFacts, build_evidence
from tracer.analysis.evidence.gpu import parse_xid
from tracer.analysis.evidence.libs import bug_matches, fd_conditions, load_known_bugs, version_key
from tracer.analysis.evidence.ports import check_ports, ports_asked
from tracer.gpu.nvml_health import read_health, throttle_names
from tracer.tracefile.format import TraceReader, TraceWriter, make_header

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


# --------------------------------------------------------------------------- ports
@pytest.mark.parametrize("argv,want", [
    (["python3", "-m", "sglang.launch_server", "--model-path", "/m", "--host", "0.0.0.0",
      "--port", "30000", "--tp", "8"], [(30000, "--port", "0.0.0.0", True, True)]),
    (["vllm", "serve", "Qwen/Qwen3-8B", "--port=8000"], [(8000, "--port", "", True, True)]),
    (["gunicorn", "--bind", "0.0.0.0:8080", "app:app"], [(8080, "--bind", "0.0.0.0", True, True)]),
    (["python3", "-m", "sglang.launch_server", "--nccl-port", "28500", "--dist-init-addr",
      "10.0.0.1:5000"], [(28500, "--nccl-port", "", False, True),
                         (5000, "--dist-init-addr", "10.0.0.1", False, False)]),
    (["torchrun", "--master_port", "29500", "train.py"], [(29500, "--master_port", "", False, True)]),
    (["python3", "x.py", "tcp://127.0.0.1:29500", "app:main", "12:30"],
     [(29500, "argument", "127.0.0.1", False, True)]),
    (["python3", "x.py", "--port", "notaport", "--port", "70000"], []),
])
def test_ports_asked(argv, want):
    got = [(a.port, a.option, a.host, a.serves, a.local) for a in ports_asked(argv)]
    assert got == want


def test_check_ports_matches_any_process_of_the_tree():
    listening, asks = check_ports([
        (10, ["python3", "-m", "sglang.launch_server", "--port", "30000"], []),
        (11, ["sglang::scheduler_TP0"], ["tcp 127.0.0.1:28500", "unix /tmp/x.sock"]),
        (12, ["uvicorn", "--port", "30000"], ["tcp6 [::]:30000"]),
    ])
    assert listening[0] == (11, "tcp 127.0.0.1:28500")
    assert [(a.port, a.pids, a.listened_by) for a in asks] == [(30000, [10, 12], [12])]


# --------------------------------------------------------------------------- logs, ports findings
def _procs(*argvs):
    return [ProcFacts(pid=100 + i, ppid=1, role="launcher" if i == 0 else "other", argv=a,
                      listening=[], start_time=1000.0) for i, a in enumerate(argvs)]


def _log(pid, phase, ts, size, mtime, kind="file", path="/srv/logs/server.log", fd=1):
    return xe.LogTargets(ts=ts, pid=pid, phase=phase, targets=[
        {"fd": fd, "role": "stdout", "kind": kind, "path": path, "size": size, "mtime": mtime,
         "why": ""}])


def _evidence(events, procs, window=(10_000.0, 10_005.0), gpu_samples=()):
    t = EvidenceTable()
    for e in events:
        t.feed(e)
    for s in gpu_samples:
        t.feed_gpu(s)
    return build_evidence(t, procs, window=window)


def test_logs_silent_long_before_the_window():
    procs = _procs(["server", "--port", "8000"])
    out = _evidence([xe.ProcessVitals(ts=10_000.0, pid=100, start_time=1000.0, phase="start"),
                     _log(100, "start", 10_000.0, 14540, 4780.0),
                     _log(100, "end", 10_005.0, 14540, 4780.0)], procs)
    rules = {f.rule: f for f in out.findings}
    assert "no log of the tree was written for 87 min before the window" \
        in rules["logs-silent"].text
    assert "stdout → /srv/logs/server.log" in rules["logs-silent"].text
    assert "asks for port 8000" in rules["port-not-listening"].text
    p = out.processes[0]
    assert p["age_s"] == 9005.0 and p["logs"][0]["grew_bytes"] == 0
    assert p["logs"][0]["written_in_window"] is False


@pytest.mark.parametrize("start_size,end_size,mtime,silent", [
    (100, 160, 10_004.0, False),      # grew in the window
    (100, 100, 9_990.0, False),       # written 10 s before: quiet, but not long
    (100, 100, 9_900.0, True),        # 100 s before a 5 s window
])
def test_logs_silent_thresholds(start_size, end_size, mtime, silent):
    out = _evidence([_log(100, "start", 10_000.0, start_size, mtime),
                     _log(100, "end", 10_005.0, end_size, mtime)], _procs(["x"]))
    assert any(f.rule == "logs-silent" for f in out.findings) is silent


def test_newest_log_decides_for_the_tree():
    events = [_log(100, "end", 10_005.0, 10, 1000.0),
              _log(101, "end", 10_005.0, None, 10_003.0, kind="pipe", path="pipe:[77]")]
    out = _evidence(events, _procs(["a"], ["b"]))
    assert not any(f.rule == "logs-silent" for f in out.findings)


# --------------------------------------------------------------------------- GPU
def _health(gpu=0, phase="end", **kw):
    base = dict(ts=10_005.0, gpu=gpu, uuid=f"GPU-{gpu}", name="NVIDIA H200", pci_bus="0000:18:00",
                power_mw=95_000, power_limit_mw=700_000, sm_clock_mhz=1980,
                sm_clock_max_mhz=1980, throttle=0, ecc_corrected=0, ecc_uncorrected=0,
                remapped_corr=0, remapped_unc=0, remap_pending=False, remap_failed=False,
                pcie_replays=0, phase=phase)
    base.update(kw)
    return xe.GpuHealth(**base)


def _samples(util, power_mw, pids=(100,), n=10, clock=1980):
    return [ev.GpuSample(ts=10_000.0 + i * 0.5, gpu=0, uuid="GPU-0", util_pct=util,
                         pids=list(pids), power_mw=power_mw, sm_clock_mhz=clock)
            for i in range(n)]


@pytest.mark.parametrize("util,power_mw,rule", [
    (100, 95_000, "gpu-busy-low-power"),     # a resident kernel that barely computes
    (100, 610_000, "gpu-busy-computing"),
    (100, 230_000, None),                    # between: no claim
    (0, 80_000, None),
])
def test_busy_gpu_at_idle_power_is_told_from_computing(util, power_mw, rule):
    out = _evidence([_health()], _procs(["x"]), gpu_samples=_samples(util, power_mw))
    rules = {f.rule for f in out.findings if f.rule.startswith("gpu-busy")}
    assert rules == ({rule} if rule else set())
    g = out.gpus[0]
    assert g["util_pct"] == util and g["power_w"] == round(power_mw / 1000, 1)
    assert g["power_limit_w"] == 700.0


def test_gpu_health_findings():
    events = [_health(phase="start", pcie_replays=12),
              _health(phase="end", pcie_replays=19, throttle=0x40 | 0x1, sm_clock_mhz=1100,
                      ecc_uncorrected=2, remap_pending=True)]
    out = _evidence(events, _procs(["x"]), gpu_samples=_samples(100, 300_000, clock=1100))
    rules = {f.rule: f.text for f in out.findings}
    assert rules["gpu-throttled"] == ("GPU 0 clocks are held down by hw-thermal-slowdown "
                                      "(SM 1100 of 1980 MHz)")
    assert "2 uncorrected ECC errors" in rules["gpu-ecc"] and "reset" in rules["gpu-ecc"]
    assert rules["gpu-pcie-replays"].startswith("GPU 0: 7 PCIe replays during the window")


def test_gpus_not_used_by_the_tree_are_listed_without_findings():
    samples = [ev.GpuSample(ts=1.0, gpu=g, util_pct=100, pids=[999], power_mw=90_000)
               for g in (0, 1)]
    out = _evidence([_health(0), _health(1)], _procs(["x"]), gpu_samples=samples)
    assert [g["gpu"] for g in out.gpus] == [0, 1]
    assert not [f for f in out.findings if f.rule.startswith("gpu")]


@pytest.mark.parametrize("mask,names", [
    (0, []), (0x1, ["gpu-idle"]), (0x4 | 0x40, ["sw-power-cap", "hw-thermal-slowdown"]),
    (0x1000, ["0x1000"]),
])
def test_throttle_names(mask, names):
    assert throttle_names(mask) == names


@pytest.mark.parametrize("line,parsed", [
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off the bus.",
     ("0000:3b:00", 79, "pid=1, name=python3, GPU has fallen off the bus.")),
    ("NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000009 intr 00800000",
     ("0000:01:00", 32, "Channel ID 00000009 intr 00800000")),
    ("NVRM: Xid (0000:01:00): 31, Ch 0000000b, engmask 00000120, intr 10000000",
     ("0000:01:00", 31, "Ch 0000000b, engmask 00000120, intr 10000000")),
    ("NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, "
     "reset gpu to activate.", ("0000:10:1c", 63, "pid=1896, Row Remapper: New row marked for "
                                                  "remapping, reset gpu to activate.")),
    ("NVRM: GPU at PCI:0000:01:00: GPU-34d7319c", None),
])
def test_parse_xid(line, parsed):
    assert parse_xid(line) == parsed


def test_xid_lines_become_findings_on_their_gpu():
    klog = xe.KernelLog(ts=10_005.0, since=1000.0, scanned=4000, lines=[
        [9000.0, "NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=python3, GPU has fallen off the bus."],
        [9001.0, "NVRM: GPU at 0000:18:00.0 has fallen off the bus."]])
    out = _evidence([_health(), klog], _procs(["x"]))
    texts = [f.text for f in out.findings if f.rule in ("xid", "nvrm")]
    assert texts[0].startswith("Xid 79 (GPU has fallen off the bus) on GPU 0: 1 time(s)")
    assert texts[1].startswith("kernel log: NVRM: GPU at 0000:18:00.0 has fallen off")
    assert out.kernel_log["xids"][0]["gpu"] == 0


# --------------------------------------------------------------------------- NVML health (fake)
class FakeNvmlError(Exception):
    """pynvml.NVMLError: the return code in ``value``."""

    def __init__(self, value):
        super().__init__(f"NVML error {value}")
        self.value = value


class FakePynvml:
    """pynvml's device calls as nvidia-ml-py has them: values returned, NVMLError on refusal
    (Hopper refuses the retired-page calls: NOT_SUPPORTED, 3)."""
    VALUES = {"nvmlDeviceGetPowerUsage": 96_512, "nvmlDeviceGetEnforcedPowerLimit": 700_000,
              "nvmlDeviceGetClockInfo": 1980, "nvmlDeviceGetMaxClockInfo": 1980,
              "nvmlDeviceGetCurrentClocksEventReasons": 0x1, "nvmlDeviceGetTemperature": 33,
              "nvmlDeviceGetTotalEccErrors": 0, "nvmlDeviceGetPcieReplayCounter": 3,
              "nvmlDeviceGetName": "NVIDIA H200", "nvmlDeviceGetRemappedRows": (0, 0, 0, 0),
              "nvmlDeviceGetPciInfo_v3": type("Pci", (), {"domain": 0, "bus": 0x18,
                                                         "device": 0})()}

    def __init__(self, missing=(), refuse=()):
        self.missing = set(missing)
        self.refuse = dict(refuse, nvmlDeviceGetRetiredPages=3,
                           nvmlDeviceGetRetiredPagesPendingStatus=3)

    def __getattr__(self, name):
        if name in self.missing or name.startswith("_") or not name.startswith("nvml"):
            raise AttributeError(name)

        def fn(handle, *args):
            if name in self.refuse:
                raise FakeNvmlError(self.refuse[name])
            return self.VALUES[name]
        return fn


def test_read_health_through_the_bindings():
    h = read_health(FakePynvml(), object(), 0, "GPU-x", 5.0, "end")
    assert (h.name, h.pci_bus, h.power_mw, h.power_limit_mw) == ("NVIDIA H200", "0000:18:00",
                                                                 96_512, 700_000)
    assert (h.sm_clock_mhz, h.throttle, h.temperature_c, h.pcie_replays) == (1980, 1, 33, 3)
    assert h.remapped_corr == 0 and h.remap_pending is False
    assert h.retired_sbe is None and h.missing["retired_sbe"] == "not supported"


def test_read_health_degrades_per_field():
    nv = FakePynvml(missing={"nvmlDeviceGetCurrentClocksEventReasons",
                             "nvmlDeviceGetCurrentClocksThrottleReasons"},
                    refuse={"nvmlDeviceGetPcieReplayCounter": 4,
                            "nvmlDeviceGetTemperature": 13})      # FUNCTION_NOT_FOUND
    h = read_health(nv, object(), 0, "GPU-x", 5.0, "end")
    assert h.throttle is None and h.missing["throttle"] == "not in this NVML"
    assert h.pcie_replays is None and h.missing["pcie_replays"] == "no permission"
    assert h.temperature_c is None and h.missing["temperature_c"] == "not in this NVML"
    assert h.power_mw == 96_512


# --------------------------------------------------------------------------- versions, bugs
@pytest.mark.parametrize("v,key", [("2.21.5", (2, 21, 5)), ("2.11.0+cu128", (2, 11, 0)),
                                   ("580.159.04", (580, 159, 4)), ("", ()), ("abc", ())])
def test_version_key(v, key):
    assert version_key(v) == key


@pytest.mark.parametrize("version,ids", [
    ("2.21.5", {"nccl-2.21.5-graph-capture-deadlock"}),
    ("2.22.3", set()),
    ("2.9.5", {"nccl-before-2.9.6-not-capturable"}),
    ("2.28.9", {"nccl-2.28.9-cross-node-graph-replay-deadlock"}),
    ("2.30.5", {"nccl-2.29.7-multinode-ib-hang"}),
    ("2.30.7", set()),
])
def test_known_bugs_match_versions(version, ids):
    bugs = load_known_bugs()
    assert {b["id"] for b in bugs if bug_matches(b, "nccl", version)} == ids
    assert all(b["refs"] and b["checked"] for b in bugs)


def _libs(pid, *pairs):
    return xe.LoadedLibs(ts=1.0, pid=pid, libs=[{"name": n, "version": v, "path": f"/x/{n}",
                                                  "source": "test"} for n, v in pairs])


def test_mismatch_driver_and_known_bug_with_capture():
    events = [_libs(100, ("nccl", "2.21.5"), ("libcuda", "575.57.08")),
              _libs(101, ("nccl", "2.27.3"), ("libcuda", "575.57.08")),
              xe.LoadedLibs(ts=1.0, pid=0, libs=[{"name": "nvidia.ko", "version": "580.159.04",
                                                  "path": "", "source": "/sys"}]),
              xe.CaptureSite(ts=1.0, pid=100, tid=105, how="with-block",
                             frame="run_once (x.py:3)", detail="with torch.cuda.graph(g)")]
    out = _evidence(events, _procs(["a"], ["b"]))
    rules = {f.rule: f.text for f in out.findings}
    assert rules["version-mismatch"] == ("processes of the tree load different NCCL versions: "
                                         "2.21.5 in pid 100 (launcher); 2.27.3 in pid 101")
    assert "libcuda 575.57.08 but the NVIDIA kernel module is 580.159.04" \
        in rules["driver-mismatch"]
    assert rules["known-bug"].startswith("NCCL 2.21.5 (pid 100 (launcher)) has a known hang: "
                                         "deadlock during CUDA graph capture, fixed in 2.22.3 "
                                         "(NVIDIA/nccl#1251, sgl-project/sglang#7602)")
    assert rules["known-bug"].endswith("pid 100 (launcher) is inside CUDA graph capture now")
    assert rules["in-graph-capture"] == ("pid 100 (launcher) thread 105 is inside CUDA graph "
                                         "capture (Python stack: with torch.cuda.graph(g) at "
                                         "run_once (x.py:3))")


def test_uprobe_counts_name_an_open_capture():
    calls = xe.CudaDriverCalls(ts=10_005.0, pid=100, tid=101, since=10_000.0, begins=1,
                              launches=0, open_streams=["0xcafe"])
    out = _evidence([calls], _procs(["a"]))
    assert [f.rule for f in out.findings] == ["in-graph-capture"]
    assert out.capture[0]["source"] == "uprobes on libcuda"


def test_pyelftools_missing_is_one_line():
    out = _evidence([xe.LoadedLibs(ts=1.0, pid=100, libs=[], why="pyelftools is not installed")],
                    _procs(["a"]))
    assert out.missing == [{"what": "libs", "why": "pyelftools is not installed", "pid": None}]


# --------------------------------------------------------------------------- trace file
def test_evidence_events_round_trip_through_a_trace(tmp_path):
    path = str(tmp_path / "t.htrace.gz")
    events = [xe.ProcessVitals(ts=2.0, pid=5, start_time=1.0, rss_bytes=10, cpu_s=0.5,
                               num_threads=3, phase="start"),
              _log(5, "end", 3.0, 12, 2.5),
              xe.KernelLog(ts=3.0, since=1.0, lines=[(2.0, "NVRM: Xid (PCI:0000:18:00): 13, x")]),
              _health(),
              _libs(5, ("nccl", "2.21.5")),
              xe.CaptureSite(ts=3.0, pid=5, tid=6, how="capture-call", frame="f (g.py:1)"),
              xe.CudaDriverCalls(ts=3.0, pid=5, tid=6, since=2.0, begins=1, open_streams=["0x1"]),
              xe.EvidenceNote(ts=3.0, what="gpu", why="no NVML"),
              ev.GpuSample(ts=2.5, gpu=0, util_pct=100, pids=[5], power_mw=90_000,
                           sm_clock_mhz=1980),
              ev.PyStack(ts=3.0, pid=5, tid=6, frames=["f (g.py:1)"], files=["/g.py"])]
    w = TraceWriter(path, make_header(backends=["proc"], source="attach", targets=[5],
                                      start=1.0, processes=[]))
    for e in events:
        w.write(e)
    w.close("complete", end_ts=4.0)
    back = list(TraceReader(path).events())
    assert back == events


def test_old_traces_read_and_show_ports_only():
    """Traces recorded before evidence existed: GpuSample without power, no evidence events."""
    r = analyze_trace(str(FIXTURES / "gpu" / "traces" / "spin.htrace.gz"))
    e = r.evidence
    assert e["recorded"] is False and e["processes"] == [] and e["findings"] == []
    # libcuda's own listening socket, from the process table of the header
    assert r.to_json()["evidence"]["ports"]["listening"] == [
        {"pid": 437, "socket": "unix @cuda-uvmfd-4026531836-437@"}]


# --------------------------------------------------------------------------- replays
def test_replay_rank_inside_capture_with_uprobes():
    """Recorded with ``attach -b ebpf`` on gpu_libs_like (stand-ins for libcuda 580.159.04 and
    libnccl 2.21.5), the capture begun (SIGUSR1) inside the window."""
    r = analyze_trace(str(FIXTURES / "traces" / "evidence_gpu_libs.ebpf.htrace.gz"))
    e = r.evidence
    pid = r.processes[0].pid
    found = {f["rule"]: f for f in e["findings"]}
    cap = found["in-graph-capture"]
    assert cap["source"] == "Python stack and libcuda uprobes"
    assert "with graph(cuda) at main (gpu_libs_like.py:" in cap["text"]
    assert "began capturing stream 0xcafe and has not ended it" in cap["text"]
    assert found["known-bug"]["text"].endswith(f"pid {pid} is inside CUDA graph capture now")
    calls = {c["tid"]: c for c in e["graph_calls"]}
    assert calls[pid]["begins"] == 1 and calls[pid]["open_streams"] == ["0xcafe"]
    assert max(c["launches"] for c in calls.values()) > 100
    libs = {x["name"]: x["version"] for x in e["processes"][0]["libs"]}
    assert libs == {"nccl": "2.21.5", "libcuda": "580.159.04"}
    assert "cuda-uprobes" in r.backends


def test_replay_silent_server():
    """Recorded with ``attach -b proc`` on silent_server --silent-for 5220."""
    r = analyze_trace(str(FIXTURES / "traces" / "evidence_silent_server.proc.htrace.gz"))
    found = {f["rule"]: f["text"] for f in r.evidence["findings"]}
    assert found["logs-silent"].startswith("no log of the tree was written for 87 min before "
                                           "the window")
    assert "asks for port" in found["port-not-listening"]
    logs = r.evidence["processes"][0]["logs"]
    assert {x["role"] for x in logs} == {"stdout", "stderr", "log"}
    assert all(x["size"] == 30 and x["grew_bytes"] == 0 for x in logs)


# issue 20 item 8: a known bug is said only where its conditions hold
@pytest.mark.parametrize("targets,conditions", [
    (["TCP:[127.0.0.1:41792->127.0.0.1:38087]"], set()),
    (["TCP:[10.0.0.5:43211->10.0.0.6:29500]"], {"multi-node"}),
    (["TCP:[10.0.0.5:43211->10.0.0.5:29500]"], set()),          # both ends on this host
    (["TCPv6:[[::1]:5000->[::1]:41000]"], set()),
    (["/dev/infiniband/uverbs0", "/dev/nvidia0"], {"rdma"}),
    (["pipe:[12]", "/var/log/x.log", "anon_inode:[eventfd]"], set()),
])
def test_fd_conditions(targets, conditions):
    assert fd_conditions(targets) == conditions


def _bug_texts(version, conditions=(), capture=False):
    events = [_libs(100, ("nccl", version))]
    if capture:
        events.append(xe.CaptureSite(ts=1.0, pid=100, tid=105, how="with-block",
                                     frame="run_once (x.py:3)", detail="with torch.cuda.graph(g)"))
    procs = _procs(["a"])
    procs[0].conditions = set(conditions)
    return [f.text for f in _evidence(events, procs).findings if f.rule == "known-bug"]


def test_a_capture_bug_needs_a_capture():
    assert _bug_texts("2.21.5") == []
    assert _bug_texts("2.21.5", capture=True)


def test_a_multi_node_rdma_bug_needs_both():
    assert _bug_texts("2.30.5") == []
    assert _bug_texts("2.30.5", {"multi-node"}) == []
    assert _bug_texts("2.30.5", {"rdma"}) == []
    (text,) = _bug_texts("2.30.5", {"multi-node", "rdma"})
    assert text.endswith("talks to another host and has an RDMA device open now")


def test_the_cross_node_replay_bug_needs_all_three():
    assert _bug_texts("2.28.9", {"multi-node", "rdma"}) == []
    assert _bug_texts("2.28.9", {"multi-node", "rdma"}, capture=True)
