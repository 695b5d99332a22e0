"""``hangtrace doctor`` inside a container: hangtrace's pid namespace, its capabilities, and
what each backend sees from there, with the flag or pod setting that allows what is missing.
Root in a container is not root on the host (Docker's default capabilities lack CAP_BPF,
CAP_PERFMON, CAP_SYS_ADMIN, CAP_SYS_PTRACE; a rootless container's user namespace gives the
kernel none): these facts read CapEff and the namespaces' inodes, never the euid.

Contract:
- ``namespace_facts()`` -> {"pid_namespace", "capabilities"}: doctor's facts ({"ok", "detail",
  "fix"} plus "host", "inode", "ns_pid_helper"; "effective"). ``backend_sees(name)``: one line,
  whose processes backend ``name`` records from here. ``CONTAINER_CAPS_FIX``: how to grant the
  capabilities. Reads /proc and probes libbpf only; never raises.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from ..linux.pidns import pid_view

__all__ = ["namespace_facts", "backend_sees", "CONTAINER_CAPS_FIX", "cap_names"]

INIT_USER_NS_INO = 0xEFFFFFFD          # PROC_USER_INIT_INO
_CAPS = {"CAP_SYS_PTRACE": 19, "CAP_SYS_ADMIN": 21, "CAP_PERFMON": 38, "CAP_BPF": 39}
_BPF_PROG_TYPE_KPROBE, _BPF_FUNC_GET_NS_CURRENT_PID_TGID = 2, 120
CONTAINER_CAPS_FIX = ("grant CAP_BPF and CAP_PERFMON (eBPF) and CAP_SYS_PTRACE (strace, "
                      "py-spy): docker run --cap-add BPF --cap-add PERFMON --cap-add "
                      "SYS_PTRACE (--pid=container:NAME to share a container's processes); a "
                      "pod: securityContext.capabilities.add [BPF, PERFMON, SYS_PTRACE] and "
                      "shareProcessNamespace: true (kubectl debug --profile=sysadmin); on a "
                      "kernel before 5.8, CAP_SYS_ADMIN instead of BPF and PERFMON")


def _status_field(name: str) -> str:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def cap_names(mask: int) -> List[str]:
    """The capabilities hangtrace's checks care about, of a CapEff mask."""
    return [n for n, bit in _CAPS.items() if mask >> bit & 1]


def _ns_ino(kind: str) -> Optional[int]:
    try:
        return os.stat(f"/proc/self/ns/{kind}").st_ino
    except OSError:
        return None


def _ns_helper() -> Optional[bool]:
    """Whether the kernel has bpf_get_ns_current_pid_tgid (5.7+), asked of libbpf; None when
    libbpf is missing or may not probe (no privilege)."""
    try:
        from .backends.ebpf import libbpf
        rc = libbpf.library().libbpf_probe_bpf_helper(_BPF_PROG_TYPE_KPROBE,
                                                      _BPF_FUNC_GET_NS_CURRENT_PID_TGID, None)
    except Exception:  # noqa: BLE001 - doctor never raises: LibbpfMissing, OSError
        return None
    return rc == 1 if rc >= 0 else None


def _pid_namespace() -> Dict[str, Any]:
    view = pid_view()
    helper = _ns_helper() if not view.host else None
    fact: Dict[str, Any] = {"host": view.own_host, "inode": view.own_ino,
                            "ns_pid_helper": helper}
    if not view.known and not view.proc_is_own:
        detail = (f"hangtrace runs in pid namespace {view.own_ino}, but /proc is an outer "
                  "namespace's, whose pid 1 is hidden from here: pids are read and given as "
                  "/proc numbers them, and eBPF numbers them as the host does")
        ok, fix = False, ("mount this namespace's /proc (unshare --pid --fork --mount-proc; a "
                          "container has its own), or run hangtrace on the host")
    elif not view.known:
        detail, ok = "/proc/1/ns/pid is unreadable: which pids /proc shows is unknown", False
        fix = "run as root"
    elif not view.proc_is_own:
        detail = (f"hangtrace runs in pid namespace {view.own_ino}, but /proc is another's "
                  f"({'the host' if view.host else view.ino}): pids are read and given as "
                  "/proc numbers them")
        ok, fix = True, ""
    elif view.own_host:
        detail, ok, fix = "the host's (the init pid namespace): pids are the host's", True, ""
    else:
        have = ("bpf_get_ns_current_pid_tgid available: eBPF numbers pids as this namespace"
                if helper else "bpf_get_ns_current_pid_tgid not available (kernel before "
                "5.7): eBPF cannot number pids as this namespace" if helper is False else
                "the eBPF ns-pid helper could not be probed (no libbpf or no privilege)")
        detail = (f"a container's (pid namespace {view.own_ino}, not the host's): every "
                  "backend sees this namespace's processes and numbers them as it does, not "
                  f"the host's, nor those of namespaces nested below it; {have}")
        ok = helper is not False
        fix = "" if ok else "run hangtrace on the host and attach by the host pid, or -b proc"
    return {**fact, "ok": ok, "detail": detail, "fix": fix if not ok else ""}


def _capabilities() -> Dict[str, Any]:
    try:
        mask = int(_status_field("CapEff") or "0", 16)
    except ValueError:
        mask = 0
    have = cap_names(mask)
    user_ns = _ns_ino("user")
    foreign_user = user_ns is not None and user_ns != INIT_USER_NS_INO
    ebpf = "CAP_SYS_ADMIN" in have or {"CAP_BPF", "CAP_PERFMON"} <= set(have)
    missing = [n for n in ("CAP_BPF", "CAP_PERFMON", "CAP_SYS_PTRACE") if n not in have]
    if "CAP_SYS_ADMIN" in have:
        missing = [n for n in missing if n == "CAP_SYS_PTRACE"]
    detail = "effective: " + (", ".join(have) or "none of CAP_BPF, CAP_PERFMON, "
                              "CAP_SYS_PTRACE, CAP_SYS_ADMIN")
    if foreign_user:
        detail += ("; in a user namespace other than the host's (a rootless container): "
                   "its capabilities do not reach the kernel's eBPF")
    if missing:
        detail += "; missing: " + ", ".join(missing)
    ok = ebpf and not foreign_user and not missing
    fix = ("run hangtrace in the host's user namespace (a rootful container or the host)"
           if foreign_user else CONTAINER_CAPS_FIX)
    return {"ok": ok, "detail": detail, "fix": "" if ok else fix, "effective": have}


def namespace_facts() -> Dict[str, Dict[str, Any]]:
    """The pid namespace and capability facts (module doc)."""
    return {"pid_namespace": _pid_namespace(), "capabilities": _capabilities()}


def backend_sees(name: str) -> str:
    """What backend ``name`` records from here: the processes of the pid namespace /proc
    shows, numbered as it does."""
    view = pid_view()
    where = "the host's processes" if view.host else \
        f"the processes of pid namespace {view.ino} (a container's)"
    if name == "ebpf":
        return (f"{where}, pids as /proc numbers them" + ("" if view.host else
                " (bpf_get_ns_current_pid_tgid; a namespace nested below it is not seen)"))
    if name == "strace":
        return f"{where} that ptrace may attach to"
    return f"{where}, sampled through /proc"
