"""The one escape of text a target controls on its way to a terminal (render/visible.py), and the
ways it is reached: markup.py's ``escape``/``plain``, ``SafeConsole``, cli/options.py's ``tell``
and the live view (issue 46 item 1)."""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text

from tracer.render.markup import SafeConsole, escape, plain
from tracer.render.visible import visible

# (what a target wrote, what the terminal is given)
TABLE = [
    ("worker", "worker"),
    ("python3 -m sglang.launch_server", "python3 -m sglang.launch_server"),
    ("/tmp/ünïcødé 日本 ✓", "/tmp/ünïcødé 日本 ✓"),                 # printable: untouched
    ("a\\x1b", "a\\x1b"),                                           # a backslash stays
    ("\x1b]52;c;Y3VybCBldmlsfHNoCg==\x1b\\", "\\x1b]52;c;Y3VybCBldmlsfHNoCg==\\x1b\\"),  # OSC 52
    ("\x1b]0;PWN\x1b\\\x1b[2J", "\\x1b]0;PWN\\x1b\\\\x1b[2J"),        # title, then clear screen
    ("\x1b]2;T\x07", "\\x1b]2;T\\x07"),                               # OSC ended by BEL
    ("\x9b2J", "\\x9b2J"),                                           # C1 CSI
    ("\x9d0;t\x9c", "\\x9d0;t\\x9c"),                                # C1 OSC ... ST
    ("\x85", "\\x85"),                                               # C1 NEL
    ("evil\u202egpj.exe", "evil\\u202egpj.exe"),                     # right-to-left override
    ("\u2066x\u2069", "\\u2066x\\u2069"),                            # bidi isolates
    ("a\u200bb", "a\\u200bb"),                                       # zero-width space
    ("a\u2028b", "a\\u2028b"),                                       # line separator
    ("line\nnext\r\tx", "line\\nnext\\r\\tx"),                       # C0 controls
    ("\x00\x08\x7f", "\\x00\\x08\\x7f"),                              # NUL, BS, DEL
    ("bad\udc9bbyte", "bad\\udc9bbyte"),                             # a byte a decoder escaped
    ("\U000e0041", "\\U000e0041"),                                   # a tag character
    (12345, "12345"),                                                # any object, through str
]


@pytest.mark.parametrize("raw,shown", TABLE)
def test_visible(raw: object, shown: str) -> None:
    out = visible(raw)
    assert out == shown
    assert not any(0x80 <= ord(c) <= 0x9f or ord(c) < 0x20 or ord(c) == 0x7f for c in out)
    assert out.isprintable()


def test_visible_keeps_what_it_is_told_and_printable_text_is_the_same_object() -> None:
    assert visible("a\nb\x1b", keep="\n") == "a\nb\\x1b"
    s = "plain text"
    assert visible(s) is s


@pytest.mark.parametrize("raw,shown", TABLE)
def test_escape_and_plain_go_through_visible(raw: object, shown: str) -> None:
    # (rich's own escape doubles a trailing backslash: its quirk, not a way to the terminal)
    assert Text.from_markup(escape(raw)).plain.rstrip("\\") == shown.rstrip("\\")
    assert plain(raw).plain == shown
    assert Text.from_markup(escape("[stacks]")).plain == "[stacks]"


def _written(renderable, cls=SafeConsole) -> str:
    buf = io.StringIO()
    console = cls(file=buf, force_terminal=True, color_system="truecolor", width=200)
    console.print(renderable)
    return buf.getvalue()


def test_safe_console_writes_no_raw_escape_it_was_given() -> None:
    """A Text made without plain/escape (an oversight) still cannot write the target's ESC;
    the console's own colour codes and line breaks are kept."""
    raw = Text("name \x1b]52;c;eA==\x1b\\ \x9b2J\u202e\nnext", style="bold red")
    out = _written(raw)
    assert "\x1b]52" not in out and "\x9b" not in out and "\u202e" not in out
    assert "\\x1b]52;c;eA==\\x1b\\ \\x9b2J\\u202e" in out
    assert "\x1b[1;31m" in out                 # rich's own style codes
    assert out.endswith("\n\x1b[1;31mnext\x1b[0m\n")
    assert "\x1b]52" in _written(raw, Console)  # what a plain Console does (the hole)


