"""The shipped report schema (tracer/data/report.schema.json): every --json report the CLI
prints validates against it, and the schema is strict enough to catch a report that drifts from
it (a missing field, a verdict it does not know, a field of the wrong type, a field it does not
describe)."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

import report_schema
from replay import FIXTURES, expected_files, load, report_for
from tracer.report import REPORT_FORMAT
from cli_run import hangtrace as cli  # noqa: E402  (tests/cli_run.py)

DATA = Path(__file__).resolve().parents[1] / "data" / "strace"


@pytest.mark.live
def test_attach_json_validates(scenario, tmp_path):
    sc = scenario("parked_pool")
    p = cli("attach", str(sc.pid), "--backend", "proc", "--duration", "1", "--json",
            "--output", str(tmp_path / "t.htrace.gz"))
    doc = json.loads(p.stdout)
    report_schema.check(doc)
    assert doc["exit_code"] == p.returncode


@pytest.mark.live
def test_demo_json_validates():
    p = cli("demo", "pipe_deadlock", "--backend", "proc", "--duration", "1.5", "--json")
    doc = json.loads(p.stdout)
    report_schema.check(doc)
    assert doc["exit_code"] == p.returncode
