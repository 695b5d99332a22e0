"""What the recording path and the CLI's start do not import (issue 33: attach's first trace
byte within 0.2 s of the command): the analysis rules load after the trace's header is
written (record/session.py), rich when a report is shown, the strace importer only for
``-b strace``/``auto`` and BCC only when libbpf cannot load. Each in a fresh interpreter."""
from __future__ import annotations

import subprocess
import sys

import pytest


def _loaded(code: str) -> set:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint('\\n'.join(sys.modules))"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return set(out.split())


@pytest.mark.parametrize("code, absent", [
    ("import tracer.record.session", {"tracer.analysis.analyzer", "tracer.analysis.report_build",
                                      "rich", "tracer.strace", "tracer.record.backends.strace_backend"}),
    ("import tracer.cli", {"rich", "rich.console", "tracer.analysis.analyzer", "tracer.record.session"}),
])
def test_start_does_not_import(code, absent):
    assert not (_loaded(code) & absent)


def test_a_loader_that_can_load_stops_the_choice(monkeypatch):
    from tracer.record.backends.ebpf import env
    asked = []
    monkeypatch.setattr(env, "core_problem", lambda objects: asked.append("libbpf"))
    monkeypatch.setattr(env, "bcc_problem", lambda: asked.append("bcc") or "no")
    assert env.choose(("libbpf", "bcc"))[0] == "libbpf" and asked == ["libbpf"]
    asked.clear()
    monkeypatch.setattr(env, "core_problem", lambda objects: asked.append("libbpf") or "no btf")
    monkeypatch.setattr(env, "bcc_problem", lambda: asked.append("bcc"))
    assert env.choose(("libbpf", "bcc"))[0] == "bcc" and asked == ["libbpf", "bcc"]
