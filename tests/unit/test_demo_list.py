"""``demo --list`` says what each scenario shows and the verdict to expect, from the scenarios'
own truth (fixtures/scenarios/README.md's table, else the docstring): record/demo.py."""
from __future__ import annotations

from click.testing import CliRunner

from tracer.record.demo import scenario_names, scenario_summaries
from tracer.render.fold import cut


def test_every_scenario_says_what_it_shows_and_what_to_expect():
    got = {s.name: s for s in scenario_summaries()}
    assert sorted(got) == scenario_names()
    assert all(s.shows and s.expected for s in got.values())
    assert got["spin"].language == "C" and got["spin"].expected.startswith("busy-waiting")
    assert got["py_deadlock"].expected.startswith("deadlocked")
    assert got["idle_server"].expected.startswith("idle")
    assert "one tensor-parallel" not in got["dead_worker"].shows      # the table's words first
    assert got["four_ranks"].shows.startswith("four ranks of a data-parallel job")  # docstring


def test_the_list_prints_both_for_each():
    from tracer.cli.commands import main as cli
    out = CliRunner().invoke(cli, ["demo", "--list"]).output.splitlines()
    assert len(out) == 2 * len(scenario_names())
    assert out[0].startswith(scenario_names()[0] + ": ")
    assert all(line.startswith("    expect: ") for line in out[1::2])
    assert any(line.startswith("spin (C): ") for line in out)


def test_cut_marks_the_cut_with_an_ellipsis():
    assert cut("abcdef", 6) == "abcdef"
    assert cut("abcdefg", 6) == "abcde…" and len(cut("abcdefg", 6)) == 6
