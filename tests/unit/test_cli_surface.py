"""The command line as users of strace, py-spy and bcc tools expect it: shell completion through
click's own main, bare ``hangtrace`` prints help, ``-p/--pid`` (repeatable, comma lists), an
EXAMPLES epilog on every command, the man page and the README's synopsis made from the click
definitions, a quiet exit on EPIPE and a closed stdout, reports not wrapped when stdout is not a
terminal, ``--debug`` tracebacks, and the doctor/snapshot JSON against their schemas."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

import report_schema
from cli_run import HANGTRACE, hangtrace, one_line
from tracer.cli import commands
from tracer.cli.examples import EXAMPLES
from tracer.cli.manpage import man_page, synopsis_lines

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "fixtures" / "traces" / "sglang_like.ebpf.htrace.gz"


def _complete(env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(HANGTRACE, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env})


# --------------------------------------------------------------------------- completion
@pytest.mark.parametrize("shell,marker", [("bash", "complete -o nosort -F _hangtrace_completion"),
                                          ("zsh", "#compdef hangtrace"),
                                          ("fish", "complete --no-files --command hangtrace")])
def test_completion_scripts_come_from_clicks_main(shell, marker):
    p = _complete({"_HANGTRACE_COMPLETE": f"{shell}_source"})
    assert p.returncode == 0 and marker in p.stdout, p.stdout + p.stderr
    assert "Usage" not in p.stdout and p.stderr == ""
    same = hangtrace("completion", shell)
    assert same.returncode == 0 and same.stdout.strip() == p.stdout.strip()


def test_bash_completion_completes_commands_options_and_choices():
    words = {"hangtrace att": ["plain,attach"],
             "hangtrace attach --ba": ["plain,--backend"],
             "hangtrace attach --backend e": ["plain,ebpf"],
             "hangtrace export T -f perfetto-": None}
    for line, want in words.items():
        p = _complete({"_HANGTRACE_COMPLETE": "bash_complete", "COMP_WORDS": line,
                       "COMP_CWORD": str(len(line.split()) - 1)})
        assert p.returncode == 0, p.stderr
        if want is not None:
            assert p.stdout.split() == want, (line, p.stdout)


def _completions(args, incomplete):
    """(type, value) of what click's completion API offers after ``args`` for ``incomplete``."""
    from click.shell_completion import ShellComplete
    comp = ShellComplete(commands.main, {}, "hangtrace", commands.COMPLETE_VAR)
    return [(item.type, item.value) for item in comp.get_completions(args, incomplete)]


@pytest.mark.parametrize("args", [["export"], ["merge"], ["merge", "a.htrace.gz"], ["analyze"],
                                  ["import-strace"], ["attach", "-o"], ["attach", "--output"],
                                  ["export", "t.gz", "-o"], ["merge", "t.gz", "-o"],
                                  ["import-strace", "log", "-o"], ["demo", "-o"],
                                  ["cluster", "--via", "ssh", "-o"],
                                  ["analyze", "t", "--flight-recorder"]])
def test_file_names_complete_where_a_file_is_named(args):
    """The shell completes file names there (click's "file" completion), as after strace -o."""
    assert _completions(args, "tr") == [("file", "tr")]


@pytest.mark.parametrize("args", [["watch", "-p", "1", "-o"], ["watch", "--output-dir"],
                                  ["cluster", "--via", "ssh", "--output-dir"]])
def test_directory_names_complete_after_output_dirs(args):
    assert _completions(args, "") == [("dir", "")]


def test_formats_complete_after_dash_f():
    from tracer.render.export import FORMATS
    assert _completions(["export", "t.gz", "-f"], "") == [("plain", f) for f in FORMATS]
    assert _completions(["export", "t.gz", "--format"], "perfetto-") == [("plain",
                                                                          "perfetto-proto")]
    assert _completions(["export", "t.gz", "-f"], "zzz") == []


def test_scenarios_complete_after_demo():
    from tracer.record.demo import scenario_names
    names = scenario_names()
    assert "sglang_like" in names and len(names) > 3
    assert _completions(["demo"], "") == [("plain", n) for n in names]
    assert _completions(["demo"], "sgl") == [("plain", "sglang_like")]


def test_bash_completion_of_formats_through_the_script_protocol():
    line = "hangtrace export T -f perfetto-"
    p = _complete({"_HANGTRACE_COMPLETE": "bash_complete", "COMP_WORDS": line,
                   "COMP_CWORD": "4"})
    assert p.returncode == 0 and p.stdout.split() == ["plain,perfetto-proto"], p.stdout


def test_demo_writes_its_trace_where_dash_o_says(tmp_path):
    out = tmp_path / "demo.htrace.gz"
    p = hangtrace("demo", "pipe_deadlock", "--backend", "proc", "-d", "1", "-o", str(out),
                  "--json", timeout=180)
    assert p.returncode not in (1, 2), p.stderr          # a verdict's status, whichever
    assert out.stat().st_size > 0 and f"trace saved to {out}" in p.stderr
    assert json.loads(p.stdout)["format"] == "hangtrace.report/1"
    assert hangtrace("demo", "-o", "-").returncode == 2


