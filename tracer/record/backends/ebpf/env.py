"""What the eBPF backend needs of the machine, and how its program is compiled.

Contract:
- ``ebpf_problem()``: None when the program can load here, else one line saying why (root or
  CAP_BPF+CAP_PERFMON, BCC importable, kernel headers, tracefs: mounted by
  tracer/linux/tracefs.py when missing and we may). It imports ``bcc`` to check it.
- ``compile_flags()``: BCC's cflags for bpf/hangtrace.bpf.c on this machine (the pid arrays
  sized from kernel.pid_max, futex command masks from tracer/linux/futex.py, group_dead when
  the running kernel's sched_process_exit has it).
"""
from __future__ import annotations

import os
from typing import List, Optional

from ....linux.tracefs import TRACEFS_DIRS, ensure_tracefs, find_tracefs
from . import layout as L

__all__ = ["ebpf_problem", "bcc_problem", "compile_flags", "CFLAGS"]

_CAP_SYS_ADMIN, _CAP_PERFMON, _CAP_BPF = 21, 38, 39
# BCC compiles against /lib/modules/$(uname -r)/build, possibly another kernel's headers (6.1
# headers on 6.18): silence what their macros trigger with BCC's clang.
CFLAGS = ["-Wno-macro-redefined", "-Wno-unknown-warning-option",
          "-Wno-duplicate-decl-specifier",
          "-Wno-address-of-packed-member", "-Wno-unused-value", "-Wno-pointer-sign",
          "-Wno-compare-distinct-pointer-types", "-Wno-gnu-variable-sized-type-not-at-end"]


def _cap_eff() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


def _pid_max() -> int:
    """Size of the pid-indexed arrays: every pid is below kernel.pid_max."""
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            return max(1024, min(int(f.read()), 4194304))
    except (OSError, ValueError):
        return 4194304   # PID_MAX_LIMIT on 64-bit


def _admin() -> bool:
    return os.geteuid() == 0 or bool(_cap_eff() >> _CAP_SYS_ADMIN & 1)


def bcc_problem(what: str = "eBPF") -> Optional[str]:
    """Why BCC cannot load a program here (one line, naming ``what`` needs it), or None: the
    privileges, BCC itself, kernel headers. Shared by the eBPF and the CUDA uprobe backends."""
    caps = _cap_eff()
    if not _admin() and not (caps >> _CAP_BPF & 1 and caps >> _CAP_PERFMON & 1):
        return f"{what} needs root (or CAP_BPF and CAP_PERFMON): run with sudo"
    try:
        import bcc  # noqa: F401  (imported here only: see the module doc)
    except Exception as e:  # ImportError, or a broken libbcc
        return (f"BCC is not importable ({type(e).__name__}): apt install bpfcc-tools "
                "python3-bpfcc (see scripts/setup-ebpf.sh)")
    build = f"/lib/modules/{os.uname().release}/build"
    if not os.path.exists(build):
        return (f"no kernel headers at {build}: apt install linux-headers-$(uname -r) "
                "(or run scripts/setup-ebpf.sh)")
    return None


def ebpf_problem() -> Optional[str]:
    """Why the eBPF backend cannot load here (one line), or None."""
    why = bcc_problem("eBPF")
    if why:
        return why
    found, why = ensure_tracefs(may_mount=_admin())
    if found is None:
        return why
    if not L.PROGRAM.exists():
        return f"BPF program missing: {L.PROGRAM}"
    return None


def compile_flags() -> List[str]:
    wait_mask, wake_mask = L.futex_masks()
    cflags = ["-I" + str(L.BPF_DIR), *CFLAGS, f"-DHT_PID_MAX={_pid_max()}",
              f"-DHT_FUTEX_WAIT_MASK={wait_mask}", f"-DHT_FUTEX_WAKE_MASK={wake_mask}"]
    tfs = find_tracefs() or TRACEFS_DIRS[0]
    try:
        with open(f"{tfs}/events/sched/sched_process_exit/format") as f:
            if "group_dead" in f.read():
                cflags.append("-DHT_HAVE_GROUP_DEAD")
    except OSError:
        pass
    return cflags
