"""``hangtrace doctor``: what this machine allows a tracer to do, and what to install.

Contract:
- ``doctor_facts()`` -> dict (JSON-ready, for tests and ``--json``; tracer/data/doctor.schema.json):
  ``format`` (``FORMAT``), ``version``, ``kernel``, ``root``, one entry per capability, each
  ``{"ok": bool, "detail": str, "fix": str}`` ("fix" empty when ok), plus "backends":
  which backends can run (ebpf, strace, proc) and why not; the other facts: its docstring.
  It loads none of hangtrace's programs, changes nothing and never raises.
- ``run_doctor(console)`` prints the facts as a table (``console`` is a rich Console or any
  object with ``print``; every line goes through render/markup.escape) and returns 0 when at
  least one syscall backend (ebpf or strace) can run, else 1.
"""
from __future__ import annotations

import glob
import os
import shutil
from typing import Any, Dict

__all__ = ["doctor_facts", "run_doctor", "FORMAT"]

FORMAT = "hangtrace.doctor/1"

def _deb_workaround() -> str:
    """The headers fix where Debian has no package for the running kernel."""
    from ..install import install_kind
    how = ("scripts/setup-ebpf.sh does it" if install_kind() == "checkout" else
           "as hangtrace's scripts/setup-ebpf.sh does")
    return ("no linux-headers package for this kernel: apt install linux-headers-amd64 and link "
            f"/lib/modules/$(uname -r)/build and /source to its trees ({how})")


PRIVILEGE_FIX = ("run as root (sudo hangtrace ...), or with the capabilities CAP_BPF and "
                 "CAP_PERFMON (eBPF) and CAP_SYS_PTRACE (strace, other users' /proc)")
_TRACEFS_FIX = ("run as root: tracefs is mounted but only root may read it (mode 0700; "
                "CAP_DAC_OVERRIDE also opens it)")


def _fact(ok: bool, detail: str, fix: str = "") -> Dict[str, Any]:
    return {"ok": bool(ok), "detail": detail, "fix": "" if ok else fix}


def _denied(detail: str, fix: str) -> Dict[str, Any]:
    """A check that failed for lack of privilege (listed in the "privilege" fact)."""
    return {**_fact(False, detail, fix), "_denied": True}


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _bpf_syscall() -> Dict[str, Any]:
    unpriv = _read("/proc/sys/kernel/unprivileged_bpf_disabled")
    if not os.path.exists("/proc/sys/kernel/bpf_stats_enabled") and not unpriv:
        return _fact(False, "kernel built without CONFIG_BPF_SYSCALL",
                     "use a kernel with CONFIG_BPF_SYSCALL=y")
    from .backends.ebpf.env import privilege_problem    # capabilities, not the euid
    why = privilege_problem("bpf()")
    if why is None:
        return _fact(True, "bpf() available")
    return _denied(f"bpf() available (unprivileged_bpf_disabled={unpriv or '?'}); {why}",
                   PRIVILEGE_FIX)


def _kmsg() -> Dict[str, Any]:
    """Whether the kernel log (NVRM Xid lines) can be read: opened, never read here."""
    try:
        os.close(os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK))
    except PermissionError as exc:
        return _denied(f"/dev/kmsg: {exc.strerror}",
                       "run as root (or with CAP_SYSLOG when kernel.dmesg_restrict=1)")
    except OSError as exc:
        return _fact(False, f"/dev/kmsg: {exc.strerror}",
                     "run as root (or with CAP_SYSLOG when kernel.dmesg_restrict=1)")
    return _fact(True, "/dev/kmsg readable")


def _libbpf() -> Dict[str, Any]:
    from .backends.ebpf import libbpf
    try:
        libbpf.library()
    except libbpf.LibbpfMissing as exc:
        return _fact(False, str(exc), "apt install libbpf1 (or set $HANGTRACE_LIBBPF to a "
                     "libbpf.so.1)")
    from .backends.ebpf.source import object_path
    from ..install import core_objects_fix
    missing = [n for n in ("hangtrace", "cuda_calls") if not object_path(n).exists()]
    detail = f"libbpf {libbpf.version()} ({libbpf.path()})"
    if missing:
        return _fact(False, detail + "; not built: " + ", ".join(
            str(object_path(n)) for n in missing),
            core_objects_fix())
    return _fact(True, detail + f"; CO-RE objects in {object_path('hangtrace').parent}")