def test_pid_completion_offers_running_processes():
    me = os.getpid()
    line = f"hangtrace attach -p {str(me)[:-1]}"
    p = _complete({"_HANGTRACE_COMPLETE": "bash_complete", "COMP_WORDS": line,
                   "COMP_CWORD": "3"})
    assert f"plain,{me}" in p.stdout.split(), p.stdout[:500]
    line = f"hangtrace snapshot -p 1,{me}"
    p = _complete({"_HANGTRACE_COMPLETE": "bash_complete", "COMP_WORDS": line,
                   "COMP_CWORD": "3"})
    assert f"plain,1,{me}" in p.stdout.split(), p.stdout[:500]


def test_bare_hangtrace_prints_help_and_exits_0():
    p = hangtrace()
    assert p.returncode == 0 and p.stdout.startswith("Usage: hangtrace") and p.stderr == ""
    assert "attach" in p.stdout and "Examples:" in p.stdout


# --------------------------------------------------------------------------- -p/--pid
def _sleeper() -> subprocess.Popen:
    return subprocess.Popen(["sleep", "60"])


def test_dash_p_repeatable_and_comma_lists_in_snapshot():
    a, b, c = _sleeper(), _sleeper(), _sleeper()
    try:
        p = hangtrace("snapshot", "-p", f"{a.pid},{b.pid}", "--pid", str(c.pid), str(a.pid),
                      "--json")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert doc["roots"] == [a.pid, b.pid, c.pid]     # in order, each once
        report_schema.check(doc, "snapshot")
    finally:
        for s in (a, b, c):
            s.kill()
            s.wait()


@pytest.mark.parametrize("text,pids", [("7", [7]), ("7,8", [7, 8]), ("7 8", [7, 8]),
                                       ("7, 8", [7, 8]), ("\t7\n8 ", [7, 8]),
                                       ("7 8,9", [7, 8, 9])])
def test_dash_p_takes_stracess_forms(text, pids):
    """``-p "$(pidof x)"`` (blanks), commas, both: what strace's -p takes."""
    from tracer.cli.options import PidList
    assert PidList().convert(text, None, None) == pids


def test_dash_p_whitespace_list_in_snapshot():
    a, b = _sleeper(), _sleeper()
    try:
        p = hangtrace("snapshot", "-p", f"{a.pid} {b.pid}", "--json")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["roots"] == [a.pid, b.pid]
    finally:
        for s in (a, b):
            s.kill()
            s.wait()


@pytest.mark.parametrize("cmd", [["attach"], ["snapshot"],
                                 ["watch", "--silent-for", "5", "--once"]])
@pytest.mark.parametrize("bad", ["²", "12x", "1,,2", "-5", "99999999999", "1e3"])
def test_a_pid_that_is_not_a_number_is_a_usage_error(cmd, bad):
    p = hangtrace(*cmd, "-p", bad)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and p.stderr.startswith("hangtrace: ")


@pytest.mark.parametrize("cmd", [["attach", "-d", "0.5"], ["snapshot"],
                                 ["watch", "--silent-for", "5", "--once"]])
def test_dash_p_of_a_missing_process_says_so(cmd):
    pid = 4_000_000
    while os.path.exists(f"/proc/{pid}"):
        pid -= 1
    p = hangtrace(*cmd, "-p", str(pid))
    assert p.returncode == 1 and f"no process with pid {pid}" in one_line(p.stderr)


# --------------------------------------------------------------------------- help and docs
def test_every_command_has_examples_in_its_help():
    names = sorted(commands.main.commands)
    assert set(names) | {"hangtrace"} == set(EXAMPLES), "cli/examples.py and the commands differ"
    for name in names:
        p = hangtrace(name, "--help")
        assert p.returncode == 0 and "Examples:" in p.stdout, name
        for cmd, _ in EXAMPLES[name]:
            assert cmd in p.stdout, (name, cmd)
        assert max(map(len, p.stdout.splitlines())) <= 80, name


def test_every_option_has_help_text():
    for name, cmd in commands.main.commands.items():
        for param in cmd.params:
            if isinstance(param, click.Option):
                assert param.help, f"{name} {param.opts}: no help text"


def test_the_man_page_is_generated_from_the_click_definitions():
    text = (REPO / "docs" / "hangtrace.1").read_text()
    assert text == man_page(), "docs/hangtrace.1 is stale: python -m tracer.cli.manpage"
    for name in commands.main.commands:
        assert f'.SS "hangtrace {name}"' in text
    assert "\\-\\-silent\\-for" in text and ".SH EXIT STATUS" in text


def test_the_readmes_usage_is_the_man_pages_synopsis():
    readme = (REPO / "README.md").read_text()
    usage = readme.split("## Usage\n", 1)[1]
    block = usage.split("```\n", 1)[1].split("```", 1)[0]
    assert block.splitlines() == synopsis_lines()


