"""Golden-file replay: analyze a recorded trace (or import an strace log first) and compare the
report with an expected-report file written by a person who checked the recording.

Expected file (JSON): {"source": path relative to fixtures/, "verdict", "rule"?, "root_cause":
{"pid"?, "tid"?, "contains": [substrings]}, "processes": {pid: {"verdict", "rule"?,
"waits_on"?: [pids], "threads"?: {tid: verdict}}}, "evidence_contains"?: {tid: [substrings]}}.
Only what is listed is compared: the rest of the report may evolve.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

from tracer.load.trace import analyze_trace
from tracer.strace.importer import import_strace
from tracer.report import Report

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def expected_files() -> List[Path]:
    return sorted((FIXTURES / "expected").glob("*.json"))


def report_for(source: Path, tmp: Path) -> Report:
    if source.name.endswith(".htrace.gz") or source.name.endswith(".htrace"):
        return analyze_trace(str(source))
    out = tmp / (source.name + ".htrace.gz")
    import_strace(str(source), str(out))
    return analyze_trace(str(out))


def compare(report: Report, exp: Dict[str, Any]) -> List[str]:
    """Differences between a report and an expectation, as readable lines (empty: equal)."""
    bad: List[str] = []
    if report.verdict != exp["verdict"]:
        bad.append(f"tree verdict {report.verdict!r}, expected {exp['verdict']!r}")
    if "rule" in exp and report.rule != exp["rule"]:
        bad.append(f"tree rule {report.rule!r}, expected {exp['rule']!r}")
    rc = exp.get("root_cause", {})
    for key in ("pid", "tid"):
        if key in rc and report.root_cause.get(key) != rc[key]:
            bad.append(f"root cause {key} {report.root_cause.get(key)}, expected {rc[key]}")
    for text in rc.get("contains", []):
        if text not in report.root_cause["summary"]:
            bad.append(f"root cause summary lacks {text!r}: {report.root_cause['summary']!r}")
    for pid_s, pexp in exp.get("processes", {}).items():
        p = report.process(int(pid_s))
        if p is None:
            bad.append(f"no process {pid_s} in the report")
            continue
        if p.verdict != pexp["verdict"]:
            bad.append(f"process {pid_s} verdict {p.verdict!r}, expected {pexp['verdict']!r}")
        if "rule" in pexp and p.rule != pexp["rule"]:
            bad.append(f"process {pid_s} rule {p.rule!r}, expected {pexp['rule']!r}")
        if "waits_on" in pexp:
            got = sorted({q for w in p.waits_on for q in w["pids"]})
            if got != sorted(pexp["waits_on"]):
                bad.append(f"process {pid_s} waits on {got}, expected {pexp['waits_on']}")
        threads = {t.tid: t for t in p.threads}
        for tid_s, tv in pexp.get("threads", {}).items():
            t = threads.get(int(tid_s))
            if t is None or t.verdict != tv:
                bad.append(f"thread {tid_s} verdict {t.verdict if t else None!r}, expected {tv!r}")
    for tid_s, texts in exp.get("evidence_contains", {}).items():
        t = next((t for p in report.processes for t in p.threads if t.tid == int(tid_s)), None)
        joined = " | ".join(t.evidence) if t else ""
        for text in texts:
            if text not in joined:
                bad.append(f"thread {tid_s} evidence lacks {text!r}: {joined!r}")
    return bad


def load(path: Path) -> Dict[str, Any]:
    return json.loads(path.read_text())
