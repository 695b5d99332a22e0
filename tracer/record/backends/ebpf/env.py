"""What the eBPF backend needs of the machine, per loader, and how BCC compiles the program.

Contract (each function's docstring says what it checks):
- ``core_problem(objects)``: None when libbpf can load the CO-RE objects bpf/NAME.bpf.o here.
- ``bcc_problem(what)``: None when BCC can compile and load here, else one line naming
  ``what`` needs it.
- ``loader_problems(names, objects)`` -> {loader: None, or one line why not}; ``choose(names,
  objects)`` -> (the first loader that can, and why the ones before it cannot), or (None, the
  reasons); ``describe_loader(name)``: "libbpf 1.1.2 (CO-RE object)", "BCC ...".
- ``ebpf_problem(loaders)``: None when the loader ``--backend ebpf`` would use can load.
- ``compile_flags()``: BCC's cflags; ``pid_max()``, ``settings()``: what both loaders put into
  the program. Nothing here loads a program: the checks are cheap.
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence, Tuple

from ....linux.pidns import pid_view
from ....linux.tracefs import TRACEFS_DIRS, ensure_tracefs, find_tracefs
from . import layout as L
from .loader import LOADERS, preferred
from .source import BPF_DIR, object_path

__all__ = ["ebpf_problem", "bcc_problem", "core_problem", "compile_flags", "CFLAGS",
           "pid_max", "settings", "setting_flags", "BCC_PIDNS", "BTF_VMLINUX", "privilege_problem", "loader_problems",
           "choose", "describe_loader", "TRACEPOINT_COST"]

_CAP_SYS_ADMIN, _CAP_PERFMON, _CAP_BPF = 21, 38, 39
# What a syscall tracepoint costs the rest of the machine (doctor and README say it; measured
# with bench/overhead.py, mode "bystander": an untraced sysloop while hangtrace records another
# process; bench/results/overhead-vm.txt, two series on the 2-core development VM, 2026-12-01).
TRACEPOINT_COST = ("while the eBPF backend records, the syscall tracepoint slows every "
                   "process on the machine, not only the traced tree: every syscall takes "
                   "the kernel's slow path and runs the program's tgid check. Measured "
                   "(bench/overhead.py, 2-core VM, kernel 6.18): an untraced loop of cheap "
                   "syscalls ran 1.38-1.44x its CPU time, about 0.14 us more per syscall; "
                   "processes that make few syscalls pay little.")
BTF_VMLINUX = "/sys/kernel/btf/vmlinux"
_BPF_MAP_TYPE_RINGBUF, _BPF_PROG_TYPE_RAW_TRACEPOINT = 27, 17
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


def pid_max() -> int:
    """Size of the pid-indexed arrays: every pid is below kernel.pid_max."""
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            return max(1024, min(int(f.read()), 4194304))
    except (OSError, ValueError):
        return 4194304   # PID_MAX_LIMIT on 64-bit


def settings(name: str = "hangtrace") -> Dict[str, int]:
    """The HT_SETTING values of bpf/NAME.bpf.c (ht_dialect.bpf.h): every program numbers pids
    as hangtrace's /proc does (bpf/ht_pidns.bpf.h, linux/pidns.py); hangtrace.bpf.c also
    takes the futex commands."""
    out = pid_view().bpf_settings()
    if name == "hangtrace":
        wait_mask, wake_mask = L.futex_masks()
        out.update(futex_wait_mask=wait_mask, futex_wake_mask=wake_mask)
    return out


# BCC's fork trace event gives the child's host pid, which a program inside another pid
# namespace cannot number (the CO-RE object reads struct pid: bpf/ht_pidns.bpf.h).
BCC_PIDNS = ("BCC cannot number a new child in this pid namespace (a container's: its fork "
             "event gives the host's pid): the CO-RE object can (python scripts/build_bpf.py, "
             "or the wheel that ships it); or -b proc / -b strace")


def _admin() -> bool:
    """CAP_SYS_ADMIN in effect: root on the host has it, root in a container (Docker's
    default capabilities) does not, whatever its euid."""
    return bool(_cap_eff() >> _CAP_SYS_ADMIN & 1)


_INIT_USER_NS_INO = 0xEFFFFFFD       # PROC_USER_INIT_INO


def _foreign_user_ns() -> bool:
    """In a user namespace other than the host's (a rootless container): its capabilities
    give no eBPF."""
    try:
        return os.stat("/proc/self/ns/user").st_ino != _INIT_USER_NS_INO
    except OSError:
        return False


def privilege_problem(what: str = "eBPF") -> Optional[str]:
    """Why this process may not load BPF programs (one line), or None: it needs CAP_BPF and
    CAP_PERFMON (or CAP_SYS_ADMIN) in the host's user namespace; root in a container may lack
    them (record/doctor_ns.py says how to grant them)."""
    caps = _cap_eff()
    if _foreign_user_ns():
        return (f"{what} needs the host's user namespace: this is a rootless container's, "
                "whose capabilities do not reach the kernel's BPF")
    if not _admin() and not (caps >> _CAP_BPF & 1 and caps >> _CAP_PERFMON & 1):
        if os.geteuid() == 0:
            return (f"{what} needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN), which this root "
                    "lacks (as in a container): docker run --cap-add BPF --cap-add PERFMON, or a "
                    "pod's securityContext.capabilities.add [BPF, PERFMON]")
        return f"{what} needs root (or CAP_BPF and CAP_PERFMON): run with sudo"
    return None


def bcc_problem(what: str = "eBPF") -> Optional[str]:
    """Why BCC cannot load a program here (one line, naming ``what`` needs it), or None: the
    privileges, BCC itself, kernel headers. Shared by the eBPF and the CUDA uprobe backends.
    It needs the privileges, BCC importable and kernel headers."""
    why = privilege_problem(what)
    if why:
        return why
    try:
        import bcc  # noqa: F401  (imported here only: see the module doc)
    except Exception as e:  # ImportError, or a broken libbcc
        from ....install import bcc_fix
        return f"BCC is not importable ({type(e).__name__}): {bcc_fix()}"
    build = f"/lib/modules/{os.uname().release}/build"
    if not os.path.exists(build):
        from ....install import bcc_fix
        return f"no kernel headers at {build}: {bcc_fix()}"
    return None


def core_problem(objects: Sequence[str] = ("hangtrace",), what: str = "eBPF") -> Optional[str]:
    """Why libbpf cannot load the CO-RE objects bpf/NAME.bpf.o here, or None. It needs root or
    CAP_BPF+CAP_PERFMON; libbpf.so.1 >= 1.0; the kernel's BTF at /sys/kernel/btf/vmlinux; BPF raw
    tracepoints and the ring buffer, probed through libbpf; the objects built
    (scripts/build_bpf.py)."""
    why = privilege_problem(what)
    if why:
        return why
    from . import libbpf
    try:
        lib = libbpf.library()
    except libbpf.LibbpfMissing as exc:
        return str(exc)
    if not os.path.exists(BTF_VMLINUX):
        return (f"no kernel BTF ({BTF_VMLINUX}): CO-RE needs a kernel built with "
                "CONFIG_DEBUG_INFO_BTF=y")
    if lib.libbpf_probe_bpf_prog_type(_BPF_PROG_TYPE_RAW_TRACEPOINT, None) != 1:
        return "the kernel has no BPF raw tracepoints (4.17+)"
    if lib.libbpf_probe_bpf_map_type(_BPF_MAP_TYPE_RINGBUF, None) != 1:
        return "the kernel has no BPF ring buffer (5.8+)"
    for name in objects:
        if not object_path(name).exists():
            from ....install import core_objects_fix
            return f"{object_path(name)} not built: {core_objects_fix()}"
    return None


def loader_problems(names: Sequence[str] = LOADERS,
                    objects: Sequence[str] = ("hangtrace",)) -> Dict[str, Optional[str]]:
    """Why each loader cannot load ``objects`` here (None: it can)."""
    out: Dict[str, Optional[str]] = {}
    for name in names:
        if name == "libbpf":
            out[name] = core_problem(objects)
        elif name == "bcc":
            out[name] = bcc_problem()
            if out[name] is None and "hangtrace" in objects and not pid_view().host:
                out[name] = BCC_PIDNS
        else:
            out[name] = f"unknown eBPF loader {name!r} (libbpf, bcc)"
    return out


def describe_loader(name: str) -> str:
    if name == "libbpf":
        from . import libbpf
        return f"libbpf {libbpf.version()} (CO-RE object)"
    return "BCC (compiled at attach)"


def choose(names: Optional[Sequence[str]] = None,
           objects: Sequence[str] = ("hangtrace",)) -> Tuple[Optional[str], str]:
    """(the first loader of ``names`` that can load here, why), or (None, why none can).
    ``names`` defaults to loader.preferred(); the line names the loader chosen and why the ones
    before it cannot."""
    names = tuple(names or preferred())
    problems: Dict[str, Optional[str]] = {}
    for i, name in enumerate(names):       # in order, the later ones asked only if needed
        problems.update(loader_problems((name,), objects))   # (BCC's import takes 70 ms)
        if problems[name] is None:
            before = [f"{n}: {problems[n]}" for n in names[:i]]
            return name, describe_loader(name) + (f" (not {'; '.join(before)})"
                                                  if before else "")
    if len(names) == 1:
        return None, str(problems[names[0]])
    return None, "; ".join(f"{n}: {problems[n]}" for n in names)


def ebpf_problem(loaders: Optional[Sequence[str]] = None,
                 objects: Sequence[str] = ("hangtrace",)) -> Optional[str]:
    """Why ``objects`` cannot load here with ``loaders`` (default: loader.preferred()), one
    line, or None.
    For BCC also tracefs (its trace events need it: mounted by tracer/linux/tracefs.py when missing
    and we may). It imports ``bcc`` only to check it."""
    name, why = choose(loaders, objects)
    if name is None:
        return why
    if name == "bcc":
        found, twhy = ensure_tracefs(may_mount=_admin())
        if found is None:
            return twhy
    return None


def setting_flags(name: str) -> List[str]:
    """bpf/NAME.bpf.c's settings as BCC's -D flags."""
    return [f"-DHT_SET_{key}={value}" for key, value in settings(name).items()]


def compile_flags() -> List[str]:
    """BCC's cflags for bpf/hangtrace.bpf.c on this machine: the pid arrays sized from
    kernel.pid_max, the settings of ht_dialect.bpf.h as -D flags, group_dead when the running
    kernel's sched_process_exit has it."""
    cflags = ["-I" + str(BPF_DIR), *CFLAGS, "-DHT_BCC", f"-DHT_PID_MAX={pid_max()}"]
    cflags += setting_flags("hangtrace")
    tfs = find_tracefs() or TRACEFS_DIRS[0]
    try:
        with open(f"{tfs}/events/sched/sched_process_exit/format") as f:
            if "group_dead" in f.read():
                cflags.append("-DHT_HAVE_GROUP_DEAD")
    except OSError:
        pass
    return cflags
