"""How a report is compared with a truth file of fixtures/truth (or fixtures/gpu/truth): one
rule for the replay of the recordings (tests/replay/test_truth_verdicts.py) and the live runs of
the same scenarios (tests/live/test_truth_live.py).

- the verdict is the truth's or one of its ``also_acceptable``;
- a truth with a ``cycle`` is named by any thread of the cycle;
- a root cause whose thread died before the recording (``facts.dead``) cannot be named by its
  tid: the pid must be right;
- a truth without a root cause (a tree that goes on) only checks the verdict.
"""
from __future__ import annotations

from typing import Optional


def verdict_ok(truth: dict, verdict: str) -> bool:
    return verdict in [truth["verdict"]] + list(truth.get("also_acceptable") or [])


def cause_named(truth: dict, got: dict) -> bool:
    """The report's root cause (``{"pid", "tid", ...}``) names the truth's (module doc)."""
    cause: Optional[dict] = truth.get("root_cause")
    if cause is None:
        return True
    if got.get("pid") is None:
        return False
    for m in [cause] + list(truth.get("cycle") or []):
        if got["pid"] != m["pid"]:
            continue
        if got.get("tid") == m["tid"] or truth["facts"].get("dead") == f"{m['pid']}:{m['tid']}":
            return True
    return False
