"""The shipped report schema (tracer/data/report.schema.json): every --json report the CLI
prints validates against it, and the schema is strict enough to catch a report that drifts from
it (a missing field, a verdict it does not know, a field of the wrong type, a field it does not
describe)."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import report_schema
from replay import FIXTURES, expected_files, load, report_for
from tracer.report import REPORT_FORMAT
from cli_run import hangtrace as cli  # noqa: E402  (tests/cli_run.py)

DATA = Path(__file__).resolve().parents[1] / "data" / "strace"


def test_schema_names_the_format():
    schema = json.loads(report_schema.SCHEMA_PATH.read_text())
    assert schema["properties"]["format"]["const"] == REPORT_FORMAT == "hangtrace.report/1"
    report_schema.validator()        # the schema itself is a valid 2020-12 schema


@pytest.mark.parametrize("expected", expected_files(), ids=lambda p: p.stem)
def test_every_fixture_report_validates(expected, tmp_path):
    """Every recorded trace and strace log of fixtures/ (strace, eBPF, GPU, H200): reports with
    deadlock proofs, wait graphs, GPU notes, Python stacks, exited processes."""
    report = report_for(FIXTURES / load(expected)["source"], tmp_path)
    report_schema.check(report.to_json())


def test_analyze_json_validates():
    p = cli("analyze", "--json", str(FIXTURES / "traces" / "lock_order_deadlock.ebpf.htrace.gz"))
    doc = json.loads(p.stdout)
    report_schema.check(doc)
    assert doc["verdict"] == "deadlocked" and doc["wait_graph"]["proof"] is not None


def test_analyze_json_of_a_raw_strace_log_validates():
    p = cli("analyze", "--json", str(DATA / "python_f_ttt_T_yy.log"))
    assert p.returncode in (0, 3, 4, 5, 6), p.stderr
    doc = json.loads(p.stdout)
    report_schema.check(doc)
    assert doc["trace"] is None


def test_import_strace_analyze_json_validates(tmp_path):
    out = tmp_path / "t.htrace.gz"
    p = cli("import-strace", "--analyze", "--json", "-o", str(out),
            str(FIXTURES / "gpu-h200" / "blocking_event.strace.gz"))
    doc = json.loads(p.stdout)
    report_schema.check(doc)
    assert doc["source"] == "import-strace" and doc["trace"] == str(out)


# --------------------------------------------------------------------------- strictness
def _doc():
    return report_for(FIXTURES / "traces" / "lock_order_deadlock.ebpf.htrace.gz",
                      Path("/nonexistent")).to_json()


@pytest.mark.parametrize("break_it, where", [
    (lambda d: d.pop("verdict"), "(top)"),
    (lambda d: d.update(verdict="hung"), "verdict"),
    (lambda d: d.update(exit_code=2), "exit_code"),
    (lambda d: d.update(format="hangtrace.report/2"), "format"),
    (lambda d: d.update(surprise=1), "(top)"),
    (lambda d: d["processes"][0].update(pid="12"), "processes/0/pid"),
    (lambda d: d["processes"][0]["threads"][0].update(verdict="stuck"),
     "processes/0/threads/0/verdict"),
    (lambda d: d["processes"][0]["threads"][0].pop("evidence"), "processes/0/threads/0"),
    (lambda d: d["processes"][0]["counters"].update(syscalls="many"),
     "processes/0/counters/syscalls"),
    (lambda d: d["wait_graph"]["proof"].update(kind="loop"), "wait_graph"),
    (lambda d: d.update(watch={"summary": "x"}), "watch"),
])
def test_schema_rejects_drift(break_it, where):
    doc = _doc()
    report_schema.check(doc)
    bad = copy.deepcopy(doc)
    break_it(bad)
    problems = report_schema.errors(bad)
    assert problems and any(p.startswith(where) for p in problems), problems


@pytest.mark.parametrize("name", ["report", "snapshot", "doctor"])
def test_hangtrace_schema_prints_a_schema_that_resolves_alone(name, tmp_path):
    """``hangtrace schema NAME`` is one valid 2020-12 document with relative ids whose every
    $ref resolves inside it (no registry, no network): a document that breaks what a $ref
    points to is refused, which an unresolved $ref could not do."""
    jsonschema = pytest.importorskip("jsonschema")
    p = cli("schema", name)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    doc = json.loads(p.stdout)
    assert doc["$id"] == f"{name}.schema.json"
    cls = jsonschema.validators.validator_for(doc)
    cls.check_schema(doc)
    validator = cls(doc)
    if name == "snapshot":
        snap = json.loads(cli("snapshot", "-p", str(os.getpid()), "--json").stdout)
        assert not list(validator.iter_errors(snap))
        snap["evidence"] = {"libs": "not a list"}
        assert list(validator.iter_errors(snap))     # through report.schema.json#/$defs/evidence
    if name == "doctor":
        facts = json.loads(cli("doctor", "--json").stdout)
        assert not list(validator.iter_errors(facts))
        facts["denied"] = "x"
        assert list(validator.iter_errors(facts))
    for ref in _refs(doc):
        assert "://" not in ref, ref


def _refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref":
                yield v
            else:
                yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def test_unknown_schema_name_is_a_usage_error():
    p = cli("schema", "nope")
    assert p.returncode == 2 and p.stderr.startswith("hangtrace: ")


def test_every_kind_of_wait_edge_is_in_the_schema():
    """A flock wait (EdgeKind.LOCK, jit-lock's runner) is a waits_on and an edge kind the
    analysis gives: the schema names every kind (a live report of it broke the schema)."""
    from tracer.analysis.waitgraph.graph import EdgeKind
    text = report_schema.SCHEMA_PATH.read_text()
    schema = json.loads(text)

    def enums(node):
        if isinstance(node, dict):
            if "enum" in node and {"mutex", "outside"} <= set(node["enum"]):
                yield node["enum"]
            for v in node.values():
                yield from enums(v)
        elif isinstance(node, list):
            for v in node:
                yield from enums(v)
    found = list(enums(schema))
    assert len(found) == 2 and all(set(e) == {k.value for k in EdgeKind} for e in found)
