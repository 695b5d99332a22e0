"""The one escape of text that reaches rich: every string hangtrace did not write itself (a comm,
a path, a fix that names ``pip install 'hangtrace[stacks]'``, an error's message) goes through
``escape`` before it is printed on a rich Console or put into markup.

Contract:
- ``escape(text) -> str``: ``text`` (any object, through ``str``) with rich's markup characters
  escaped (``[stacks]`` prints as ``[stacks]``, never as a tag that is dropped) and control
  characters (a newline in a comm) made visible as their Python escapes. Pure.
- ``plain(text) -> rich.text.Text``: the same text as a Text that is never read as markup.
"""
from __future__ import annotations

from rich.markup import escape as _rich_escape
from rich.text import Text

__all__ = ["escape", "plain"]


def _visible(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def escape(text: object) -> str:
    """``text`` made safe for rich markup (module doc)."""
    return _rich_escape(_visible(str(text)))


def plain(text: object) -> Text:
    """``text`` as a rich Text that no markup reading touches (module doc)."""
    return Text(_visible(str(text)))
