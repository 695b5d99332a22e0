"""NVML reader and backend (tracer/gpu/nvml.py through nvidia-ml-py, tracer/record/backends/
nvml_backend.py) with fakes of the pynvml module (monkeypatched); the real library is used only
where one is installed (the GPU machine), and here its absence must read "no NVIDIA driver"."""
from __future__ import annotations

import ctypes.util
import re
import threading
import time

import pytest

from tracer import events as ev
from tracer.record.backends.base import TargetSet
from tracer.record.backends.nvml_backend import NvmlBackend
from tracer.events import GpuSample
import tracer.gpu.nvml as nvml_mod
from tracer.gpu.nvml import NvmlError, open_nvml
from tracer.tracefile.format import TraceReader, TraceWriter, make_header


class FakeNvml:
    def __init__(self):
        self.closed = False
        self.reads = 0

    def read(self, ts):
        self.reads += 1
        return [GpuSample(ts, 0, "GPU-aaaa", 100, 5 << 20, 140 << 30, [437]),
                GpuSample(ts, 1, "GPU-bbbb", None, None, None, [])]

    def close(self):
        self.closed = True


def test_check_says_why_not_without_opening_nvml():
    def never():
        raise AssertionError("check() opened NVML")
    why = "no NVIDIA driver (NVIDIA's management library, libnvidia-ml.so.1, is not loaded)"
    assert NvmlBackend(opener=never, probe=lambda: why).check() == why
    assert NvmlBackend(opener=never, probe=lambda: None).check() is None

    def broken():
        raise RuntimeError("bad ELF")
    assert NvmlBackend(opener=never, probe=broken).check() == "NVML unusable: bad ELF"


def test_an_nvml_that_fails_to_open_in_the_thread_is_an_error_not_a_failed_start():
    def refuse():
        raise NvmlError("nvmlInit failed through nvidia-ml-py (Driver/library version mismatch)")
    got = []
    b = NvmlBackend(rate_hz=50, opener=refuse, probe=lambda: None)
    b.start(TargetSet([1]), got.append)        # returns at once: NVML opens in the thread
    b.stop()
    assert got == [] and b.errors == ["NVML could not be opened: nvmlInit failed through "
                                      "nvidia-ml-py (Driver/library version mismatch)"]


def test_nvml_problem_without_the_driver_imports_nothing(monkeypatch):
    import sys
    monkeypatch.setattr(nvml_mod, "DRIVER_PATHS", ("/nonexistent/nvidia",))
    monkeypatch.setitem(sys.modules, "pynvml", None)        # an import would raise
    assert nvml_mod.nvml_problem().startswith("no NVIDIA driver")


@pytest.fixture(autouse=True)
def a_driver_is_there(monkeypatch):
    """open_nvml goes on to the bindings (real or fake) only where the kernel driver is."""
    monkeypatch.setattr(nvml_mod, "DRIVER_PATHS", ("/",))


def test_open_nvml_without_the_kernel_driver_imports_nothing(monkeypatch):
    import sys
    monkeypatch.setattr(nvml_mod, "DRIVER_PATHS", ("/nonexistent/nvidia", "/nonexistent/ctl"))
    monkeypatch.setitem(sys.modules, "pynvml", None)        # an import would raise
    with pytest.raises(NvmlError,
                       match="^no NVIDIA driver .*neither /nonexistent/nvidia nor /nonexistent/ctl"):
        open_nvml()


@pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None, reason="NVML is here")
def test_open_nvml_without_the_library_says_no_nvidia_driver():
    """The real nvidia-ml-py on a machine without the driver: one line, "no NVIDIA driver"."""
    pytest.importorskip("pynvml")
    with pytest.raises(NvmlError, match="^no NVIDIA driver") as info:
        open_nvml()
    assert "\n" not in str(info.value)
    assert NvmlBackend().check().startswith("no NVIDIA driver")


def test_backend_emits_gpu_samples_and_stops():
    fake = FakeNvml()
    got = []
    done = threading.Event()

    def emit(e):
        got.append(e)
        if len(got) >= 4:
            done.set()
    b = NvmlBackend(rate_hz=50, opener=lambda: fake)
    b.start(TargetSet([1]), emit)
    assert done.wait(5)
    b.stop()
    b.stop()   # idempotent
    assert fake.closed
    n, reads = len(got), fake.reads
    time.sleep(10 * b.interval)   # ten sample periods: a sampler still running would emit
    assert len(got) == n and fake.reads == reads, "samples after stop()"
    assert n == 2 * reads         # two GPUs per reading, every reading emitted
    assert all(isinstance(e, ev.GpuSample) for e in got)
    first = got[0]
    assert (first.gpu, first.uuid, first.util_pct, first.pids) == (0, "GPU-aaaa", 100, [437])
    assert got[1].util_pct is None and got[1].pids == []