def _ebpf_loader() -> Dict[str, Any]:
    """Which loader --backend ebpf uses here, and why not the other (one line)."""
    from .backends.ebpf.env import loader_problems
    from ..install import bcc_fix, core_objects_fix
    problems = loader_problems()
    works = [n for n, why in problems.items() if why is None]
    if not works:
        return _fact(False, "; ".join(f"{n}: {why}" for n, why in problems.items()),
                     "for libbpf: root, a kernel with BTF, libbpf1 and the built objects "
                     f"({core_objects_fix()}); for BCC: {bcc_fix()}")
    if works[0] == "libbpf":
        from .backends.ebpf import libbpf
        line = (f"libbpf {libbpf.version()}: loads the CO-RE objects here (BTF relocations, "
                "no compiler at attach)")
    else:
        line = "BCC: compiles the program at attach (LLVM and kernel headers)"
    others = [f"{n}: {why}" if why else f"{n} also works" for n, why in problems.items()
              if n != works[0]]
    return _fact(True, line + (f"; {'; '.join(others)}" if others else ""))


def doctor_facts() -> Dict[str, Any]:
    """The facts (module doc). ``compiled_helpers`` says whether the strace importer and trace
    reader run their compiled helpers or the pure-Python path; "privilege" is one fact for the
    checks that failed for lack of privilege (their names in "denied", each such fact's fix says
    what to run: root, or the capabilities), never a kernel to rebuild for them: as ``nobody``,
    tracefs is mounted but 0700 root, not "not mounted". "ebpf_loader" says in one line which eBPF
    loader works here (libbpf with the CO-RE objects, else BCC) and why the other does not;
    "ebpf_cost" says what a syscall tracepoint costs every process on the machine (the figure
    bench/overhead.py measured on an untraced bystander). It reads files, looks for programs and
    opens libbpf (whose feature probes create and close a tiny map and program); it loads none of
    hangtrace's programs, changes nothing and never raises. "pid_namespace" and "capabilities"
    (record/doctor_ns.py) say, in a container, whose processes the backends see and which
    capabilities are missing, with the docker flag or pod setting; each backend's "sees" says
    what it records from here."""
    from .backends.ebpf.backend import ebpf_problem
    from .backends.ebpf.env import TRACEPOINT_COST
    from .backends.strace_backend import ptrace_problem
    from .. import __version__
    from ..strace import fastpath
    rel = os.uname().release
    facts: Dict[str, Any] = {"format": FORMAT, "version": __version__, "kernel": rel,
                             "root": os.geteuid() == 0}
    facts["bpf_syscall"] = _bpf_syscall()
    btf = os.path.exists("/sys/kernel/btf/vmlinux")
    facts["btf"] = _fact(btf, "/sys/kernel/btf/vmlinux" + (" present" if btf else " missing"),
                         "a kernel with CONFIG_DEBUG_INFO_BTF=y (the CO-RE loader needs it; "
                         "BCC does not)")
    facts.update(_tracefs_facts())
    scope = _read("/proc/sys/kernel/yama/ptrace_scope")
    why = ptrace_problem()
    ptrace_detail = f"yama ptrace_scope={scope or 'none'}"
    facts["ptrace"] = _fact(True, ptrace_detail) if why is None else \
        _denied(ptrace_detail, why) if "needs root" in why else _fact(False, ptrace_detail, why)
    st = shutil.which("strace")
    facts["strace"] = _fact(bool(st), st or "not installed", "apt install strace")
    try:
        import importlib.util
        bcc = importlib.util.find_spec("bcc") is not None
    except (ImportError, ValueError):
        bcc = False
    facts["libbpf"] = _libbpf()
    facts["bcc"] = _fact(bcc, "python bcc importable" if bcc else "python bcc missing",
                         "apt install bpfcc-tools python3-bpfcc (venv with "
                         "--system-site-packages); only needed without libbpf")
    build = f"/lib/modules/{rel}/build"
    hdr = os.path.exists(build)
    link = os.path.realpath(build) if hdr else ""
    facts["kernel_headers"] = _fact(hdr, f"{build} -> {link}" if hdr else f"{build} missing",
                                    f"apt install linux-headers-{rel}; if there is none: "
                                    + _deb_workaround())
    nv = sorted(glob.glob("/dev/nvidia[0-9]*"))
    facts["nvidia"] = _fact(bool(nv), ", ".join(nv) or "no /dev/nvidia* devices",
                            "only needed to trace GPU servers")
    from .pystacks import NOT_INSTALLED, find_py_spy   # where the report looks for it
    spy = find_py_spy()
    facts["py_spy"] = _fact(bool(spy), spy or NOT_INSTALLED.split(" (")[0],
                            "pip install 'hangtrace[stacks]' (or set $HANGTRACE_PY_SPY)")
    facts["kmsg"] = _kmsg()
    from .doctor_ns import backend_sees, namespace_facts   # a container's view (issue 42)
    facts.update(namespace_facts())
    facts["ebpf_loader"] = _ebpf_loader()
    facts["ebpf_cost"] = TRACEPOINT_COST
    facts["compiled_helpers"] = _fact(fastpath.compiled() is not None, fastpath.status(),
                                      "reinstall with a C compiler and Python's headers "
                                      "(apt install gcc python3-dev); the pure-Python path "
                                      "gives the same results, slower")
    from .backends.ebpf.env import privilege_problem
    if not facts["ebpf_loader"]["ok"] and privilege_problem() is not None:
        facts["ebpf_loader"]["_denied"] = True
    ebpf_why = ebpf_problem()
    facts["backends"] = {
        "ebpf": {"ok": ebpf_why is None, "why": ebpf_why or "",
                 "loader": _loader_used() if ebpf_why is None else ""},
        "strace": {"ok": bool(st) and why is None,
                   "why": "" if st and why is None else (why or "strace not installed")},
        "proc": {"ok": os.path.isdir("/proc/self"), "why": ""},
    }
    for name, b in facts["backends"].items():
        b["sees"] = backend_sees(name)
    return _with_privilege(facts)


