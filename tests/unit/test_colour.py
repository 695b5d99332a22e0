"""``--color=auto|always|never`` on every command that prints colour, and NO_COLOR
(render/colour.py): "always" keeps the colours through a pipe for ``less -R``."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tracer.cli.commands import main
from tracer.render import colour

TRACE = str(Path(__file__).resolve().parents[2] / "fixtures" / "traces" /
            "dead_worker.ebpf.htrace.gz")
COLOUR_COMMANDS = ("attach", "watch", "snapshot", "demo", "doctor", "analyze", "import-strace",
                   "merge", "cluster")


@pytest.fixture(autouse=True)
def _auto():
    yield
    colour.set_mode("auto")


@pytest.mark.parametrize("mode, tty, no_color, want", [
    ("auto", True, "", True), ("auto", True, "1", False), ("auto", False, "", False),
    ("always", False, "", True), ("always", True, "1", True),     # the command line wins
    ("never", True, "", False), ("never", False, "", False),
])
def test_the_choice(monkeypatch, mode, tty, no_color, want):
    monkeypatch.setenv("NO_COLOR", no_color)
    colour.set_mode(mode)
    assert colour.wanted(tty) is want
    assert (colour.console_options(tty).get("color_system", "auto") is not None) is want


def test_every_command_that_prints_colour_takes_the_option():
    for name in COLOUR_COMMANDS:
        cmd = main.commands[name]
        opts = {o for p in cmd.params for o in p.opts}
        assert "--color" in opts, name


@pytest.mark.parametrize("args, ansi", [(["--color=always"], True), (["--color=never"], False),
                                        ([], False), (["--colour", "always"], True)])
def test_analyze_in_a_pipe(args, ansi):
    out = CliRunner().invoke(main, ["analyze", *args, TRACE]).output
    assert "hangtrace verdict:" in out
    assert ("\x1b[" in out) is ansi


def test_a_bad_value_is_a_usage_error():
    r = CliRunner().invoke(main, ["analyze", "--color=sometimes", TRACE])
    assert r.exit_code == 2 and "sometimes" in r.output
