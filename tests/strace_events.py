"""The events a few strace lines make, through the one converter the importer and the live
strace backend use (strace/convert.py): ``events_of(lines)``, the converter finished, as a
test's table of real lines is judged."""
from __future__ import annotations

from typing import Iterable, List

from tracer import events as ev
from tracer.strace.convert import StraceConverter


def events_of(lines: Iterable[str]) -> List[ev.Event]:
    conv = StraceConverter()
    out: List[ev.Event] = []
    for line in lines:
        out += conv.feed_text(line)
    return out + conv.finish()