def test_tell_makes_a_line_visible(capsys) -> None:
    from tracer.cli.options import tell
    tell("silent since 05:00 (last progress: pid 7 (\x1b]0;PWN\x1b\\) wrote 5 B to /x\x07)")
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert err == ("hangtrace: silent since 05:00 (last progress: pid 7 (\\x1b]0;PWN\\x1b\\) "
                   "wrote 5 B to /x\\x07)\n")


def test_live_view_rows_are_visible() -> None:
    """The live view's names (argv, comm, thread names) and root cause, drawn on a plain
    Console (no second line): nothing raw from the target."""
    import time
    from tracer import events as ev
    from tracer.analysis.analyzer import Analyzer
    from tracer.render.live import LiveView
    start = time.time() - 1
    info = ev.ProcessInfo(ts=start, pid=500, ppid=1, comm="\x1b]0;PWN\x1b\\\x1b[2J",
                          cmdline=["\x1b]52;c;Y3VybA==\x1b\\", "300"],
                          threads={500: "\x1b]0;PWN\x1b\\", 501: "\x1b]2;T\x07\x9b\u202e"})
    an = Analyzer(start=start, backends=["proc"], processes=[info], roots=[500])
    buf = io.StringIO()
    view = LiveView(Console(file=buf, force_terminal=True, width=200, height=60), 2.0, [500])
    with view:
        view.say("hangtrace: pid 500 (\x1b]0;PWN\x1b\\)")
        view.on_tick(1.0, an)
    out = buf.getvalue()
    assert not re.search(r"\x1b\](52|0|2);|\x1b\[2J|\x9b|\u202e|\x07", out), out
    assert "\\x1b]52;c;Y3VybA==" in out and "\\x1b]2;T" in out


def test_dot_export_labels_are_visible() -> None:
    """``export -f dot`` without -o prints on the terminal: a comm's escape sequence is shown."""
    from tracer.render.export.dot import render_dot
    graph = {"nodes": [{"id": "t1", "label": "\x1b]0;PWN\x1b\\ 1", "kind": "thread", "pid": 1},
                       {"id": "t2", "label": "w\u202e 2\ud8ff", "kind": "thread", "pid": 1}],
             "edges": [{"src": "t1", "dst": "t2", "kind": "futex", "object": "futex 0x1",
                        "text": "waits\x9b2J"}]}
    out = render_dot(graph)
    assert not re.search(r"[\x1b\x9b\u202e\ud800-\udfff]", out), out
    assert '\\\\x1b]0;PWN' in out and "\\\\u202e" in out and "\ufffd" in out


@pytest.mark.parametrize("debug", [False, True])
def test_errors_and_tracebacks_are_visible(monkeypatch, capsys, tmp_path, debug) -> None:
    """An error line quoting a target's string, and --debug's traceback of an internal error
    whose message holds one: nothing raw on stderr."""
    import sys
    from tracer.cli import commands
    import tracer.load.trace as load_trace

    def boom(*a, **k):
        raise ValueError("comm \x1b]0;PWN\x1b\\ \x9b2J")

    monkeypatch.setattr(load_trace, "analyze_trace", boom)
    monkeypatch.setattr(commands, "_debug", {"on": False})
    trace = Path(__file__).resolve().parents[2] / "fixtures" / "traces" / \
        "feeder_blocked.proc.htrace.gz"
    monkeypatch.setattr(sys, "argv", ["hangtrace"] + (["--debug"] if debug else [])
                        + ["analyze", str(tmp_path / "no\x1b]52;c;eA==\x07such")])
    with pytest.raises(SystemExit):
        commands.entry()
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x9b" not in err and "\x07" not in err, err
    assert "no\\x1b]52;c;eA==\\x07such" in err
    monkeypatch.setattr(sys, "argv", ["hangtrace"] + (["--debug"] if debug else [])
                        + ["analyze", str(trace)])
    with pytest.raises(SystemExit):
        commands.entry()
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x9b" not in err, err
    assert "\\x1b]0;PWN" in err
    assert ("Traceback" in err) == debug
