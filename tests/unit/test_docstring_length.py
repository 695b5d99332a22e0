"""Module docstrings state a module's contract in at most about 12 lines
(``MAX_DOCSTRING_LINES``); the longer "how it works" belongs in the functions' docstrings or
docs/ARCHITECTURE.md (issue 31). The modules whose docstrings were longer when the bound came
are listed with their length then: each may shrink, none may grow, and no other may pass the
bound. A module that comes down to the bound leaves the list."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict

PKG = Path(__file__).resolve().parents[2] / "tracer"
MAX_DOCSTRING_LINES = 12

# path under tracer/ -> lines of its module docstring when the bound came (to shrink, not grow)
LONGER: Dict[str, int] = {}


def _lengths() -> Dict[str, int]:
    out = {}
    for p in PKG.rglob("*.py"):
        doc = ast.get_docstring(ast.parse(p.read_text()), clean=False)
        out[str(p.relative_to(PKG))] = len(doc.splitlines()) if doc else 0
    return out


def test_module_docstrings_stay_within_the_bound():
    got = _lengths()
    over = {m: n for m, n in got.items() if n > max(MAX_DOCSTRING_LINES, LONGER.get(m, 0))}
    assert not over, f"module docstrings over {MAX_DOCSTRING_LINES} lines (or longer than " \
                     f"they were): {over}"


def test_the_list_of_longer_docstrings_only_shrinks():
    got = _lengths()
    done = sorted(m for m, n in LONGER.items() if got.get(m, 0) <= MAX_DOCSTRING_LINES)
    assert not done, f"within the bound now: take them off LONGER: {done}"
    stale = {m: (LONGER[m], got[m]) for m in LONGER if MAX_DOCSTRING_LINES < got[m] < LONGER[m]}
    assert not stale, f"shorter now (listed, now): lower their numbers in LONGER: {stale}"
