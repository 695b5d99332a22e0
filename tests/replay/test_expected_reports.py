"""Replay tier: every recorded trace in fixtures/ against its expected report (tests/replay.py)."""
from __future__ import annotations

import pytest

from replay import FIXTURES, compare, expected_files, load, report_for


@pytest.mark.parametrize("expected", expected_files(), ids=lambda p: p.stem)
def test_recording_matches_expected_report(expected, tmp_path):
    exp = load(expected)
    report = report_for(FIXTURES / exp["source"], tmp_path)
    assert compare(report, exp) == []
    assert report.exit_code == {"progressing": 0, "idle": 0, "busy-waiting": 3,
                                "deadlocked": 4, "exited": 5, "blocked": 6}[exp["verdict"]]
