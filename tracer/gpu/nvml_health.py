"""GPU health counters through NVML (ctypes): power, clocks, throttle reasons, ECC, retired pages,
remapped rows and the PCIe replay counter, read once per GPU at the start and end of a recording.

Contract:
- ``read_health(lib, handle, index, uuid, ts, phase, error)`` returns one
  ``evidence_events.GpuHealth``; it never raises: a value NVML refuses (not supported on this
  GPU, no permission, a function missing from an old library) is None, and ``missing`` says why
  in a few words ("not supported", "no permission", "not in this NVML").
- ``THROTTLE_REASONS`` names the bits of nvmlClocksEventReasons (nvml.h, "Clocks Event
  Reasons"; the older name was "Clocks Throttle Reasons", same bits); ``throttle_names``
  decodes a mask.

ABI (nvml.h, driver 450 and later unless noted): nvmlDeviceGetName(dev, char*, uint),
nvmlDeviceGetPciInfo_v3(dev, nvmlPciInfo_t*) {char busIdLegacy[16]; uint domain, bus, device,
pciDeviceId, pciSubSystemId; char busId[32]}, nvmlDeviceGetPowerUsage(dev, uint* mW),
nvmlDeviceGetEnforcedPowerLimit(dev, uint* mW), nvmlDeviceGetClockInfo /
nvmlDeviceGetMaxClockInfo(dev, NVML_CLOCK_SM = 1, uint* MHz),
nvmlDeviceGetCurrentClocksEventReasons (535+) or ...ThrottleReasons(dev, ull*),
nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU = 0, uint*),
nvmlDeviceGetTotalEccErrors(dev, type 0 corrected / 1 uncorrected, counter 0 volatile, ull*),
nvmlDeviceGetRetiredPages(dev, cause 0 multiple single-bit / 1 double-bit, uint* count, ull*
addresses: NULL with count 0 asks for the count), nvmlDeviceGetRetiredPagesPendingStatus(dev,
int*), nvmlDeviceGetRemappedRows(dev, uint* corr, uint* unc, uint* pending, uint* failed)
(Ampere and later), nvmlDeviceGetPcieReplayCounter(dev, uint*).
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable, Dict, List, Optional

from ..events.evidence import GpuHealth

__all__ = ["read_health", "THROTTLE_REASONS", "throttle_names", "pci_bus_id"]

NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_INSUFFICIENT_SIZE = 7
from .nvml_common import NVML_CLOCK_SM  # noqa: E402
NVML_TEMPERATURE_GPU = 0

THROTTLE_REASONS = {
    0x1: "gpu-idle", 0x2: "applications-clocks-setting", 0x4: "sw-power-cap",
    0x8: "hw-slowdown", 0x10: "sync-boost", 0x20: "sw-thermal-slowdown",
    0x40: "hw-thermal-slowdown", 0x80: "hw-power-brake-slowdown", 0x100: "display-clock-setting",
}


def throttle_names(mask: Optional[int]) -> List[str]:
    """Names of the bits set in a clock-event reason mask (unknown bits as hex)."""
    if not mask:
        return []
    out = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
    rest = mask & ~sum(THROTTLE_REASONS)
    if rest:
        out.append(hex(rest))
    return out


class _PciInfo(ctypes.Structure):
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint),
                ("bus", ctypes.c_uint), ("device", ctypes.c_uint),
                ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
                ("busId", ctypes.c_char * 32)]


def pci_bus_id(domain: int, bus: int, device: int) -> str:
    """The form the driver prints in Xid lines: "0000:18:00"."""
    return f"{domain:04x}:{bus:02x}:{device:02x}"


class _Reader:
    """Calls one NVML function at a time and keeps why a value is missing."""

    def __init__(self, lib: Any, handle: Any, error: Callable[[int], str]) -> None:
        self.lib, self.h, self.error = lib, handle, error
        self.missing: Dict[str, str] = {}

    def call(self, key: str, names: tuple, *args: Any) -> bool:
        for name in names:
            fn = getattr(self.lib, name, None)
            if fn is None:
                continue
            try:
                rc = fn(self.h, *args)
            except Exception as exc:   # a broken binding: never fail the recording for it
                self.missing[key] = f"call failed: {exc}"
                return False
            if rc in (NVML_SUCCESS, NVML_ERROR_INSUFFICIENT_SIZE):
                return True
            self.missing[key] = {NVML_ERROR_NOT_SUPPORTED: "not supported",
                                 NVML_ERROR_NO_PERMISSION: "no permission"}.get(rc) \
                or self.error(rc)
            return False
        self.missing[key] = "not in this NVML"
        return False

    def uint(self, key: str, names: tuple, *pre: Any) -> Optional[int]:
        v = ctypes.c_uint(0)
        return int(v.value) if self.call(key, names, *pre, ctypes.byref(v)) else None

    def ull(self, key: str, names: tuple, *pre: Any) -> Optional[int]:
        v = ctypes.c_ulonglong(0)
        return int(v.value) if self.call(key, names, *pre, ctypes.byref(v)) else None


def read_health(lib: Any, handle: Any, index: int, uuid: str, ts: float, phase: str,
                error: Callable[[int], str]) -> GpuHealth:
    """One GPU's health (module doc)."""
    r = _Reader(lib, handle, error)
    g = GpuHealth(ts=ts, gpu=index, uuid=uuid, phase=phase)
    name = ctypes.create_string_buffer(96)
    if r.call("name", ("nvmlDeviceGetName",), name, ctypes.c_uint(96)):
        g.name = name.value.decode(errors="replace")
    pci = _PciInfo()
    if r.call("pci_bus", ("nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"),
              ctypes.byref(pci)):
        g.pci_bus = pci_bus_id(pci.domain, pci.bus, pci.device)
    g.power_mw = r.uint("power_mw", ("nvmlDeviceGetPowerUsage",))
    g.power_limit_mw = r.uint("power_limit_mw", ("nvmlDeviceGetEnforcedPowerLimit",))
    g.sm_clock_mhz = r.uint("sm_clock_mhz", ("nvmlDeviceGetClockInfo",), NVML_CLOCK_SM)
    g.sm_clock_max_mhz = r.uint("sm_clock_max_mhz", ("nvmlDeviceGetMaxClockInfo",),
                                NVML_CLOCK_SM)
    g.throttle = r.ull("throttle", ("nvmlDeviceGetCurrentClocksEventReasons",
                                    "nvmlDeviceGetCurrentClocksThrottleReasons"))
    g.temperature_c = r.uint("temperature_c", ("nvmlDeviceGetTemperature",),
                             NVML_TEMPERATURE_GPU)
    g.ecc_corrected = r.ull("ecc_corrected", ("nvmlDeviceGetTotalEccErrors",), 0, 0)
    g.ecc_uncorrected = r.ull("ecc_uncorrected", ("nvmlDeviceGetTotalEccErrors",), 1, 0)
    for key, cause in (("retired_sbe", 0), ("retired_dbe", 1)):
        count = ctypes.c_uint(0)
        if r.call(key, ("nvmlDeviceGetRetiredPages",), cause, ctypes.byref(count), None):
            setattr(g, key, int(count.value))
    pending = ctypes.c_int(0)
    if r.call("retired_pending", ("nvmlDeviceGetRetiredPagesPendingStatus",),
              ctypes.byref(pending)):
        g.retired_pending = bool(pending.value)
    rows = [ctypes.c_uint(0) for _ in range(4)]
    if r.call("remapped_rows", ("nvmlDeviceGetRemappedRows",), *map(ctypes.byref, rows)):
        g.remapped_corr, g.remapped_unc = int(rows[0].value), int(rows[1].value)
        g.remap_pending, g.remap_failed = bool(rows[2].value), bool(rows[3].value)
    g.pcie_replays = r.uint("pcie_replays", ("nvmlDeviceGetPcieReplayCounter",))
    g.missing = r.missing
    return g
