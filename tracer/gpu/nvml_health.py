"""GPU health counters through NVML (nvidia-ml-py's ``pynvml``): power, clocks, throttle reasons,
ECC, retired pages, remapped rows and the PCIe replay counter, read once per GPU at the start
and end of a recording.

Contract:
- ``read_health(nv, handle, index, uuid, ts, phase)`` returns one ``evidence.GpuHealth``
  (``nv`` the pynvml module, ``handle`` its device handle); it never raises: a value NVML
  refuses is None, and ``missing`` says why in a few words (the calls: its docstring).
- ``THROTTLE_REASONS`` names the bits of nvmlClocksEventReasons (nvml.h, "Clocks Event
  Reasons"; the older name was "Clocks Throttle Reasons", same bits); ``throttle_names``
  decodes a mask. ``pci_bus_id`` formats a bus id as nvidia-smi does.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..events.evidence import GpuHealth
from .nvml_common import NVML_CLOCK_SM

__all__ = ["read_health", "THROTTLE_REASONS", "throttle_names", "pci_bus_id"]

NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_FUNCTION_NOT_FOUND = 13
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


def pci_bus_id(domain: int, bus: int, device: int) -> str:
    """The form the driver prints in Xid lines: "0000:18:00"."""
    return f"{domain:04x}:{bus:02x}:{device:02x}"


class _Reader:
    """Calls one NVML function at a time and keeps why a value is missing."""

    def __init__(self, nv: Any, handle: Any) -> None:
        self.nv, self.h = nv, handle
        self.missing: Dict[str, str] = {}

    def get(self, key: str, names: tuple, *args: Any) -> Any:
        """The first of ``names`` that the bindings have, called; None when refused."""
        for name in names:
            fn = getattr(self.nv, name, None)
            if fn is None:
                continue
            try:
                return fn(self.h, *args)
            except Exception as exc:   # NVMLError, or a broken binding: never fail for it
                code = getattr(exc, "value", None)
                if code == NVML_ERROR_FUNCTION_NOT_FOUND:
                    continue
                self.missing[key] = {NVML_ERROR_NOT_SUPPORTED: "not supported",
                                     NVML_ERROR_NO_PERMISSION: "no permission"}.get(
                    code) or (str(exc) or type(exc).__name__)[:80]
                return None
        self.missing[key] = "not in this NVML"
        return None

    def int_(self, key: str, names: tuple, *args: Any) -> Optional[int]:
        v = self.get(key, names, *args)
        return int(v) if isinstance(v, int) and 0 <= v < 1 << 63 else None


def _text(v: Any) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def read_health(nv: Any, handle: Any, index: int, uuid: str, ts: float,
                phase: str) -> GpuHealth:
    """One GPU's health (module doc). A value NVML refuses (not supported on this GPU, no
    permission, a function missing from an old library or bindings) is None, and ``missing`` says
    why: "not supported", "no permission", "not in this NVML", else NVML's own words. The calls are
    nvml.h's through pynvml, which returns the values (NVMLError on a refusal): nvmlDeviceGetName,
    nvmlDeviceGetPciInfo_v3 (or nvmlDeviceGetPciInfo), nvmlDeviceGetPowerUsage,
    nvmlDeviceGetEnforcedPowerLimit, nvmlDeviceGetClockInfo / nvmlDeviceGetMaxClockInfo (SM),
    nvmlDeviceGetCurrentClocksEventReasons (535+) or ...ThrottleReasons, nvmlDeviceGetTemperature
    (GPU), nvmlDeviceGetTotalEccErrors (corrected 0 / uncorrected 1, volatile 0),
    nvmlDeviceGetRetiredPages (single-bit 0 / double-bit 1: a list of addresses),
    nvmlDeviceGetRetiredPagesPendingStatus, nvmlDeviceGetRemappedRows (Ampere and later: corrected,
    uncorrected, pending, failed), nvmlDeviceGetPcieReplayCounter."""
    r = _Reader(nv, handle)
    g = GpuHealth(ts=ts, gpu=index, uuid=uuid, phase=phase)
    name = r.get("name", ("nvmlDeviceGetName",))
    if name is not None:
        g.name = _text(name)[:96]
    pci = r.get("pci_bus", ("nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo"))
    if pci is not None:
        g.pci_bus = pci_bus_id(int(pci.domain), int(pci.bus), int(pci.device))
    g.power_mw = r.int_("power_mw", ("nvmlDeviceGetPowerUsage",))
    g.power_limit_mw = r.int_("power_limit_mw", ("nvmlDeviceGetEnforcedPowerLimit",))
    g.sm_clock_mhz = r.int_("sm_clock_mhz", ("nvmlDeviceGetClockInfo",), NVML_CLOCK_SM)
    g.sm_clock_max_mhz = r.int_("sm_clock_max_mhz", ("nvmlDeviceGetMaxClockInfo",),
                                NVML_CLOCK_SM)
    g.throttle = r.int_("throttle", ("nvmlDeviceGetCurrentClocksEventReasons",
                                     "nvmlDeviceGetCurrentClocksThrottleReasons"))
    g.temperature_c = r.int_("temperature_c", ("nvmlDeviceGetTemperature",),
                             NVML_TEMPERATURE_GPU)
    g.ecc_corrected = r.int_("ecc_corrected", ("nvmlDeviceGetTotalEccErrors",), 0, 0)
    g.ecc_uncorrected = r.int_("ecc_uncorrected", ("nvmlDeviceGetTotalEccErrors",), 1, 0)
    for key, cause in (("retired_sbe", 0), ("retired_dbe", 1)):
        pages = r.get(key, ("nvmlDeviceGetRetiredPages",), cause)
        if pages is not None:
            setattr(g, key, len(pages))
    pending = r.get("retired_pending", ("nvmlDeviceGetRetiredPagesPendingStatus",))
    if pending is not None:
        g.retired_pending = bool(pending)
    rows = r.get("remapped_rows", ("nvmlDeviceGetRemappedRows",))
    if rows is not None and len(rows) == 4:
        g.remapped_corr, g.remapped_unc = int(rows[0]), int(rows[1])
        g.remap_pending, g.remap_failed = bool(rows[2]), bool(rows[3])
    g.pcie_replays = r.int_("pcie_replays", ("nvmlDeviceGetPcieReplayCounter",))
    g.missing = r.missing
    return g
