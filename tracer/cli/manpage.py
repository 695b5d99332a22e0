"""The man page, hangtrace(1), and the usage synopsis, both made from the click definitions.

Contract:
- ``synopsis_lines()``: one entry per command (``hangtrace attach [PID]... [-p PID[,PID...]]
  ...``), wrapped at ``SYNOPSIS_WIDTH`` with continuation lines indented under the first
  option. The README's usage block is exactly these lines (a test compares them).
- ``man_page()``: the roff text of hangtrace(1): NAME, SYNOPSIS (the lines above), DESCRIPTION
  (the group's help), COMMANDS (each command's help, options and examples: cli/examples.py),
  EXIT STATUS, ENVIRONMENT, SEE ALSO. No date in it: the same definitions give the same bytes.
- ``python -m tracer.cli.manpage [--check] [FILE]`` writes it (default docs/hangtrace.1, which
  the package installs as share/man/man1/hangtrace.1); ``--check`` exits 1 when FILE differs.
"""
from __future__ import annotations

import sys
from typing import List, Optional

import click

from .. import __version__
from .examples import EXAMPLES

__all__ = ["synopsis_lines", "man_page", "SYNOPSIS_WIDTH"]

SYNOPSIS_WIDTH = 96
ENVIRONMENT = [
    ("HANGTRACE_DEBUG=1", "as --debug: an internal error shows its traceback."),
    ("HANGTRACE_PURE=1", "run the pure-Python twins of the compiled helpers."),
    ("HANGTRACE_PY_SPY", "the py-spy program to use for Python stacks."),
    ("HANGTRACE_PROGRESS_DELAY", "seconds of work before a progress bar appears (0.5)."),
    ("HANGTRACE_REQUIRE_EBPF=1", "scripts/setup.sh fails when the eBPF backend cannot load."),
    ("_HANGTRACE_COMPLETE", "bash_source, zsh_source or fish_source: print the shell "
                            "completion script (see hangtrace completion)."),
]
EXIT_STATUS = [
    ("0", "progressing or idle"), ("1", "error (one line on stderr)"), ("2", "usage error"),
    ("3", "busy-waiting"), ("4", "deadlocked"), ("5", "exited"), ("6", "blocked on the GPU"),
    ("7", "unknown: part of the tree could not be observed or judged"),
    ("130", "interrupted (Ctrl-C) before the recording began"),
    ("141", "the reader of standard output went away (| head): quietly"),
]
SEE_ALSO = "strace(1), perf(1), gdb(1), py-spy(1), bpftrace(8), ptrace(2), proc(5)"


def _commands() -> List[click.Command]:
    from .commands import main
    return list(main.commands.values())


def _metavar(p: click.Parameter, ctx: click.Context) -> str:
    if isinstance(p.type, click.Choice):
        return "|".join(map(str, p.type.choices))
    return p.make_metavar(ctx) if isinstance(p, click.Argument) else \
        (p.metavar or p.type.name.upper())   # type: ignore[union-attr]


def _words(cmd: click.Command, ctx: click.Context) -> List[str]:
    out: List[str] = []
    for p in cmd.params:
        if isinstance(p, click.Argument):
            out.append(_metavar(p, ctx))
            continue
        if not isinstance(p, click.Option) or p.hidden or "--help" in p.opts:
            continue
        name = min(p.opts, key=lambda o: (not o.startswith("-") or o.startswith("--"), o))
        word = name if p.is_flag else f"{name} {_metavar(p, ctx)}"
        if p.multiple:
            word += "..." if p.required else ""
        out.append(word if p.required else f"[{word}]" + ("..." if p.multiple else ""))
    return out