def test_gpu_sample_round_trips_through_a_trace(tmp_path):
    path = str(tmp_path / "t.htrace.gz")
    w = TraceWriter(path, make_header(backends=["nvml"], source="attach", targets=[1],
                                      start=1.0, processes=[]))
    w.write(ev.GpuSample(2.0, 0, "GPU-x", 97, 10, 20, [3, 4]))
    w.close("complete", end_ts=3.0)
    events = list(TraceReader(path).events())
    s = [e for e in events if isinstance(e, ev.GpuSample)]
    assert len(s) == 1 and s[0].util_pct == 97 and list(s[0].pids) == [3, 4]


@pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is None, reason="no NVML here")
def test_real_nvml_reads_every_gpu():
    nv = open_nvml()
    try:
        readings = nv.read(0.0)
    finally:
        nv.close()
    assert readings and all(r.uuid.startswith("GPU-") for r in readings)
    assert all(r.mem_total and r.mem_total > 0 for r in readings)


class FakeNvmlWithHealth(FakeNvml):
    def health(self, ts, phase):
        from tracer.events.evidence import GpuHealth
        return [GpuHealth(ts=ts, gpu=0, uuid="GPU-aaaa", power_mw=95_000, phase=phase)]


def test_backend_emits_health_at_start_and_stop():
    from tracer.events.evidence import GpuHealth
    fake = FakeNvmlWithHealth()
    got = []
    b = NvmlBackend(rate_hz=50, opener=lambda: fake)
    b.start(TargetSet([1]), got.append)
    b.stop()
    health = [e for e in got if isinstance(e, GpuHealth)]
    assert [h.phase for h in health] == ["start", "end"]
    assert got[0] is health[0] and got[-1] is health[1]   # first and last of the recording
    assert fake.closed


def test_the_end_s_health_is_read_in_the_window_when_its_end_is_known():
    import time
    from tracer.events.evidence import GpuHealth
    fake = FakeNvmlWithHealth()
    got = []
    b = NvmlBackend(rate_hz=0.2, opener=lambda: fake)     # a sample every 5 s: not the reason
    end = time.monotonic() + 0.8
    b.window_ends_at(end)
    b.start(TargetSet([1]), got.append)
    while not [e for e in got if isinstance(e, GpuHealth) and e.phase == "end"]:
        assert time.monotonic() < end + 30, "no end health in the window"
        time.sleep(0.05)
    read_at = time.monotonic()
    b.stop()
    health = [e.phase for e in got if isinstance(e, GpuHealth)]
    assert health == ["start", "end"] and read_at >= end - 0.5 - 0.01   # once, not again
    assert fake.closed


@pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is None, reason="no NVML here")
def test_real_nvml_health():
    nv = open_nvml()
    try:
        health = nv.health(0.0, "end")
        samples = nv.read(0.0)
    finally:
        nv.close()
    assert health and all(h.power_limit_mw and h.name for h in health)
    assert all(s.power_mw is not None for s in samples)


# --------------------------------------------------------------------------- nvidia-ml-py
class FakePynvml:
    """The part of NVIDIA's pynvml that hangtrace calls, for one GPU without power readings."""

    class NVMLError(Exception):
        pass

    NVML_CLOCK_SM = 1

    def __init__(self, gpus=1):
        self.gpus, self.inited, self.shut = gpus, 0, 0

    def nvmlInit(self):
        self.inited += 1

    def nvmlShutdown(self):
        self.shut += 1

    def nvmlDeviceGetCount(self):
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"h{i}"

    def nvmlDeviceGetUUID(self, h):
        return b"GPU-" + h.encode()

    def nvmlDeviceGetUtilizationRates(self, h):
        return type("U", (), {"gpu": 97, "memory": 3})()

    def nvmlDeviceGetMemoryInfo(self, h):
        return type("M", (), {"used": 5 << 30, "total": 141 << 30, "free": 1})()

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [type("P", (), {"pid": 623, "usedGpuMemory": 3 << 30})(),
                type("P", (), {"pid": 437, "usedGpuMemory": None})()]   # hidden: no figure

    def nvmlDeviceGetPowerUsage(self, h):
        raise self.NVMLError("Not Supported")

    def nvmlDeviceGetClockInfo(self, h, which):
        assert which == self.NVML_CLOCK_SM
        return 1980


