"""The one function that makes text safe for a terminal: every string hangtrace did not write
itself (a target's argv, comm, thread names, log paths, names from its environment, an error
quoting one, a value read from a trace file) goes through ``visible`` on its way to a terminal,
through rich (render/markup.py: ``escape``, ``plain``, ``SafeConsole``) or ``click.echo``
(cli/options.py's ``tell``): a process named ``$'\\e]52;c;...'`` must not reach root's clipboard,
title or screen (issue 46).

Contract: ``visible(text, keep="") -> str``: ``text`` (any object, through ``str``) with each
character that is not printable (``str.isprintable``: C0, DEL, C1, bidi and other format
characters, separators, surrogates, unassigned) written as its Python escape (``\\x1b``,
``\\x9b``, ``\\u202e``), as strace writes ``\\33``; characters of ``keep`` stay. Pure, stdlib only.
"""
from __future__ import annotations

__all__ = ["visible"]


def visible(text: object, keep: str = "") -> str:
    """``text`` with every character that is not printable made visible (module doc)."""
    s = text if isinstance(text, str) else str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in s)
