"""hangtrace doctor: facts are complete, JSON-ready, and consistent with the backends' checks."""
from __future__ import annotations

import io
import json

from rich.console import Console

from tracer.record.backends.ebpf_backend import EbpfBackend
from tracer.record.doctor import doctor_facts, run_doctor

KEYS = {"bpf_syscall", "btf", "tracefs", "tracepoints", "kprobes", "uprobes", "ptrace", "strace",
        "bcc", "kernel_headers", "nvidia", "py_spy"}


def test_facts_cover_every_capability_and_serialise():
    f = doctor_facts()
    assert KEYS <= set(f)
    for k in KEYS:
        assert set(f[k]) == {"ok", "detail", "fix"}, k
        assert f[k]["ok"] or f[k]["fix"], f"{k}: missing piece without a fix"
    json.dumps(f)
    assert f["backends"]["ebpf"]["ok"] == (EbpfBackend().check() is None)
    assert f["backends"]["proc"]["ok"]


def test_fixes_name_debian_packages():
    f = doctor_facts()
    if not f["kernel_headers"]["ok"]:
        assert "linux-headers-" in f["kernel_headers"]["fix"]
        assert "setup-ebpf.sh" in f["kernel_headers"]["fix"]
    if not f["bcc"]["ok"]:
        assert "python3-bpfcc" in f["bcc"]["fix"]


def test_run_doctor_prints_and_returns_status():
    buf = io.StringIO()
    code = run_doctor(Console(file=buf, width=200))
    out = buf.getvalue()
    assert "kernel_headers" in out and "backends:" in out and "ebpf" in out
    f = doctor_facts()["backends"]
    assert code == (0 if f["ebpf"]["ok"] or f["strace"]["ok"] else 1)


def test_py_spy_is_found_where_the_report_finds_it(tmp_path, monkeypatch):
    """doctor and the report (pystacks.find_py_spy) agree: PATH, $HANGTRACE_PY_SPY, and the
    bin/ beside the interpreter (a venv's py-spy that is not on PATH)."""
    import sys
    from tracer.record.pystacks import find_py_spy
    monkeypatch.delenv("HANGTRACE_PY_SPY", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))           # nothing on PATH
    venv_bin = tmp_path / "venv-bin"
    venv_bin.mkdir()
    spy = venv_bin / "py-spy"
    spy.write_text("#!/bin/sh\nexit 0\n")
    spy.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(venv_bin / "python"))
    assert find_py_spy() == str(spy)
    f = doctor_facts()["py_spy"]
    assert f["ok"] and f["detail"] == str(spy) and f["fix"] == ""
    monkeypatch.setenv("HANGTRACE_PY_SPY", "")          # "none", for the report and doctor
    f = doctor_facts()["py_spy"]
    assert find_py_spy() is None and not f["ok"] and "not installed" in f["detail"]
    assert "hangtrace[stacks]" in f["fix"]
