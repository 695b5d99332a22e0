"""Text that reaches rich, made visible by render/visible.py's ``visible`` (issue 46).

Contract:
- ``escape(text) -> str``: ``text`` (any object) with rich's markup characters escaped
  (``[stacks]`` prints as ``[stacks]``) and every character that is not printable (ESC, C1, a
  newline in a comm, U+202E) made visible. Pure. Every string hangtrace did not write itself
  goes through it before it is put into markup.
- ``plain(text) -> rich.text.Text``: the same text as a Text that is never read as markup.
- ``SafeConsole``: rich's Console that passes the text of every segment it writes (not rich's
  colour codes nor a live display's cursor moves) through ``visible``, hangtrace's line breaks
  kept: the second line behind ``escape``/``plain``. Every Console hangtrace prints on is one.
"""
from __future__ import annotations

from typing import Iterable

from rich.console import Console
from rich.markup import escape as _rich_escape
from rich.segment import Segment
from rich.text import Text

from .visible import visible

__all__ = ["escape", "plain", "visible", "SafeConsole"]


def escape(text: object) -> str:
    """``text`` made safe for rich markup (module doc)."""
    return _rich_escape(visible(text))


def plain(text: object) -> Text:
    """``text`` as a rich Text that no markup reading touches (module doc)."""
    return Text(visible(text))


class SafeConsole(Console):
    """A Console whose written text is always visible (module doc)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            seg if seg.control else Segment(visible(seg.text, "\n"), seg.style, seg.control)
            for seg in buffer)