def test_the_man_page_renders(tmp_path):
    if not any(os.access(os.path.join(d, "man"), os.X_OK)
               for d in os.environ.get("PATH", "").split(":")):
        pytest.skip("man is not installed")
    p = subprocess.run(["man", "-l", str(REPO / "docs" / "hangtrace.1")], capture_output=True,
                       text=True, env={**os.environ, "MANWIDTH": "100", "MANPAGER": "cat"},
                       timeout=60)
    assert p.returncode == 0 and "hangtrace attach [PID]..." in p.stdout, p.stderr


# --------------------------------------------------------------------------- pipes
def test_epipe_of_export_into_head_is_quiet():
    p = subprocess.Popen(HANGTRACE + ["export", str(TRACE), "--format", "json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    first = p.stdout.readline()
    p.stdout.close()                      # what head -1 does after its line
    err = p.stderr.read().decode()
    rc = p.wait(timeout=120)
    assert json.loads(first)["event"] == "header"
    assert rc == commands.EXIT_STDOUT_GONE
    assert err == "", err


def test_json_into_a_closed_pipe_is_quiet():
    r, w = os.pipe()
    os.close(r)                           # nobody will ever read
    p = subprocess.run(HANGTRACE + ["analyze", "--json", str(TRACE)], stdout=w,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(w)
    assert p.returncode == commands.EXIT_STDOUT_GONE and p.stderr == "", p.stderr


def test_shell_pipeline_into_head():
    p = subprocess.run(["bash", "-c", f"set -o pipefail; {sys.executable} -m tracer export "
                        f"{TRACE} --format json | head -1; echo status=$?"],
                       capture_output=True, text=True, timeout=120)
    assert p.stderr == "" and "status=141" in p.stdout, p.stdout + p.stderr


def test_a_closed_stdout_drops_the_output_and_keeps_the_status():
    p = subprocess.run(HANGTRACE + ["analyze", str(TRACE)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    want = p.returncode
    p = subprocess.run(["bash", "-c", f"exec {sys.executable} -m tracer analyze {TRACE} >&-"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == want and p.stderr == "", p.stderr
    p = subprocess.run(["bash", "-c", f"exec {sys.executable} -m tracer export {TRACE} "
                        "-f json >&-"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stderr == "", p.stderr


def test_reports_are_not_wrapped_when_stdout_is_not_a_terminal():
    p = hangtrace("analyze", str(TRACE))
    doc = json.loads(hangtrace("analyze", "--json", str(TRACE)).stdout)
    summary = doc["root_cause"]["summary"]
    assert len(summary) > 80
    assert any(summary in line for line in p.stdout.splitlines()), p.stdout
    assert max(map(len, p.stdout.splitlines())) > 100
    assert not any(line != line.rstrip() for line in p.stdout.splitlines())   # no padding


# --------------------------------------------------------------------------- --debug
def _boom(*a, **k):
    raise ValueError("boom")


@pytest.mark.parametrize("how", ["flag", "env", "neither"])
def test_debug_shows_the_traceback_of_an_internal_error(monkeypatch, capsys, how):
    import tracer.load.trace as load_trace
    monkeypatch.setattr(load_trace, "analyze_trace", _boom)
    monkeypatch.setattr(commands, "_debug", {"on": False})
    args = ["hangtrace"] + (["--debug"] if how == "flag" else []) + ["analyze", str(TRACE)]
    monkeypatch.setattr(sys, "argv", args)
    if how == "env":
        monkeypatch.setenv("HANGTRACE_DEBUG", "1")
    else:
        monkeypatch.delenv("HANGTRACE_DEBUG", raising=False)
    with pytest.raises(SystemExit) as done:
        commands.entry()
    assert done.value.code == 1
    err = capsys.readouterr().err
    assert "hangtrace: internal error: ValueError: boom" in err
    assert ("Traceback" in err) == (how != "neither"), err
    if how == "neither":
        assert "--debug" in err and len(err.strip().splitlines()) == 1


# --------------------------------------------------------------------------- schemas
def test_doctor_json_has_a_format_and_its_schema():
    p = hangtrace("doctor", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["format"] == "hangtrace.doctor/1"
    report_schema.check(doc, "doctor")
    assert "compiled_helpers" in doc


def test_the_console_report_into_head_is_quiet():
    """rich's Console exits 1 on EPIPE by itself; the report's console hands it to the command
    line, which says 141 as for every other output."""
    # the reader is gone before the report is written (analysis takes longer than `true`)
    p = subprocess.run(["bash", "-c", f"set -o pipefail; {sys.executable} -m tracer analyze "
                        f"{TRACE} | true; echo status=$?"],
                       capture_output=True, text=True, timeout=120)
    assert p.stderr == "" and p.stdout.strip() == "status=141", p.stdout + p.stderr
