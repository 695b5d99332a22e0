"""hangtrace doctor: facts are complete, JSON-ready, and consistent with the backends' checks."""
from __future__ import annotations

import io
import json
import re

from rich.console import Console

from tracer.record.backends.ebpf.backend import EbpfBackend
from tracer.record.doctor import doctor_facts, run_doctor

KEYS = {"bpf_syscall", "btf", "tracefs", "tracepoints", "kprobes", "uprobes", "ptrace", "strace",
        "libbpf", "bcc", "kernel_headers", "nvidia", "py_spy", "ebpf_loader"}


def test_facts_cover_every_capability_and_serialise():
    f = doctor_facts()
    assert KEYS <= set(f)
    for k in KEYS:
        assert set(f[k]) == {"ok", "detail", "fix"}, k
        assert f[k]["ok"] or f[k]["fix"], f"{k}: missing piece without a fix"
    json.dumps(f)
    assert f["backends"]["ebpf"]["ok"] == (EbpfBackend().check() is None)
    assert f["backends"]["proc"]["ok"]
    assert f["ebpf_loader"]["ok"] == f["backends"]["ebpf"]["ok"] or not f["root"]


def test_the_loader_line_names_the_loader_that_works_and_why_not_the_other(monkeypatch):
    from tracer.record.backends.ebpf import env
    monkeypatch.setattr(env, "loader_problems", lambda *a, **k: {
        "libbpf": "no kernel BTF (/sys/kernel/btf/vmlinux): ...", "bcc": None})
    f = doctor_facts()["ebpf_loader"]
    assert f["ok"] and f["detail"].startswith("BCC: compiles the program at attach")
    assert "libbpf: no kernel BTF" in f["detail"] and "\n" not in f["detail"]
    monkeypatch.setattr(env, "loader_problems", lambda *a, **k: {
        "libbpf": None, "bcc": "BCC is not importable (ImportError): apt install ..."})
    f = doctor_facts()["ebpf_loader"]
    if f["ok"]:      # libbpf.so.1 is on this machine
        assert f["detail"].startswith("libbpf ") and "loads the CO-RE objects" in f["detail"]
        assert "bcc: BCC is not importable" in f["detail"]
    monkeypatch.setattr(env, "loader_problems", lambda *a, **k: {"libbpf": "x", "bcc": "y"})
    f = doctor_facts()["ebpf_loader"]
    assert not f["ok"] and f["detail"] == "libbpf: x; bcc: y" and "build_bpf.py" in f["fix"]


def test_the_cost_to_every_process_is_said_with_a_measured_figure():
    cost = doctor_facts()["ebpf_cost"]
    assert "every process on the machine" in cost
    assert re.search(r"\d\.\d+x", cost) and "BYSTANDER" not in cost


def _pretend(monkeypatch, *, present: bool) -> None:
    """Make BCC, the kernel headers and strace look present (or missing) whatever this
    machine has, so that both branches of each fact are checked everywhere."""
    import importlib.util
    import os.path
    import shutil
    real_exists, real_find, real_which = os.path.exists, importlib.util.find_spec, shutil.which
    monkeypatch.setattr(os.path, "exists", lambda p: present if str(p).startswith(
        "/lib/modules/") else real_exists(p))
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: (object() if present else None)
                        if n == "bcc" else real_find(n, *a))
    monkeypatch.setattr(shutil, "which", lambda n, *a: ("/usr/bin/strace" if present else None)
                        if n == "strace" else real_which(n, *a))


def test_missing_pieces_name_their_debian_packages(monkeypatch):
    _pretend(monkeypatch, present=False)
    f = doctor_facts()
    assert not f["kernel_headers"]["ok"] and not f["bcc"]["ok"] and not f["strace"]["ok"]
    assert "linux-headers-" in f["kernel_headers"]["fix"]
    assert "setup-ebpf.sh" in f["kernel_headers"]["fix"]
    assert "python3-bpfcc" in f["bcc"]["fix"]
    assert f["strace"]["fix"] == "apt install strace"
    assert not f["backends"]["strace"]["ok"] and "not installed" in f["backends"]["strace"]["why"]


def test_present_pieces_have_no_fix(monkeypatch):
    _pretend(monkeypatch, present=True)
    f = doctor_facts()
    for key in ("kernel_headers", "bcc", "strace"):
        assert f[key]["ok"] and f[key]["fix"] == "", key


def test_run_doctor_prints_and_returns_status():
    buf = io.StringIO()
    code = run_doctor(Console(file=buf, width=200))
    out = buf.getvalue()
    assert "kernel_headers" in out and "backends:" in out and "ebpf" in out
    assert "ebpf_loader" in out and "note: while the eBPF backend records" in out
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


MARKUP_LIKE = "pip install 'hangtrace[stacks]' [red]x[/] [bold]"


def test_every_doctor_line_prints_markup_like_text_as_it_is(monkeypatch):
    """``[stacks]`` in a fix was read by rich as a tag and dropped; every line goes through
    render/markup.escape now, whatever the text."""
    from tracer.record import doctor
    facts = doctor_facts()
    checks = [v for v in facts.values() if isinstance(v, dict) and "ok" in v]
    for value in checks:
        value.update(ok=False, detail=f"detail {MARKUP_LIKE}", fix=f"fix {MARKUP_LIKE}")
    facts["ebpf_cost"] = f"cost {MARKUP_LIKE}"
    for b in facts["backends"].values():
        b.update(ok=False, why=f"why {MARKUP_LIKE}")
    monkeypatch.setattr(doctor, "doctor_facts", lambda: facts)
    buf = io.StringIO()
    run_doctor(Console(file=buf, width=400))
    lines = buf.getvalue().splitlines()
    for what in ("detail", "fix", "cost", "why"):
        n = sum(f"{what} {MARKUP_LIKE}" in line for line in lines)
        assert n > 0, (what, lines)
    assert sum(MARKUP_LIKE in line for line in lines) == 2 * len(checks) + 3 + 1


def test_error_lines_print_markup_like_text_as_it_is(tmp_path):
    """An error's line (here a missing file's name) keeps its brackets."""
    from cli_run import hangtrace, one_line
    missing = tmp_path / "[red]gone[/].htrace"
    p = hangtrace("analyze", str(missing))
    assert p.returncode == 1 and "[red]gone[/]" in one_line(p.stderr)


def test_the_escape_helper_keeps_text_and_shows_control_characters():
    from tracer.render.markup import escape, plain
    buf = io.StringIO()
    Console(file=buf, width=200).print(escape("[stacks] a\nb [/]"))
    assert buf.getvalue().strip() == "[stacks] a\\nb [/]"
    assert plain("[b]x[/b]").plain == "[b]x[/b]"