def _tracefs_facts() -> Dict[str, Dict[str, Any]]:
    """tracefs and what is read through it: missing, or there but root's only (``doctor_facts``)."""
    from ..linux.tracefs import TRACEFS_DIRS, mounted_tracefs
    tfs = next((d for d in TRACEFS_DIRS if os.path.isdir(os.path.join(d, "events"))), None)
    mounted = mounted_tracefs() if tfs is None else tfs
    if tfs is None and mounted is not None and not os.access(mounted, os.R_OK | os.X_OK):
        why = f"{mounted}: mounted, not readable by uid {os.geteuid()} (permission denied)"
        return {"tracefs": _denied(why, _TRACEFS_FIX),
                **{k: _denied(f"not readable without privilege ({mounted} is root's)",
                              PRIVILEGE_FIX) for k in ("tracepoints", "kprobes", "uprobes")}}
    out = {"tracefs": _fact(tfs is not None, tfs or "not mounted",
                            "mount -t tracefs nodev /sys/kernel/tracing")}
    tp = [t for t in ("raw_syscalls/sys_enter", "sched/sched_switch", "sched/sched_process_fork")
          if tfs and os.path.isdir(f"{tfs}/events/{t}")]
    out["tracepoints"] = _fact(len(tp) == 3, ", ".join(tp) or "none found",
                               "a kernel with CONFIG_FTRACE_SYSCALLS and sched tracepoints")
    kp = bool(tfs) and os.path.exists(f"{tfs}/kprobe_events")
    out["kprobes"] = _fact(kp, "kprobe_events " + ("present" if kp else "absent"),
                           "CONFIG_KPROBE_EVENTS (hangtrace does not need kprobes)")
    up = bool(tfs) and os.path.exists(f"{tfs}/uprobe_events")
    out["uprobes"] = _fact(up, "uprobe_events " + ("present" if up else "absent"),
                           "CONFIG_UPROBE_EVENTS")
    return out


def _with_privilege(facts: Dict[str, Any]) -> Dict[str, Any]:
    """The "privilege" fact and "denied" list from the checks marked denied (``doctor_facts``)."""
    denied = [k for k, f in facts.items() if isinstance(f, dict) and f.pop("_denied", False)]
    facts["denied"] = denied
    facts["privilege"] = _fact(not denied, "failed for lack of privilege: " + ", ".join(denied)
                               if denied else "every check ran with the privilege it needs",
                               PRIVILEGE_FIX)
    return facts


def _loader_used() -> str:
    from .backends.ebpf.env import choose, describe_loader
    name, _ = choose()
    return describe_loader(name) if name else ""


def run_doctor(console: Any) -> int:
    from ..render.markup import escape
    facts = doctor_facts()

    def say(text: str) -> None:
        console.print(escape(text))
    say(f"kernel {facts['kernel']}, running as "
        f"{'root' if facts['root'] else 'uid ' + str(os.geteuid())}")
    for key, f in facts.items():
        if not isinstance(f, dict) or "ok" not in f:
            continue
        mark = "ok  " if f["ok"] else ("PERM" if key in facts["denied"] else "MISS")
        say(f"  {mark} {key:<17} {f['detail']}")
        if f["fix"]:
            say(f"       -> {f['fix']}")
    say("backends:")
    for name, b in facts["backends"].items():
        how = f": {b['loader']}" if b.get("loader") else ""
        say(f"  {name:<7} {'usable' + how if b['ok'] else 'unavailable: ' + b['why']}")
        if b["ok"]:
            say(f"          sees {b['sees']}")
    say(f"note: {facts['ebpf_cost']}")
    return 0 if facts["backends"]["ebpf"]["ok"] or facts["backends"]["strace"]["ok"] else 1
