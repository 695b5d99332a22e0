"""The live view's layout (tracer/render/live.py), drawn on an in-memory console: it fits 80
columns with every column title whole, and a line said while it is up (the demo's "scenario
running") is printed once, above it, never inside it."""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from tracer.load.trace import analyze_trace
from tracer.render.live import RATE_KEYS, LiveView

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
TRACE = Path(__file__).resolve().parents[2] / "fixtures" / "traces" / "sglang_like.ebpf.htrace.gz"
TITLES = ["pid/tid", "name", "st", "verdict", *[t for _, t in RATE_KEYS], "cpu%", "quiet"]


@pytest.fixture(scope="module")
def report():
    return analyze_trace(str(TRACE))


def _draw(report, width: int) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width)
    view = LiveView(console, 5.0, [report.processes[0].pid])
    view._report, view._has_syscalls, view._elapsed = report, True, 2.5
    console.print(view._render())
    return out.getvalue()


@pytest.mark.parametrize("width", [80, 100, 160])
def test_the_view_fits_and_its_titles_are_whole(report, width):
    text = _draw(report, width)
    lines = text.splitlines()
    assert max(map(len, lines)) <= width, text
    header = next(line for line in lines if line.startswith("pid/tid"))
    assert header.split() == TITLES, header          # no title cut to "sy…"
    assert "…" not in header
    rows = [line for line in lines if re.match(r"^\s*\d+\s", line)]
    assert len(rows) == sum(1 + len(p.threads) for p in report.processes)
    for p in report.processes:               # every pid whole, whatever the width
        assert any(line.split()[0] == str(p.pid) for line in rows), p.pid


def test_a_line_said_while_the_view_is_up_is_printed_once_above_it(report):
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=True, height=40)
    view = LiveView(console, 5.0, [report.processes[0].pid])
    with view:
        view.say("hangtrace: scenario sglang_like running as pid 42; attaching for 5 s")
        view._report, view._has_syscalls = report, True
        view._live.update(view._render(), refresh=True)
    text = ANSI.sub("", out.getvalue())
    assert text.count("scenario sglang_like running as pid 42") == 1
    said = text.index("scenario sglang_like running")
    assert "provisional verdict" in text[said:]       # the view was drawn below it
