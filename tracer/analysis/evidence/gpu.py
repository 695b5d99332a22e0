"""GPU health and NVIDIA kernel log lines as evidence (pure; evidence/build.py gathers them).

Contract:
- ``gpu_evidence(table, tree_pids, window)`` -> (gpus, kernel_log, findings). ``gpus``: one dict
  per GPU the tree uses (NVML lists a traced pid on it; every GPU when none does), with the
  mean utilization, power and SM clock over the recording's samples (or the health reading),
  the power limit, throttle reasons, ECC, retired pages, remapped rows and PCIe replays (and
  how many replays happened between the start and end readings).
- Findings: "gpu-busy-low-power", "gpu-busy-computing", "gpu-throttled", "gpu-ecc",
  "gpu-pcie-replays", "xid" (what each means: ``_findings``).
- ``parse_xid(text)`` is pure: "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, ..." -> (bus, code, rest).
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Set, Tuple

from ...gpu.nvml_health import throttle_names
from ..accumulate.gpu import COMPUTE_POWER_FRACTION, LOW_POWER_FRACTION
from .table import EvidenceTable, Finding

__all__ = ["gpu_evidence", "parse_xid", "XID_MEANINGS", "BUSY_UTIL", "LOW_POWER_FRACTION",
           "COMPUTE_POWER_FRACTION"]

BUSY_UTIL = 90
# Meanings from NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors/).
XID_MEANINGS = {
    8: "GPU stopped processing", 13: "graphics engine exception (an illegal access by a kernel)",
    31: "GPU memory page fault (an illegal address in a kernel)",
    43: "GPU stopped processing (a channel was reset)", 45: "preemptive cleanup of a channel",
    46: "GPU stopped processing", 48: "uncorrectable double-bit ECC error",
    61: "internal micro-controller breakpoint", 62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed", 74: "NVLink error",
    79: "GPU has fallen off the bus", 92: "high single-bit ECC error rate",
    94: "contained ECC error", 95: "uncontained ECC error", 109: "context switch timeout",
    119: "GSP RPC timeout", 120: "GSP error", 154: "GPU recovery action changed",
}
_XID = re.compile(r"Xid \((?:PCI:)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})[^)]*\):\s*"
                  r"(\d+),?\s*(.*)")
_HW_THROTTLE = {"hw-slowdown", "hw-thermal-slowdown", "hw-power-brake-slowdown",
                "sw-thermal-slowdown"}


def parse_xid(text: str) -> Optional[Tuple[str, int, str]]:
    m = _XID.search(text)
    if not m:
        return None
    return m.group(1).lower(), int(m.group(2)), m.group(3).strip()


def _mean(values: List[int]) -> Optional[float]:
    return round(sum(values) / len(values), 1) if values else None


def _gpu_entry(gpu: int, table: EvidenceTable) -> Dict[str, Any]:
    phases = table.health.get(gpu, {})
    last = phases.get("end") or phases.get("snapshot") or phases.get("start")
    first = phases.get("start")
    load = table.load.get(gpu)
    e: Dict[str, Any] = {"gpu": gpu, "source": "NVML"}
    if load is not None:
        e.update(util_pct=_mean(load.util), samples=len(load.util),
                 pids=sorted(load.pids), power_w=None if not load.power_mw else
                 round(_mean(load.power_mw) / 1000, 1),    # type: ignore[operator]
                 sm_clock_mhz=_mean(load.clock_mhz))
    if last is not None:
        e.update(uuid=last.uuid, name=last.name, pci_bus=last.pci_bus,
                 power_limit_w=None if last.power_limit_mw is None
                 else round(last.power_limit_mw / 1000, 1),
                 sm_clock_max_mhz=last.sm_clock_max_mhz, throttle=throttle_names(last.throttle),
                 temperature_c=last.temperature_c, ecc_corrected=last.ecc_corrected,
                 ecc_uncorrected=last.ecc_uncorrected, retired_sbe=last.retired_sbe,
                 retired_dbe=last.retired_dbe, retired_pending=last.retired_pending,
                 remapped_corr=last.remapped_corr, remapped_unc=last.remapped_unc,
                 remap_pending=last.remap_pending, remap_failed=last.remap_failed,
                 pcie_replays=last.pcie_replays, missing=dict(last.missing))
        if e.get("power_w") is None and last.power_mw is not None:
            e["power_w"] = round(last.power_mw / 1000, 1)
        if e.get("sm_clock_mhz") is None:
            e["sm_clock_mhz"] = last.sm_clock_mhz
        if first is not None and first is not last and first.pcie_replays is not None \
                and last.pcie_replays is not None:
            e["pcie_replays_window"] = last.pcie_replays - first.pcie_replays
    return e


def _findings(e: Dict[str, Any]) -> List[Finding]:
    """The findings of one GPU: "gpu-busy-low-power" (utilization at or above ``BUSY_UTIL`` while
    drawing less than ``LOW_POWER_FRACTION`` of the power limit: a resident kernel that barely
    computes, i.e. one that waits: a collective waiting for a peer, a spin on a flag),
    "gpu-busy-computing" (busy at ``COMPUTE_POWER_FRACTION`` or more of the limit), "gpu-throttled"
    (hardware or thermal slowdown), "gpu-ecc" (uncorrected ECC errors, a pending or failed row
    remap or page retirement), "gpu-pcie-replays" (the replay counter moved during the window),
    "xid" (one per Xid code seen in the kernel log, with its meaning where known,
    ``XID_MEANINGS``)."""
    out: List[Finding] = []
    g = f"GPU {e['gpu']}"
    pids = list(e.get("pids") or [])
    util, power, limit = e.get("util_pct"), e.get("power_w"), e.get("power_limit_w")
    if util is not None and util >= BUSY_UTIL and power is not None and limit:
        frac = power / limit
        if frac < LOW_POWER_FRACTION:
            out.append(Finding(
                "gpu-busy-low-power", "warn",
                f"{g} at {util:.0f}% utilization draws {power:.0f} W of {limit:.0f} W "
                f"({frac:.0%} of its limit): a kernel occupies it but barely computes, i.e. "
                "a kernel that waits (a collective waiting for a peer, a spin on a flag), "
                "not one doing work", pids, "NVML utilization and power"))
        elif frac >= COMPUTE_POWER_FRACTION:
            out.append(Finding(
                "gpu-busy-computing", "info",
                f"{g} at {util:.0f}% utilization draws {power:.0f} W of {limit:.0f} W "
                f"({frac:.0%}): its kernels are computing", pids, "NVML utilization and power"))
    hw = [t for t in e.get("throttle") or [] if t in _HW_THROTTLE]
    if hw:
        clk = e.get("sm_clock_mhz")
        out.append(Finding("gpu-throttled", "warn",
                           f"{g} clocks are held down by {', '.join(hw)}"
                           + (f" (SM {clk:.0f} of {e.get('sm_clock_max_mhz')} MHz)"
                              if clk is not None else ""), pids, "NVML clock event reasons"))
    bad = []
    if e.get("ecc_uncorrected"):
        bad.append(f"{e['ecc_uncorrected']} uncorrected ECC errors since the driver loaded")
    if e.get("remap_failed"):
        bad.append("a row remapping failed")
    if e.get("remap_pending") or e.get("retired_pending"):
        bad.append("a row remap / page retirement waits for a GPU reset")
    if bad:
        out.append(Finding("gpu-ecc", "warn", f"{g}: " + "; ".join(bad), pids,
                           "NVML ECC, remapped rows, retired pages"))
    if e.get("pcie_replays_window"):
        out.append(Finding("gpu-pcie-replays", "warn",
                           f"{g}: {e['pcie_replays_window']} PCIe replays during the window "
                           f"({e.get('pcie_replays')} in all): a flaky PCIe link", pids,
                           "NVML PCIe replay counter"))
    return out


def _kernel_log(table: EvidenceTable, bus_to_gpu: Dict[str, int]
                ) -> Tuple[Dict[str, Any], List[Finding]]:
    k = table.kernel_log
    if k is None:
        return {}, []
    xids, other = [], []
    for ts, text in k.lines:
        x = parse_xid(text)
        if x is None:
            other.append({"ts": ts, "text": text})
            continue
        bus, code, rest = x
        xids.append({"ts": ts, "pci_bus": bus, "gpu": bus_to_gpu.get(bus), "xid": code,
                     "meaning": XID_MEANINGS.get(code, ""), "text": rest})
    out = {"source": k.source, "since": k.since, "scanned": k.scanned, "why": k.why,
           "xids": xids, "other": other}
    findings = []
    by_code: Dict[int, List[Dict[str, Any]]] = {}
    for x in xids:
        by_code.setdefault(x["xid"], []).append(x)
    for code, items in sorted(by_code.items()):
        gpus = sorted({f"GPU {x['gpu']}" if x["gpu"] is not None else x["pci_bus"]
                       for x in items})
        meaning = XID_MEANINGS.get(code)
        findings.append(Finding(
            "xid", "warn", f"Xid {code}" + (f" ({meaning})" if meaning else "")
            + f" on {', '.join(gpus)}: {len(items)} time(s) since the oldest traced process "
            f"started; last: {items[-1]['text'][:120]}", [], f"{k.source} (NVRM)"))
    for o in other:
        findings.append(Finding("nvrm", "warn", f"kernel log: {o['text'][:160]}", [],
                                f"{k.source} (NVRM)"))
    return out, findings


def gpu_evidence(table: EvidenceTable, tree: Set[int],
                 window: Optional[Tuple[float, float]]
                 ) -> Tuple[List[Dict[str, Any]], Dict[str, Any], List[Finding]]:
    """(gpus, kernel_log, findings) (module doc)."""
    all_gpus = sorted(set(table.health) | set(table.load))
    used = [g for g in all_gpus if table.load.get(g) and table.load[g].pids & tree]
    entries = [_gpu_entry(g, table) for g in (used or all_gpus)]
    findings: List[Finding] = []
    for e in entries:
        if used or len(all_gpus) == 1:
            findings.extend(_findings(e))
    bus_to_gpu = {}
    for g in all_gpus:
        h = next(iter(table.health.get(g, {}).values()), None)
        if h is not None and h.pci_bus:
            bus_to_gpu[h.pci_bus.lower()] = g
    klog, kfind = _kernel_log(table, bus_to_gpu)
    return entries, klog, findings + kfind
