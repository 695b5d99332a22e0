"""What of a process tree the console draws (console.process_tree's folds), as plain data.

Contract: reads only the report's processes. ``fold_exited(kids, children, verbose)``: a
process's children to draw and how many that exited without children of their own are left
out (past ``FOLD_EXITED_AFTER``). ``MAX_DEPTH``: the process levels drawn nested (a drawn line
costs its depth: a chain drawn nested costs the square of its length, issue 46 item 8);
``below(top, children, keep)`` counts what lies under a process at that depth (processes,
levels, verdicts) and picks the processes of ``keep`` among them, iteratively and once each;
``deeper_line`` says it in one line; ``naming_parent`` prefixes a label drawn off its parent.
"""
from __future__ import annotations

from collections import Counter
from typing import Dict, List, Set, Tuple

from rich.text import Text

from ..report import ProcessReport

__all__ = ["MAX_DEPTH", "FOLD_EXITED_AFTER", "EXITED_VERDICT", "fold_exited", "below",
           "deeper_line", "naming_parent"]

MAX_DEPTH = 8           # process levels drawn nested (as compact.MAX_HOPS, the chain's lines)
FOLD_EXITED_AFTER = 20  # exited childless children drawn per process; the rest are counted
EXITED_VERDICT = "exited"


def fold_exited(kids: List[ProcessReport], children: Dict[int, List[ProcessReport]],
                verbose: bool) -> Tuple[List[ProcessReport], int]:
    """The children to show and how many are left out: past the first ``FOLD_EXITED_AFTER``
    that exited without children of their own, the others such are counted, not drawn (a fork
    storm leaves thousands; drawing each took rich about 2 ms)."""
    gone = [c for c in kids if c.verdict == EXITED_VERDICT and c.pid not in children]
    if verbose or len(gone) <= FOLD_EXITED_AFTER:
        return kids, 0
    hidden = {id(c) for c in gone[FOLD_EXITED_AFTER:]}
    return [c for c in kids if id(c) not in hidden], len(hidden)


def below(top: ProcessReport, children: Dict[int, List[ProcessReport]],
          keep: Set[int]) -> Tuple[int, int, Counter, List[ProcessReport]]:
    """(processes under ``top``, levels under it, their verdicts counted, those in ``keep``),
    each process once (a parent cycle ends the walk)."""
    count, levels, verdicts, kept = 0, 0, Counter(), []
    pending = [(c, 1) for c in children.get(top.pid, [])]
    seen = {top.pid}
    while pending:
        p, d = pending.pop()
        if p.pid in seen:
            continue
        seen.add(p.pid)
        count, levels = count + 1, max(levels, d)
        verdicts[p.verdict] += 1
        if p.pid in keep:
            kept.append(p)
        pending.extend((c, d + 1) for c in children.get(p.pid, []))
    return count, levels, verdicts, kept


def deeper_line(count: int, levels: int, verdicts: Counter) -> Text:
    """"+ 992 processes in 992 more levels (991 blocked, 1 idle; --verbose lists them)"."""
    said = ", ".join(f"{n:,} {v}" for v, n in verdicts.most_common())
    return Text(f"+ {count:,} process{'es' if count > 1 else ''} in {levels:,} more "
                f"level{'s' if levels > 1 else ''} ({said}; --verbose lists them)", style="dim")


def naming_parent(label: Text, parent: str) -> Text:
    """A process's label drawn off its parent's level: "(child of pid 7) ..."."""
    return Text.assemble(Text(f"(child of {parent}) ", style="dim"), label)
