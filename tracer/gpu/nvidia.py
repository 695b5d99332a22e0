"""Decoding of NVIDIA driver ioctls: /dev/nvidiactl, /dev/nvidiaN and /dev/nvidia-uvm.

Contract: pure functions of numbers (no I/O). ``describe_ioctl(fd_kind, request, name)`` gives
an ``IoctlDesc`` (``name`` like "RM_CONTROL", ``device`` like "/dev/nvidiactl", ``detail`` with
the escape number and parameter size) or None when the fd is not an NVIDIA one or the number is
not an NVIDIA request; ``nv_request_name`` is the short form the strace decoder stores in
``IoctlCall.request_name``. ``rm_control_name``/``rm_class_name`` name RM control commands and
allocation classes when a backend can read the parameters (eBPF), ``None`` when unknown.
Encodings (NVIDIA/open-gpu-kernel-modules, checked against nv_escape.h, nv-ioctl-numbers.h,
uvm_ioctl.h/uvm_linux_ioctl.h and ctrl/ctrl2080/*.h; see ../shared/reference): the docstrings
of ``escape_by_number``, ``uvm_by_number`` and ``rm_control_name``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

NV_IOCTL_MAGIC = 0x46           # 'F'
NV_FD_KINDS = frozenset({"nvidiactl", "nvidia", "nvidia-uvm"})

# nr -> name of the escape (nv_escape.h, nv-ioctl-numbers.h with NV_IOCTL_BASE 200 = 0xc8).
NV_ESCAPES: Dict[int, str] = {
    0x27: "RM_ALLOC_MEMORY", 0x28: "RM_ALLOC_OBJECT", 0x29: "RM_FREE", 0x2A: "RM_CONTROL",
    0x2B: "RM_ALLOC", 0x32: "RM_CONFIG_GET", 0x33: "RM_CONFIG_SET", 0x34: "RM_DUP_OBJECT",
    0x35: "RM_SHARE", 0x37: "RM_CONFIG_GET_EX", 0x38: "RM_CONFIG_SET_EX",
    0x39: "RM_I2C_ACCESS", 0x41: "RM_IDLE_CHANNELS", 0x4A: "RM_VID_HEAP_CONTROL",
    0x4D: "RM_ACCESS_REGISTRY", 0x4E: "RM_MAP_MEMORY", 0x4F: "RM_UNMAP_MEMORY",
    0x52: "RM_GET_EVENT_DATA", 0x54: "RM_ALLOC_CONTEXT_DMA2", 0x56: "RM_ADD_VBLANK_CALLBACK",
    0x57: "RM_MAP_MEMORY_DMA", 0x58: "RM_UNMAP_MEMORY_DMA", 0x59: "RM_BIND_CONTEXT_DMA",
    0x5C: "RM_EXPORT_OBJECT_TO_FD", 0x5D: "RM_IMPORT_OBJECT_FROM_FD",
    0x5E: "RM_UPDATE_DEVICE_MAPPING_INFO",
    0xC8: "CARD_INFO", 0xC9: "REGISTER_FD", 0xCE: "ALLOC_OS_EVENT",
    0xCF: "FREE_OS_EVENT", 0xD1: "STATUS_CODE", 0xD2: "CHECK_VERSION_STR",
    0xD3: "IOCTL_XFER_CMD", 0xD4: "ATTACH_GPUS_TO_FD",
    0xD6: "SYS_PARAMS", 0xD7: "NUMA_INFO", 0xDA: "WAIT_OPEN_COMPLETE",
}

# What each escape does, for the report's detail line.
_ESCAPE_WHAT: Dict[str, str] = {
    "RM_CONTROL": "resource-manager control call (NVOS54)",
    "RM_ALLOC": "allocate a resource-manager object (NVOS21/NVOS64)",
    "RM_FREE": "free a resource-manager object",
    "RM_ALLOC_MEMORY": "allocate memory",
    "RM_MAP_MEMORY": "map memory into the process",
    "RM_UNMAP_MEMORY": "unmap memory",
    "RM_VID_HEAP_CONTROL": "video memory heap control",
    "RM_GET_EVENT_DATA": "read event data",
    "CARD_INFO": "list the GPUs (72 bytes each)",
    "REGISTER_FD": "bind a device fd to the control fd",
    "ALLOC_OS_EVENT": "create an OS event on the fd (completion notifications)",
    "FREE_OS_EVENT": "free an OS event",
    "CHECK_VERSION_STR": "check the driver version",
    "SYS_PARAMS": "system parameters",
    "NUMA_INFO": "NUMA information",
    "WAIT_OPEN_COMPLETE": "wait until the device open completes",
}

# /dev/nvidia-uvm (uvm_ioctl.h, uvm_linux_ioctl.h): plain numbers.
UVM_IOCTLS: Dict[int, str] = {
    0x30000001: "UVM_INITIALIZE", 0x30000002: "UVM_DEINITIALIZE",
    1: "UVM_RESERVE_VA", 2: "UVM_RELEASE_VA", 20: "UVM_GET_GPU_UUID_TABLE",
    23: "UVM_CREATE_RANGE_GROUP", 24: "UVM_DESTROY_RANGE_GROUP", 25: "UVM_REGISTER_GPU_VASPACE",
    26: "UVM_UNREGISTER_GPU_VASPACE", 27: "UVM_REGISTER_CHANNEL", 28: "UVM_UNREGISTER_CHANNEL",
    29: "UVM_ENABLE_PEER_ACCESS", 30: "UVM_DISABLE_PEER_ACCESS", 31: "UVM_SET_RANGE_GROUP",
    33: "UVM_MAP_EXTERNAL_ALLOCATION", 34: "UVM_FREE", 37: "UVM_REGISTER_GPU",
    38: "UVM_UNREGISTER_GPU", 39: "UVM_PAGEABLE_MEM_ACCESS", 42: "UVM_SET_PREFERRED_LOCATION",
    43: "UVM_UNSET_PREFERRED_LOCATION", 44: "UVM_ENABLE_READ_DUPLICATION",
    45: "UVM_DISABLE_READ_DUPLICATION", 46: "UVM_SET_ACCESSED_BY", 47: "UVM_UNSET_ACCESSED_BY",
    51: "UVM_MIGRATE", 53: "UVM_MIGRATE_RANGE_GROUP", 62: "UVM_TOOLS_READ_PROCESS_MEMORY",
    63: "UVM_TOOLS_WRITE_PROCESS_MEMORY", 65: "UVM_MAP_DYNAMIC_PARALLELISM_REGION",
    66: "UVM_UNMAP_EXTERNAL", 68: "UVM_ALLOC_SEMAPHORE_POOL", 70: "UVM_PAGEABLE_MEM_ACCESS_ON_GPU",
    71: "UVM_POPULATE_PAGEABLE", 72: "UVM_VALIDATE_VA_RANGE", 73: "UVM_CREATE_EXTERNAL_RANGE",
    75: "UVM_MM_INITIALIZE",
}

# RM allocation classes (hClass of RM_ALLOC; class/cl*.h).
RM_CLASSES: Dict[int, str] = {
    0x0000: "NV01_NULL_OBJECT", 0x0002: "NV01_CONTEXT_DMA", 0x003E: "NV01_MEMORY_SYSTEM",
    0x0040: "NV01_MEMORY_LOCAL_USER", 0x0041: "NV01_ROOT_CLIENT", 0x0070: "NV01_MEMORY_VIRTUAL",
    0x0071: "NV01_MEMORY_SYSTEM_OS_DESCRIPTOR", 0x0079: "NV01_EVENT_OS_EVENT",
    0x0080: "NV01_DEVICE_0", 0x2080: "NV20_SUBDEVICE_0", 0x00F1: "NV_MEMORY_FABRIC",
    0x90F1: "FERMI_VASPACE_A", 0x9067: "FERMI_CONTEXT_SHARE_A", 0xA06C: "KEPLER_CHANNEL_GROUP_A",
    0xC361: "VOLTA_USERMODE_A", 0xC461: "TURING_USERMODE_A", 0xC561: "AMPERE_USERMODE_A",
    0xC661: "HOPPER_USERMODE_A",
    0xC36F: "VOLTA_CHANNEL_GPFIFO_A", 0xC46F: "TURING_CHANNEL_GPFIFO_A",
    0xC56F: "AMPERE_CHANNEL_GPFIFO_A", 0xC86F: "HOPPER_CHANNEL_GPFIFO_A",
    0xC96F: "BLACKWELL_CHANNEL_GPFIFO_A",
    0xC3C0: "VOLTA_COMPUTE_A", 0xC5C0: "TURING_COMPUTE_A", 0xC6C0: "AMPERE_COMPUTE_A",
    0xC7C0: "AMPERE_COMPUTE_B", 0xCBC0: "HOPPER_COMPUTE_A", 0xCDC0: "BLACKWELL_COMPUTE_A",
    0xC3B5: "VOLTA_DMA_COPY_A", 0xC5B5: "TURING_DMA_COPY_A", 0xC6B5: "AMPERE_DMA_COPY_A",
    0xC7B5: "AMPERE_DMA_COPY_B", 0xC8B5: "HOPPER_DMA_COPY_A", 0xC9B5: "BLACKWELL_DMA_COPY_A",
}

# Categories of the NV2080 (subdevice) control interface (ctrl2080/*.h).
NV2080_CATEGORIES: Dict[int, str] = {
    0x01: "GPU", 0x03: "EVENT", 0x04: "TIMER", 0x11: "FIFO", 0x12: "GR", 0x13: "FB",
    0x17: "MC", 0x18: "BUS", 0x20: "PERF", 0x2A: "CE", 0x30: "NVLINK", 0x36: "GSP",
}

# Control classes (the high 16 bits of a command).
CONTROL_CLASSES: Dict[int, str] = {
    0x0000: "NV0000 (client)", 0x0080: "NV0080 (device)", 0x2080: "NV2080 (subdevice)",
    0xA06C: "NVA06C (channel group)", 0x906F: "NV906F (channel)",
    0xC36F: "NVC36F (gpfifo channel)",
}

# Common RM control commands, checked against ctrl*.h.
RM_CONTROLS: Dict[int, str] = {
    0x20800102: "NV2080_CTRL_CMD_GPU_GET_INFO_V2",
    0x20800403: "NV2080_CTRL_CMD_TIMER_GET_TIME",
    0x20801801: "NV2080_CTRL_CMD_BUS_GET_PCI_INFO",
    0x20803002: "NV2080_CTRL_CMD_NVLINK_GET_NVLINK_STATUS",
    0xA06C0101: "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE",
    0xA06C0105: "NVA06C_CTRL_CMD_PREEMPT",
    0xC36F0108: "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN",
    0x906F0102: "NV906F_CTRL_CMD_RESET_CHANNEL",
}

RM_STATUS: Dict[int, str] = {0x00: "OK", 0x0F: "GPU_IS_LOST", 0x1F: "INVALID_ARGUMENT",
                             0x33: "INVALID_OBJECT_HANDLE", 0x56: "NOT_SUPPORTED",
                             0x65: "TIMEOUT"}

_DEVICES = {"nvidiactl": "/dev/nvidiactl", "nvidia": "/dev/nvidiaN",
            "nvidia-uvm": "/dev/nvidia-uvm"}


@dataclass(frozen=True)
class IoctlDesc:
    """A decoded NVIDIA ioctl: ``name`` ("RM_CONTROL", "UVM_REGISTER_CHANNEL", "NV_ESC_0x99"),
    ``device`` ("/dev/nvidiactl"), ``detail`` (escape number, parameter size, what it does)."""
    name: str
    device: str
    detail: str = ""
    nr: Optional[int] = None
    size: Optional[int] = None

    def __str__(self) -> str:
        return f"{self.name} on {self.device}"


def ioc_fields(request: int) -> tuple:
    """(dir, type, nr, size) of a Linux ``_IOC`` request number."""
    return (request >> 30) & 0x3, (request >> 8) & 0xFF, request & 0xFF, (request >> 16) & 0x3FFF


def is_nv_escape(request: int) -> bool:
    return ((request >> 8) & 0xFF) == NV_IOCTL_MAGIC


# The parameter size of each escape (nv_escape.h's structs, driver 595): with the 'F' type and
# both directions it identifies an escape by its number alone, when the log never showed the fd
# opened (strace -p of a running process). CARD_INFO: 72 bytes a GPU slot.
ESCAPE_SIZES: Dict[str, frozenset] = {
    "RM_ALLOC_MEMORY": frozenset({56}), "RM_FREE": frozenset({16}),
    "RM_CONTROL": frozenset({32}), "RM_ALLOC": frozenset({32, 48}),
    "RM_DUP_OBJECT": frozenset({28}), "RM_SHARE": frozenset({24}),
    "RM_VID_HEAP_CONTROL": frozenset({184}), "RM_MAP_MEMORY": frozenset({56}),
    "RM_UNMAP_MEMORY": frozenset({32}), "RM_GET_EVENT_DATA": frozenset({16}),
    "RM_MAP_MEMORY_DMA": frozenset({64}), "RM_UNMAP_MEMORY_DMA": frozenset({48}),
    "RM_UPDATE_DEVICE_MAPPING_INFO": frozenset({40}), "REGISTER_FD": frozenset({4}),
    "ALLOC_OS_EVENT": frozenset({16}), "FREE_OS_EVENT": frozenset({16}),
    "STATUS_CODE": frozenset({12}), "CHECK_VERSION_STR": frozenset({72}),
    "IOCTL_XFER_CMD": frozenset({16}), "SYS_PARAMS": frozenset({8}),
    "WAIT_OPEN_COMPLETE": frozenset({8}),
}
UNSEEN_FD = "an fd not seen opened"


def escape_by_number(request: int) -> Optional[str]:
    """The NVIDIA escape a request number is, when type ('F'), direction (read and write) and
    parameter size all match one (``ESCAPE_SIZES``), else None.
    /dev/nvidiactl and /dev/nvidiaN: ``_IOWR('F' = 0x46, nr, sizeof(params))``: nr = req & 0xff,
    type = (req >> 8) & 0xff, size = (req >> 16) & 0x3fff, dir = req >> 30. strace prints it as
    ``_IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2a, 0x20)``. Struct layouts change between drivers, so the
    size is reported from the request, never assumed."""
    direction, typ, nr, size = ioc_fields(request)
    name = NV_ESCAPES.get(nr)
    if typ != NV_IOCTL_MAGIC or direction != 3 or name is None:
        return None
    sizes = ESCAPE_SIZES.get(name)
    if name == "CARD_INFO":
        return name if size and size % 72 == 0 else None
    return name if sizes is not None and size in sizes else None


def uvm_by_number(request: int) -> Optional[str]:
    """The UVM ioctl a request number is: UVM's plain numbers (``UVM_IOCTLS``), which no
    ``_IOC`` type, direction or size marks; strace prints one it cannot name as
    ``_IOC(_IOC_NONE, 0, nr, 0)``. Only asked for an fd never seen opened.
    /dev/nvidia-uvm: plain integers (``UVM_IOCTL_BASE(i) = i``), printed by strace as
    ``_IOC(_IOC_NONE, 0, 0x21, 0)``; UVM_INITIALIZE is 0x30000001 (``_IOC(_IOC_NONE, 0, 0x1,
    0x3000)``)."""
    return UVM_IOCTLS.get(request)


def describe_ioctl(fd_kind: Optional[str], request: int, request_name: Optional[str] = None,
                   fd_target: Optional[str] = None) -> Optional[IoctlDesc]:
    """Decode one ioctl on an NVIDIA fd (module doc); None for other fds. On an fd of unknown
    kind (``None`` or "?": never seen opened) an NVIDIA escape is still known by its number
    (``escape_by_number``), and a UVM ioctl by its plain number when strace could not name it
    (``uvm_by_number``), on ``UNSEEN_FD``.

    ``fd_target`` ("/dev/nvidia0") names the device when known; ``request_name`` is only used
    when it already is a decoded NVIDIA name (a re-decode returns the same answer).
    """
    if fd_kind not in NV_FD_KINDS:
        if fd_kind not in (None, "", "?"):
            return None
        name = escape_by_number(request)
        if name is None:
            uvm = uvm_by_number(request) if request_name is None else None
            return None if uvm is None else IoctlDesc(
                uvm, UNSEEN_FD, f"uvm ioctl {request} (/dev/nvidia-uvm's numbering): known by "
                "its request number", nr=request, size=None)
        _, _, nr, size = ioc_fields(request)
        return IoctlDesc(name, UNSEEN_FD, f"NV_ESC_{name} (nr 0x{nr:02x}), {size} B params: "
                         "known by its request number", nr=nr, size=size)
    device = fd_target if fd_target and fd_target.startswith("/dev/nvidia") else _DEVICES[fd_kind]
    if fd_kind == "nvidia-uvm":
        name = UVM_IOCTLS.get(request)
        if name is None:
            name = f"UVM_IOCTL_{request}"
        return IoctlDesc(name, device, f"uvm ioctl {request}", nr=request, size=None)
    _, typ, nr, size = ioc_fields(request)
    if typ != NV_IOCTL_MAGIC:
        if request_name and request_name.isupper():
            return IoctlDesc(request_name, device, "not an NVIDIA escape")
        return IoctlDesc(f"ioctl 0x{request:x}", device, "not an NVIDIA escape")
    name = NV_ESCAPES.get(nr, f"NV_ESC_0x{nr:02x}")
    what = _ESCAPE_WHAT.get(name, "")
    detail = f"NV_ESC_{name} (nr 0x{nr:02x}), {size} B params" + (f": {what}" if what else "")
    if name == "RM_ALLOC" and size in (32, 48):
        detail += f" ({'NVOS21' if size == 32 else 'NVOS64'})"
    if name == "CARD_INFO" and size and size % 72 == 0:
        detail += f" ({size // 72} GPU slots)"
    return IoctlDesc(name, device, detail, nr=nr, size=size)


def nv_request_name(fd_kind: Optional[str], request: int,
                    request_name: Optional[str] = None) -> Optional[str]:
    """The short name stored in ``IoctlCall.request_name`` for an NVIDIA fd, else None."""
    d = describe_ioctl(fd_kind, request, request_name)
    return d.name if d is not None else None


def rm_control_name(cmd: int) -> str:
    """Name an RM control command (module doc): the known name, else class/category/index.
    An RM control command = class << 16 | category << 8 | index (0x20800102: class 0x2080, category
    0x01, GPU_GET_INFO_V2)."""
    known = RM_CONTROLS.get(cmd)
    if known:
        return known
    cls, cat, idx = (cmd >> 16) & 0xFFFF, (cmd >> 8) & 0xFF, cmd & 0xFF
    cls_name = CONTROL_CLASSES.get(cls, f"class 0x{cls:04x}")
    cat_name = NV2080_CATEGORIES.get(cat, f"0x{cat:02x}") if cls == 0x2080 else f"0x{cat:02x}"
    return f"{cls_name} category {cat_name} index 0x{idx:02x}"


def rm_class_name(h_class: int) -> str:
    """Name an RM allocation class (hClass), or 'class 0x....' when unknown."""
    return RM_CLASSES.get(h_class, f"class 0x{h_class:04x}")


def rm_status_name(status: int) -> str:
    return RM_STATUS.get(status, f"0x{status:x}")
