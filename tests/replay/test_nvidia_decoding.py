"""NVIDIA ioctl decoding (tracer/gpu/nvidia.py) on request numbers taken from the H200 recordings."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tracer.load.trace import analyze_trace
from tracer.strace.importer import import_strace
from tracer.gpu.nvidia import (describe_ioctl, ioc_fields, nv_request_name, rm_class_name,
                           rm_control_name)
from tracer.strace.decode import ioctl_request

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.parametrize("fd_kind, text, name, size", [
    # as strace printed them on the H200 (fixtures/gpu-h200/startup.strace.gz)
    ("nvidiactl", "_IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2a, 0x20)", "RM_CONTROL", 32),
    ("nvidiactl", "_IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2b, 0x30)", "RM_ALLOC", 48),
    ("nvidiactl", "_IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x29, 0x10)", "RM_FREE", 16),
    ("nvidiactl", "_IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x4e, 0x38)", "RM_MAP_MEMORY", 56),
    ("nvidiactl", "_IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x5e, 0x28)", "RM_UPDATE_DEVICE_MAPPING_INFO", 40),
    ("nvidiactl", "_IOC(_IOC_READ|_IOC_WRITE, 0x46, 0xc8, 0x900)", "CARD_INFO", 2304),
    ("nvidiactl", "_IOC(_IOC_READ|_IOC_WRITE, 0x46, 0xd6, 0x8)", "SYS_PARAMS", 8),
    ("nvidia", "_IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x27, 0x38)", "RM_ALLOC_MEMORY", 56),
    ("nvidia", "_IOC(_IOC_READ|_IOC_WRITE, 0x46, 0xc9, 0x4)", "REGISTER_FD", 4),
    ("nvidia", "_IOC(_IOC_READ|_IOC_WRITE, 0x46, 0xce, 0x10)", "ALLOC_OS_EVENT", 16),
    ("nvidia", "_IOC(_IOC_READ|_IOC_WRITE, 0x46, 0xd7, 0x230)", "NUMA_INFO", 560),
    ("nvidia-uvm", "_IOC(_IOC_NONE, 0, 0x1, 0x3000)", "UVM_INITIALIZE", None),
    ("nvidia-uvm", "_IOC(_IOC_NONE, 0, 0x21, 0)", "UVM_MAP_EXTERNAL_ALLOCATION", None),
    ("nvidia-uvm", "_IOC(_IOC_NONE, 0, 0x49, 0)", "UVM_CREATE_EXTERNAL_RANGE", None),
    ("nvidia-uvm", "_IOC(_IOC_NONE, 0, 0x17, 0)", "UVM_CREATE_RANGE_GROUP", None),
    ("nvidia-uvm", "_IOC(_IOC_NONE, 0, 0x1b, 0)", "UVM_REGISTER_CHANNEL", None),
    ("nvidia-uvm", "_IOC(_IOC_NONE, 0, 0x4b, 0)", "UVM_MM_INITIALIZE", None),
    ("nvidia-uvm", "_IOC(_IOC_NONE, 0, 0x44, 0)", "UVM_ALLOC_SEMAPHORE_POOL", None),
])
def test_requests_from_the_h200_log(fd_kind, text, name, size):
    request, _ = ioctl_request(text)
    d = describe_ioctl(fd_kind, request)
    assert d is not None and d.name == name and d.size == size
    assert nv_request_name(fd_kind, request) == name


def test_rm_control_request_fields_and_words():
    assert ioc_fields(0xC020462A) == (3, 0x46, 0x2A, 0x20)
    d = describe_ioctl("nvidiactl", 0xC020462A)
    assert str(d) == "RM_CONTROL on /dev/nvidiactl"
    assert "32 B params" in d.detail
    assert str(describe_ioctl("nvidia", 0xC020462A, fd_target="/dev/nvidia0")) == \
        "RM_CONTROL on /dev/nvidia0"


def test_other_fds_and_unknown_numbers():
    assert describe_ioctl("tty", 0x5401, "TCGETS") is None
    # an fd never seen opened: an NVIDIA escape is known by its number when type, direction
    # and parameter size all match one (strace -p of a running CUDA process) ...
    d = describe_ioctl(None, 0xC020462A)
    assert d is not None and d.name == "RM_CONTROL" and d.device == "an fd not seen opened"
    # ... and not when the size does not (0x46 is also the framebuffer's type), nor on a known fd
    assert describe_ioctl(None, 0xC040462A) is None and describe_ioctl(None, 0x4600) is None
    assert describe_ioctl("file", 0xC020462A) is None
    assert describe_ioctl("nvidiactl", 0xC0104699).name == "NV_ESC_0x99"
    assert describe_ioctl("nvidia-uvm", 999).name == "UVM_IOCTL_999"
    assert describe_ioctl("nvidiactl", 0x5401).detail == "not an NVIDIA escape"


@pytest.mark.parametrize("cmd, name", [
    (0x20800102, "NV2080_CTRL_CMD_GPU_GET_INFO_V2"),
    (0x20800403, "NV2080_CTRL_CMD_TIMER_GET_TIME"),
    (0x20801801, "NV2080_CTRL_CMD_BUS_GET_PCI_INFO"),
    (0xA06C0101, "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE"),
    (0xC36F0108, "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN"),
    (0x20801399, "NV2080 (subdevice) category FB index 0x99"),
    (0x12340501, "class 0x1234 category 0x05 index 0x01"),
])
def test_rm_control_names(cmd, name):
    assert rm_control_name(cmd) == name


def test_rm_classes():
    assert rm_class_name(0x41) == "NV01_ROOT_CLIENT"
    assert rm_class_name(0x2080) == "NV20_SUBDEVICE_0"
    assert rm_class_name(0xCBC0) == "HOPPER_COMPUTE_A"
    assert rm_class_name(0xC86F) == "HOPPER_CHANNEL_GPFIFO_A"
    assert rm_class_name(0xBEEF) == "class 0xbeef"


@pytest.mark.parametrize("log", ["gpu-h200/startup.strace.gz", "gpu/traces/startup.strace.gz"])
def test_startup_log_decoded_counts(log, tmp_path):
    """CUDA context creation on the H200: 345 + 94 + 33 ioctls, every one decoded by name."""
    out = tmp_path / "s.htrace.gz"
    import_strace(str(FIXTURES / log), str(out))
    report = analyze_trace(str(out))
    counters: Counter = Counter()
    for p in report.processes:
        for k, v in p.counters.items():
            if k.startswith("gpu_ioctls["):
                counters[k[len("gpu_ioctls["):-1]] += v
    by_device = Counter()
    for k, v in counters.items():
        by_device[k.split(" on ")[1]] += v
    assert by_device == {"/dev/nvidiactl": 345, "/dev/nvidia-uvm": 94, "/dev/nvidiaN": 33}
    assert counters["RM_CONTROL on /dev/nvidiactl"] == 194
    assert counters["RM_ALLOC on /dev/nvidiactl"] == 113
    assert counters["UVM_REGISTER_CHANNEL on /dev/nvidia-uvm"] == 20
    assert not any(k.startswith(("NV_ESC_0x", "UVM_IOCTL_", "ioctl ")) for k in counters)
