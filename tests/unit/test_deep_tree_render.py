"""The console's process tree draws in time and memory linear in the processes, deep or wide
(issue 46 item 8). A line drawn at depth d carries d guides, so a chain drawn nested costs the
square of its length: on main a 10,000-deep chain took 478 s and 22 GB to draw. Now at most
``MAX_DEPTH`` levels nest; below, the default view folds the descendants into one line (the
root cause's process drawn under it) and ``--verbose`` draws them at that depth, each naming
its parent. The synthetic reports are built directly (no trace): what is timed is the drawing.
"""
from __future__ import annotations

import io
import re
import time
from typing import List

import pytest

from tracer.render.console import MAX_DEPTH, process_tree, render_report, report_console
from tracer.report import ProcessReport, Report, ThreadReport

ROOT = 1000
GUIDE = 4                       # rich's guide: "│   " / "├── " per level
_PREFIX = re.compile(r"^[\s│├└─]*")
_PROCESS_LABEL = re.compile(r"(\(child of pid \d+\) )?pid \d+ ")


def _process(pid: int, ppid: int, child: int, last: bool) -> ProcessReport:
    call = "pause" if last else "wait4"
    t = ThreadReport(tid=pid, name="p", state="S", verdict="blocked",
                     rule="blocked-without-timeout", evidence=[f"blocked in {call}"],
                     current=call)
    waits = [] if last else [{"pids": [child], "kind": "child"}]
    return ProcessReport(pid=pid, ppid=ppid, role="other", comm="p", cmdline=["p"],
                         verdict="idle" if last else "blocked",
                         rule="process-waits-outside" if last else "waits-on-peers",
                         evidence=[], waits_on=waits, threads=[t])


def _report(parents: List[int], leaves: set) -> Report:
    """Processes ROOT+i with parent ``parents[i]``; the last one is the root cause."""
    procs = [_process(ROOT + i, ppid, ROOT + i + 1, ROOT + i in leaves)
             for i, ppid in enumerate(parents)]
    last = procs[-1].pid
    return Report(verdict="idle", rule="process-waits-outside",
                  root_cause={"pid": last, "tid": last,
                              "summary": f"p (pid {last}) is idle: waits in pause"},
                  processes=procs, window={"duration": 1.0}, backends=["strace-log"])


def _chain(n: int) -> Report:
    return _report([ROOT - 1] + [ROOT + i - 1 for i in range(1, n)], {ROOT + n - 1})


def _drawn(report: Report, verbose: bool) -> str:
    out = io.StringIO()
    render_report(report, report_console(file=out), verbose=verbose)
    return out.getvalue()


def _widest_guides(text: str) -> int:
    return max(len(_PREFIX.match(line).group(0)) for line in text.splitlines())


def test_a_1000_deep_chain_nests_at_most_max_depth_levels() -> None:
    """Every process drawn with --verbose (each naming its parent past MAX_DEPTH), no line
    with more than MAX_DEPTH levels of guides (plus the fold line, a process's thread and its evidence);
    main drew 1,000 levels (4,000 columns of guides)."""
    n = 1000
    text = _drawn(_chain(n), verbose=True)
    assert _widest_guides(text) <= GUIDE * (MAX_DEPTH + 5), _widest_guides(text)
    for i in range(n):
        assert f"pid {ROOT + i} " in text
    assert f"(child of pid {ROOT + n - 2}) pid {ROOT + n - 1}" in text


def test_the_default_view_folds_a_deep_chain_into_one_line_and_keeps_the_root_cause() -> None:
    n = 1000
    text = _drawn(_chain(n), verbose=False)
    assert _widest_guides(text) <= GUIDE * (MAX_DEPTH + 5)
    assert f"+ {n - MAX_DEPTH:,} processes in {n - MAX_DEPTH:,} more levels" in text
    assert f"(child of pid {ROOT + n - 2}) pid {ROOT + n - 1}" in text
    assert len(text.splitlines()) < 80


def test_the_tree_object_is_no_deeper_than_max_depth() -> None:
    """process_tree's own tree (what rich draws): the nesting of process nodes is bounded."""
    tree = process_tree(_chain(500))
    deepest, pending = 0, [(tree, 0)]
    while pending:
        node, d = pending.pop()
        if _PROCESS_LABEL.match(str(node.label)):
            deepest = max(deepest, d)
        pending.extend((c, d + 1) for c in node.children)
    assert deepest == MAX_DEPTH


@pytest.mark.slow
def test_a_10k_deep_chain_draws_in_linear_time() -> None:
    """10,000 processes in one chain, drawn both ways in seconds of CPU (here 0.1 s default,
    5 s --verbose at load 5; CPU time, so that a loaded machine does not fail it); drawn nested
    it took 407 s of CPU and 22 GB (the guard first, so that main fails in seconds rather than
    filling the memory)."""
    guard = _drawn(_chain(1500), verbose=True)
    assert _widest_guides(guard) <= GUIDE * (MAX_DEPTH + 5)
    n = 10_000
    report = _chain(n)
    for verbose in (False, True):
        c = time.process_time()
        text = _drawn(report, verbose)
        cpu = time.process_time() - c
        assert cpu < 60, f"{n} processes (verbose={verbose}): {cpu:.1f} s of CPU"
        assert _widest_guides(text) <= GUIDE * (MAX_DEPTH + 5)
        assert f"pid {ROOT + n - 1}" in text


def test_a_wide_and_deep_tree_draws_every_process_within_max_depth() -> None:
    """20 chains of 100 under one root (2,000 processes): --verbose draws each process once,
    within MAX_DEPTH levels; the default view folds each chain below MAX_DEPTH."""
    n = 2000
    parents = [ROOT - 1] + [ROOT if i % 100 == 1 else ROOT + i - 1 for i in range(1, n)]
    leaves = {ROOT + i for i in range(n) if i % 100 == 0 and i} | {ROOT + n - 1}
    report = _report(parents, leaves)
    text = _drawn(report, verbose=True)
    assert _widest_guides(text) <= GUIDE * (MAX_DEPTH + 5)
    assert all(f"pid {ROOT + i} " in text for i in range(n))
    compact = _drawn(report, verbose=False)
    assert _widest_guides(compact) <= GUIDE * (MAX_DEPTH + 5)
    assert compact.count(f"processes in {100 - MAX_DEPTH + 1} more levels") == 19