def synopsis_lines(width: int = SYNOPSIS_WIDTH) -> List[str]:
    """The usage synopsis, one command after another (module doc)."""
    from .commands import main
    lines: List[str] = []
    for cmd in _commands():
        ctx = click.Context(cmd, info_name=cmd.name, parent=click.Context(main, info_name="hangtrace"))
        head = f"hangtrace {cmd.name}"
        line, indent = head, " " * (len(head) + 1)
        for word in _words(cmd, ctx):
            if len(line) + 1 + len(word) > width and line.strip() != head:
                lines.append(line)
                line = indent + word
            else:
                line += " " + word
        lines.append(line)
    return lines


def _roff(text: str) -> str:
    """Text for roff: backslashes and leading dots or quotes escaped."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + ln) if ln[:1] in (".", "'") else ln for ln in text.splitlines())


def _paragraphs(help_text: Optional[str]) -> str:
    paras = [" ".join(p.split()) for p in (help_text or "").split("\n\n") if p.strip()]
    return "\n.PP\n".join(_roff(p) for p in paras)


def _examples(name: str) -> List[str]:
    out: List[str] = []
    for cmd, what in EXAMPLES.get(name, []):
        out += [".TP", f".B {_roff(cmd)}", _roff(what[:1].upper() + what[1:] + ".")]
    return out


def man_page() -> str:
    from .commands import main
    top = click.Context(main, info_name="hangtrace")
    out = [f'.TH HANGTRACE 1 "" "hangtrace {__version__}" "User Commands"', ".SH NAME",
           "hangtrace \\- tell whether a silent process tree is progressing, busy\\-waiting or "
           "deadlocked, and why", ".SH SYNOPSIS", ".nf"]
    out += [_roff(line) for line in synopsis_lines()]
    out += [".fi", ".SH DESCRIPTION", _paragraphs(main.help.split("\n\n")[0] if main.help else ""),
            ".PP", "Global options: \\fB\\-\\-debug\\fR (the traceback of an internal error), "
            "\\fB\\-\\-version\\fR, \\fB\\-h\\fR, \\fB\\-\\-help\\fR.", ".SH COMMANDS"]
    for cmd in _commands():
        ctx = click.Context(cmd, info_name=cmd.name, parent=top)
        out += [f'.SS "hangtrace {cmd.name}"', _paragraphs(cmd.help)]
        for p in cmd.params:
            if not isinstance(p, click.Option) or "--help" in p.opts:
                continue
            rec = p.get_help_record(ctx)
            if rec is None:
                continue
            out += [".TP", f".B {_roff(rec[0])}", _roff(" ".join(rec[1].split()))]
        if EXAMPLES.get(cmd.name or ""):
            out += [".PP", "Examples:", ".RS"] + _examples(cmd.name or "") + [".RE"]
    out += [".SH EXIT STATUS"]
    for code, what in EXIT_STATUS:
        out += [".TP", f".B {code}", _roff(what[:1].upper() + what[1:] + ".")]
    out += [".SH ENVIRONMENT"]
    for name, what in ENVIRONMENT:
        out += [".TP", f".B {_roff(name)}", _roff(what)]
    out += [".SH EXAMPLES"] + _examples("hangtrace")
    out += [".SH SEE ALSO", _roff(SEE_ALSO), ""]
    return "\n".join(out)


def main(argv: Optional[List[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in args):
        print("usage: python -m tracer.cli.manpage [--check] [PATH]   (default docs/hangtrace.1)")
        return 0
    unknown = [a for a in args if a.startswith("-") and a != "--check"]
    if unknown:
        print(f"hangtrace manpage: unknown option {unknown[0]}", file=sys.stderr)
        return 2
    check = "--check" in args
    files = [a for a in args if a != "--check"]
    path = files[0] if files else "docs/hangtrace.1"
    text = man_page()
    if check:
        try:
            with open(path) as f:
                same = f.read() == text
        except OSError:
            same = False
        if not same:
            print(f"{path} is not what the click definitions give: python -m "
                  "tracer.cli.manpage", file=sys.stderr)
        return 0 if same else 1
    from ..outputs import replacing
    with replacing(path) as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
