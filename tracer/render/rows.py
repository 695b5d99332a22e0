"""A report's lines kept to a screen's rows (issue 43: the report on one screen).

Contract: ``one_row_each(tree)`` makes every line of a rich Tree take one row of the console it
is printed on, cut with an ellipsis; ``print_rows(console, text, rows)`` prints ``text``
wrapped to the console's width and cut (with an ellipsis) after ``rows`` rows. Nothing else:
what is shown is the renderers' choice.
"""
from __future__ import annotations

from rich.console import Console
from rich.text import Text
from rich.tree import Tree

__all__ = ["one_row_each", "print_rows"]


def print_rows(console: Console, text: Text, rows: int) -> None:
    """Print ``text`` wrapped to the console's width, cut (with an ellipsis) after ``rows``."""
    lines = text.wrap(console, console.width)
    if len(lines) > rows:
        lines = lines[:rows]
        last = lines[-1]
        last.rstrip()
        if last.cell_len >= console.width:
            last.truncate(console.width - 1)
        last.append("…")
    for line in lines:
        console.print(line, no_wrap=True, overflow="ellipsis")


def one_row_each(tree: Tree) -> Tree:
    """Every line of ``tree`` kept to one row of the screen, cut with an ellipsis."""
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node.label, Text):
            node.label.no_wrap = True
            node.label.overflow = "ellipsis"
        pending.extend(node.children)
    return tree
