"""The analyzer against the truth of the issue-20 recordings (fixtures/truth/*.json and the GPU
ones in fixtures/gpu/truth/*.json, each beside its trace): the tree's verdict is the truth's or
an acceptable one, and the root cause names the truth's thread by pid and tid.

Rules of the comparison (the README of fixtures/truth says what each key means):
- a truth with a ``cycle`` is named by any thread of the cycle;
- a root cause whose thread died before the recording (``facts.dead``) cannot be named by its
  tid: the pid must be right, and the tid reported must be a thread the recording saw;
- a truth without a root cause (a tree that goes on) only checks the verdict.
A recording the analyzer still gets wrong is listed in KNOWN_MISSES with the reason, as a strict
xfail: it fails the run the day it is right, so that the list is shortened.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from scenarios import REPO
from tracer.analysis.analyzer import analyze_trace

TRUTH = sorted((REPO / "fixtures" / "truth").glob("*.json")) + sorted(
    (REPO / "fixtures" / "gpu" / "truth").glob("*.json"))

KNOWN_MISSES = {
    "pool_server.proc": "the client's connections are invisible to /proc sampling (each one "
                        "lives for a few ms between two samples): it shows as a thread that "
                        "wakes 25 times a second with nothing to show, which is busy-waiting",
}


def _named(cause: dict, got: dict, truth: dict) -> bool:
    if cause is None:
        return True
    if got.get("pid") is None:
        return False
    members = [cause] + list(truth.get("cycle") or [])
    for m in members:
        if got["pid"] != m["pid"]:
            continue
        wanted = f"{m['pid']}:{m['tid']}"
        if got.get("tid") == m["tid"] or truth["facts"].get("dead") == wanted:
            return True
    return False


@pytest.mark.parametrize("path", TRUTH, ids=lambda p: p.stem)
def test_verdict_and_root_cause_are_the_truths(path: Path, request) -> None:
    if path.stem in KNOWN_MISSES:
        request.applymarker(pytest.mark.xfail(reason=KNOWN_MISSES[path.stem], strict=True))
    truth = json.loads(path.read_text())
    report = analyze_trace(str(REPO / truth["trace"]))
    assert report.verdict in [truth["verdict"]] + truth["also_acceptable"], (
        report.verdict, report.rule, report.root_cause["summary"][:300])
    assert _named(truth["root_cause"], report.root_cause, truth), (
        truth["root_cause"], report.root_cause)
