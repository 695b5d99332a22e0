"""The compiled helpers and their pure-Python twins agree (issue 22 item 3), on random blocks
and mutated blocks of the real logs (tests/twins.py): the same lines read the same way, the
same membership from the first pass, and the same trace rows and verdicts from a whole import
and analysis (the pure path in a child with HANGTRACE_PURE=1). Skipped where the compiled
helpers are not built (scripts/build_fast.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import twins
from tracer.strace.scan import py_scan_block
from tracer.strace.fastpath import compiled, status

SEED = 20261201
FAST = compiled()
pytestmark = pytest.mark.skipif(FAST is None, reason=status())
REPO = Path(__file__).resolve().parents[2]


def test_split_line_reads_every_line_the_same_way() -> None:
    bad = {line for b in twins.blocks(SEED, 1500) for line in twins.line_diffs(b, FAST)}
    assert not bad, sorted(bad)[:10]


def test_the_first_pass_decides_the_same_membership() -> None:
    bad = []
    for b in twins.blocks(SEED + 1, 1500):
        c, py = twins.membership(b), twins.membership(b, py_scan_block)
        if c != py:
            bad.append((b[:300], {k: (c[k], py[k]) for k in c if c[k] != py[k]}))
    assert not bad, bad[:5]


def test_the_issues_log_gives_one_verdict() -> None:
    """'Process N attached' after a pid column: C found it only at a line's start, so the
    same log was idle for pid 42 one way and blocked for pid 25557 the other."""
    block = (b"42  1795953170.100000 Process 25557 attached\n"
             b"25557 1795953170.200000 read(3<pipe:[9]>, \"x\", 1) = 1 <0.000010>\n"
             b"25557 1795953170.300000 futex(0x7f10, FUTEX_WAIT_PRIVATE, 0, NULL <unfinished"
             b" ...>\n42  1795953170.400000 getpid() = 42 <0.000010>\n")
    assert twins.membership(block) == twins.membership(block, py_scan_block)
    _same_outcomes([block])


def _same_outcomes(blocks) -> None:
    here = [twins.outcome(b) for b in blocks]
    code = ("import json, sys, twins; blocks = [bytes.fromhex(x) for x in json.load(sys.stdin)]; "
            "print(json.dumps([twins.outcome(b) for b in blocks]))")
    p = subprocess.run([sys.executable, "-c", code], input=json.dumps([b.hex() for b in blocks]),
                       capture_output=True, text=True, cwd=REPO / "tests", timeout=900,
                       env={**os.environ, "HANGTRACE_PURE": "1",
                            "PYTHONPATH": f"{REPO / 'tests'}:{REPO}"})
    assert p.returncode == 0, p.stderr[-2000:]
    pure = json.loads(p.stdout)
    bad = [(b[:200], h, q) for b, h, q in zip(blocks, here, pure) if h != q]
    assert not bad, bad[:3]
    assert {o.get("verdict") for o in here} - {None}, "no block gave a verdict"


def test_imports_and_verdicts_agree_on_both_paths() -> None:
    _same_outcomes(twins.blocks(SEED + 2, 50))
