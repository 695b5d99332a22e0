"""A tree thousands of processes deep (each in wait4 for its only child, the last in pause)
analyzes in linear time without overflowing Python's recursion, and its report draws (issue 46 item 8).
On main: RecursionError from 1,000 levels (waitgraph/chain.py's end(), render/compact.py's
_depths and its processes grouped per distance once), settle() one pass over every node a hop (quadratic), tree.py's _depth a walk to the
root per process."""
from __future__ import annotations

import io
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Dict

import pytest

from tracer.analysis.verdicts.kin import depths
from tracer.load.trace import analyze_trace
from tracer.render.console import render_report, report_console
from tracer.strace.importer import import_strace

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from process_scale import ROOT, chain_log  # noqa: E402


class _Counted(dict):
    """A dict of process verdicts that counts the lookups of a process by pid."""
    lookups = 0

    def __getitem__(self, key: int) -> SimpleNamespace:
        type(self).lookups += 1
        return dict.__getitem__(self, key)


def _walk_depth(pvs: Dict[int, SimpleNamespace], pid: int) -> int:
    """The depth as main's _depth gave it: a walk to the root, a parent cycle counted once."""
    d, seen = 0, set()
    while pid in pvs and pid not in seen:
        seen.add(pid)
        pid = pvs[pid].ppid
        d += 1
    return d


def test_depths_of_a_chain_10k_deep_follow_each_parent_once() -> None:
    n = 10_000
    pvs = _Counted({ROOT + i: SimpleNamespace(ppid=ROOT + i - 1 if i else 1) for i in range(n)})
    _Counted.lookups = 0
    got = depths(pvs)
    assert got[ROOT] == 1 and got[ROOT + n - 1] == n
    assert _Counted.lookups <= 2 * n, f"{_Counted.lookups} lookups for {n} processes"


@pytest.mark.parametrize("parents", [
    {1: 0, 2: 1, 3: 2},                      # a chain under an unknown root
    {1: 2, 2: 3, 3: 1, 4: 3, 5: 4},          # a parent cycle, and a branch hanging off it
    {1: 1, 2: 1},                            # its own parent
    {1: 9, 2: 9, 3: 1, 4: 3},                # two roots
])
def test_depths_are_what_a_walk_to_the_root_gives(parents: Dict[int, int]) -> None:
    pvs = {pid: SimpleNamespace(ppid=ppid) for pid, ppid in parents.items()}
    assert depths(pvs) == {pid: _walk_depth(pvs, pid) for pid in pvs}


def _trace(tmp_path: Path, n: int) -> str:
    log, out = tmp_path / f"chain-{n}.log", tmp_path / f"chain-{n}.htrace"
    log.write_text(chain_log(n))
    import_strace(str(log), str(out))
    return str(out)


def _analyzed(path: str, n: int) -> float:
    c = time.process_time()
    report = analyze_trace(path)
    cpu = time.process_time() - c
    assert report.verdict == "idle"
    assert report.root_cause["pid"] == ROOT + n - 1, report.root_cause
    return cpu


def test_a_chain_6000_deep_analyzes_in_linear_time(tmp_path: Path) -> None:
    small, big = _trace(tmp_path, 1500), _trace(tmp_path, 6000)
    _analyzed(small, 1500)                                # warm: imports, caches
    ratio = _analyzed(big, 6000) / max(_analyzed(small, 1500), 1e-3)
    assert ratio < 8, f"4x the depth: x{ratio:.1f} the CPU time (quadratic: 16)"


def test_a_chain_1200_deep_draws_its_chain_of_waits(tmp_path: Path) -> None:
    n = 1200
    report = analyze_trace(_trace(tmp_path, n))
    out = io.StringIO()
    render_report(report, report_console(file=out))     # main: RecursionError (_depths)
    text = out.getvalue()
    assert f"pid {ROOT + n - 1} thread {ROOT + n - 1}: blocked" in text
    assert f"pid {ROOT + n - 2} →  pid {ROOT + n - 1} (child)" in text