def test_pynvml_readings():
    from tracer.gpu.nvml_py import open_pynvml
    fake = FakePynvml()
    nv = open_pynvml(fake)
    assert nv.binding == "nvidia-ml-py" and nv.count == 1 and nv.uuids == ["GPU-h0"]
    (s,) = nv.read(12.5)
    assert (s.ts, s.gpu, s.uuid, s.util_pct, s.mem_used, s.mem_total, s.pids) == \
        (12.5, 0, "GPU-h0", 97, 5 << 30, 141 << 30, [437, 623])
    assert s.power_mw is None and s.sm_clock_mhz == 1980     # refused: None, never a guess
    assert s.pid_mem == {623: 3 << 30}
    nv.close()
    nv.close()
    assert fake.shut == 1


def test_pynvml_without_a_gpu_is_one_line_and_shuts_down():
    from tracer.gpu.nvml_py import open_pynvml
    fake = FakePynvml(gpus=0)
    with pytest.raises(NvmlError, match="no GPU"):
        open_pynvml(fake)
    assert fake.shut == 1


def test_open_nvml_reads_through_pynvml(monkeypatch):
    import sys
    fake = FakePynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    nv = open_nvml()
    assert nv.binding == "nvidia-ml-py" and nv.uuids == ["GPU-h0"]
    nv.close()


@pytest.mark.parametrize("code,words", [(12, "^no NVIDIA driver"), (9, "^no NVIDIA driver"),
                                        (999, "^nvmlInit failed through nvidia-ml-py")])
def test_open_nvml_refused_by_the_bindings_is_one_line(monkeypatch, code, words):
    import sys
    fake = FakePynvml()

    def refuse():
        exc = fake.NVMLError("NVML Shared Library Not Found")
        exc.value = code
        raise exc
    fake.nvmlInit = refuse
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with pytest.raises(NvmlError, match=words):
        open_nvml()
    b = NvmlBackend(rate_hz=50, opener=open_nvml, probe=lambda: None)
    b.start(TargetSet([1]), lambda e: None)     # the open fails in the sampling thread
    b.stop()
    (error,) = b.errors
    assert error.startswith("NVML could not be opened: ") and "\n" not in error
    assert re.match(words, error[len("NVML could not be opened: "):])


def test_open_nvml_without_the_bindings_says_so(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "pynvml", None)        # import pynvml: ImportError
    with pytest.raises(NvmlError, match="nvidia-ml-py cannot be imported"):
        open_nvml()


class FakePynvmlWithGpm(FakePynvml):
    """Power limit and GPM as nvidia-ml-py 12.535+ gives them (SM activity per interval)."""

    def __init__(self, active=(93.6, 0.8)):
        super().__init__()
        self.active = list(active)
        self.freed = 0

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700_000

    def nvmlGpmQueryDeviceSupport(self, h):
        return type("S", (), {"isSupportedDevice": 1})()

    def nvmlGpmSampleAlloc(self):
        return object()

    def nvmlGpmSampleGet(self, h, sample):
        return sample

    def nvmlGpmSampleFree(self, sample):
        self.freed += 1

    NVML_GPM_METRICS_GET_VERSION, NVML_GPM_METRIC_SM_UTIL = 1, 2

    def c_nvmlGpmMetricsGet_t(self):
        metric = type("M", (), {"metricId": 0, "value": 0.0})()
        return type("G", (), {"version": 0, "numMetrics": 0, "sample1": None, "sample2": None,
                              "metrics": [metric]})()

    def nvmlGpmMetricsGet(self, get):
        assert get.metrics[0].metricId == self.NVML_GPM_METRIC_SM_UTIL and get.sample1
        get.metrics[0].value = self.active.pop(0)


def test_pynvml_power_limit_and_gpm_sm_activity():
    from tracer.gpu.nvml_py import open_pynvml
    fake = FakePynvmlWithGpm()
    nv = open_pynvml(fake)
    first, second, third = (nv.read(t)[0] for t in (1.0, 2.0, 3.0))
    assert first.power_limit_mw == 700_000 and first.sm_active_pct is None   # one sample yet
    assert (second.sm_active_pct, third.sm_active_pct) == (93.6, 0.8) and fake.freed == 2
    plain = open_pynvml(FakePynvml()).read(1.0)[0]          # bindings without GPM or limit
    assert plain.power_limit_mw is None and plain.sm_active_pct is None
