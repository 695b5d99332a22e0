"""What the recording could not observe, in the verdicts of processes and of the tree (the
thread rule and the report's lines: threads/observed.py). Pure functions:
- ``explain_unknown(pvs)``: a process that is ``unknown`` because none of its threads could be
  observed carries their reason as its rule and evidence (not "nothing recorded").
- ``qualify_tree(tree, pvs)``: a tree verdict that only says the tree is fine (progressing,
  idle) while a process of it could not be observed becomes ``unknown``: the unseen part may be
  the hung one. Busy-waiting, blocked, deadlocked and exited verdicts stand (they rest on what
  was seen).
"""
from __future__ import annotations

from typing import Dict

from ..threads.observed import PROCESS_RULE, RULE
from ..vocab.verdict import IDLE, PROGRESSING, UNKNOWN
from .process import Finding, ProcessVerdict
from .tree import TreeVerdict

__all__ = ["explain_unknown", "qualify_tree"]


def explain_unknown(pvs: Dict[int, ProcessVerdict]) -> None:
    """Give unknown processes whose threads were not observed that reason (module doc)."""
    for pv in pvs.values():
        if pv.verdict != UNKNOWN:
            continue
        unseen = sorted(tid for tid, v in pv.threads.items() if v.rule == RULE)
        if not unseen:
            continue
        key = pv.pid if pv.pid in unseen else unseen[0]
        pv.key_tid, pv.rule = key, PROCESS_RULE
        pv.findings = [Finding(key, e) for e in pv.threads[key].evidence]
        if len(unseen) > 1:
            pv.findings.append(Finding(None, f"{len(unseen)} threads could not be observed"))


def qualify_tree(tree: TreeVerdict, pvs: Dict[int, ProcessVerdict]) -> None:
    """Turn a reassuring tree verdict into ``unknown`` when part of the tree was unseen."""
    if tree.verdict not in (PROGRESSING, IDLE):
        return
    unseen = [pv for pv in pvs.values() if pv.verdict == UNKNOWN and pv.rule == PROCESS_RULE]
    if not unseen:
        return
    pv = unseen[0]
    what = "makes progress" if tree.verdict == PROGRESSING else "is idle"
    first = "; ".join(e.split(": ", 1)[-1] for e in pv.evidence[:1])
    tree.verdict, tree.rule = UNKNOWN, RULE
    rc = tree.root_cause
    rc.pid, rc.tid = pv.pid, pv.key_tid
    rc.summary = (f"{pv.label} could not be observed ({first}); the rest of the tree {what}, "
                  "which says nothing about it")
    if len(unseen) > 1:
        rc.summary += f" ({len(unseen)} processes could not be observed)"
