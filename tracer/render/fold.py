"""Folding what is alike, for the renderers (STAT's rule: group what has one shape, count it).

Contract: pure functions over plain values, one rule each, shared by ``snapshot``'s thread list
and the console report's compact view (console.py, compact.py):
- ``fold_groups(items, key)``: items with one key, in the order of each key's first item; a
  key held by fewer than ``FOLD_MIN`` items is not folded (its items come back one group each);
- ``shape(text)``: the text with what differs between alike things (addresses, numbers when
  ``numbers``) masked, for a fold key;
- ``number_ranges([3, 4, 5, 9])`` -> ``"3-5,9"``; ``label_ranges(["scheduler TP0", ...])`` ->
  ``"scheduler TP0-4,6-7"`` (labels that end in a number, grouped by what comes before it);
- ``pid_runs(text)``: "pid 3, pid 4, pid 5, pid 9" in a sentence -> "pids 3-5,9";
- ``cut(text, width)``: at most ``width`` characters, an ellipsis ("…") where it was cut.
"""
from __future__ import annotations

import re
from typing import Callable, Dict, Hashable, Iterable, List, Sequence, TypeVar

from ..linux.intparse import parse_uint

__all__ = ["FOLD_MIN", "fold_groups", "shape", "number_ranges", "label_ranges", "cut",
           "pid_runs"]

T = TypeVar("T")
FOLD_MIN = 3            # alike items drawn one by one up to this many minus one
_ADDR_RE = re.compile(r"0x[0-9a-fA-F]+")
_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")
_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")
_PID_RUN = re.compile(r"pid [0-9]{1,10}(?:, pid [0-9]{1,10}){2,}(?![0-9])")


def fold_groups(items: Iterable[T], key: Callable[[T], Hashable],
                min_count: int = FOLD_MIN) -> List[List[T]]:
    """Groups of items with one key (module doc), in the order of each group's first item."""
    groups: Dict[Hashable, List[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    out: List[List[T]] = []
    for members in groups.values():
        if len(members) >= min_count:
            out.append(members)
        else:
            out.extend([m] for m in members)
    return out


def shape(text: str, numbers: bool = False) -> str:
    """``text`` with addresses (and with ``numbers``, every number) masked."""
    text = _ADDR_RE.sub("0x…", text)
    return _NUMBER_RE.sub("#", text) if numbers else text


def number_ranges(numbers: Iterable[int]) -> str:
    """Sorted numbers as ranges: ``[3, 4, 5, 9]`` -> ``"3-5,9"``."""
    nums = sorted(set(numbers))
    if not nums:
        return ""
    parts, start, prev = [], nums[0], nums[0]
    for n in nums[1:] + [None]:  # type: ignore[list-item]
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ",".join(parts)


def label_ranges(labels: Sequence[str]) -> str:
    """Labels that end in a number, grouped by what comes before it, as ranges ("scheduler
    TP0-4,6-7"); other labels as they are; each group where its first label was."""
    order: List[str] = []
    numbered: Dict[str, List[int]] = {}
    for label in labels:
        m = _TRAILING_NUMBER.match(label)
        number = parse_uint(m.group(2), 10) if m else None
        head = m.group(1) if m else label
        if number is None:
            if label not in order:
                order.append(label)
            continue
        if head not in numbered:
            numbered[head] = []
            order.append(head)
        numbered[head].append(number)
    return ", ".join(f"{h}{number_ranges(numbered[h])}" if h in numbered else h for h in order)


def cut(text: str, width: int) -> str:
    """At most ``width`` characters; an ellipsis ends a text that was cut."""
    return text if len(text) <= width else text[:max(0, width - 1)] + "…"


def pid_runs(text: str) -> str:
    """Lists of three pids or more in ``text`` ("pid 3, pid 4, pid 5") as ranges ("pids 3-5")."""
    return _PID_RUN.sub(lambda m: "pids " + number_ranges(
        int(x) for x in re.findall(r"[0-9]+", m.group(0))), text)
