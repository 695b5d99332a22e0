"""The merged-tree rule: a node that could not be recorded may be the one that hangs.

Contract: ``qualify_for_unrecorded(tree, failed)`` is a tree rule applied with the others
(report_build.py, right after observed.qualify_tree): a tree verdict that only says the job is
fine (progressing, idle) while a node of it could not be recorded (``failed``: (node name,
why), from ``hangtrace cluster``) becomes ``unknown`` with rule ``node-not-recorded``: the rest
of the job says nothing about that node (as observed.qualify_tree says for a process).
Busy-waiting, blocked, deadlocked and exited verdicts stand: they rest on what was seen.
"""
from __future__ import annotations

from typing import Sequence, Tuple

from ..vocab.verdict import IDLE, PROGRESSING, UNKNOWN
from .tree import TreeVerdict

RULE = "node-not-recorded"


def qualify_for_unrecorded(tree: TreeVerdict, failed: Sequence[Tuple[str, str]]) -> None:
    if not failed or tree.verdict not in (PROGRESSING, IDLE):
        return
    what = "makes progress" if tree.verdict == PROGRESSING else "is idle"
    names = ", ".join(name for name, _ in failed)
    rest = tree.root_cause.summary
    tree.verdict, tree.rule = UNKNOWN, RULE
    tree.root_cause.summary = (
        f"node {names} could not be recorded ({failed[0][1]}); the rest of the job {what}, "
        "which says nothing about it" + (f". The rest: {rest}" if rest else ""))
