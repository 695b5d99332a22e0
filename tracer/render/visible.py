"""The one function that makes text safe for a terminal: every string hangtrace did not write
itself (a target's argv, comm, thread names, log and file paths, names from its environment, an
error message quoting one, a value read from a trace file) goes through ``visible`` on its way to
a terminal, whether printed by rich (render/markup.py's ``escape`` and ``plain`` call it, and
``SafeConsole`` calls it on everything a Console writes) or by ``click.echo`` (cli/options.py's
``tell``). A process started as ``exec -a $'\\e]52;c;...\\e\\\\' sleep`` must not put text on
root's clipboard, retitle its window or clear its screen (issue 46).

Contract:
- ``visible(text, keep="") -> str``: ``text`` (any object, through ``str``) with every character
  that is not printable written as its Python escape, as strace writes ``\\33`` and ps ``?``:
  C0 controls and DEL (ESC is ``\\x1b``, BEL ``\\x07``, a newline ``\\n``), C1 controls
  (U+0080-U+009F: ``\\x9b`` is CSI on some terminals), format characters that reorder or hide
  text (bidi overrides and isolates such as U+202E, zero-width joiners: ``\\u202e``), line and
  paragraph separators, surrogates (bytes a decoder escaped), unassigned and private-use code
  points. Characters of ``keep`` (hangtrace's own line breaks: ``"\\n"``) stay as they are.
  Printable text is returned unchanged (the same object). Pure, stdlib only: the CLI's error
  path imports it without rich.
"""
from __future__ import annotations

__all__ = ["visible"]


def visible(text: object, keep: str = "") -> str:
    """``text`` with every character that is not printable made visible (module doc)."""
    s = text if isinstance(text, str) else str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in s)
