"""Text that reaches rich: every string hangtrace did not write itself (a comm, a path, a fix that
names ``pip install 'hangtrace[stacks]'``, an error's message) goes through ``escape`` before it is
put into markup, or ``plain`` before it becomes a Text; every Console hangtrace prints on is a
``SafeConsole``. All three make text visible with render/visible.py's ``visible``, the one
function that keeps a target's escape sequences off the terminal (issue 46).

Contract:
- ``escape(text) -> str``: ``text`` (any object, through ``str``) with rich's markup characters
  escaped (``[stacks]`` prints as ``[stacks]``, never as a tag that is dropped) and every
  character that is not printable (ESC, C1, a newline in a comm, U+202E) made visible as its
  Python escape (``visible``). Pure.
- ``plain(text) -> rich.text.Text``: the same text as a Text that is never read as markup.
- ``SafeConsole``: rich's Console, except that the text of every segment it writes (not its
  styles' colour codes nor the cursor moves of a live display, which rich makes) goes through
  ``visible`` keeping hangtrace's own line breaks: a string that reached a renderable without
  ``escape`` or ``plain`` (an oversight, a renderer added later) still cannot put a raw escape
  sequence on the terminal. It is the second line; ``escape`` and ``plain`` are the first (they
  keep the widths rich measured).
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
