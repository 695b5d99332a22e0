"""Whether a thread's code moves over several Python stack samples: a thread on a CPU whose
frames go through different places (CUDA graph capture walking model layers, a compile, a
warm-up) computes; one whose frames stay on a line or two spins.

Contract: ``code_moves(e)`` -> a sentence when the ``StackSamples`` event ``e`` has at least
``MIN_SAMPLES`` samples of which at least ``MIN_DISTINCT`` differ (frames and lines), at least
``MIN_FUNCTIONS`` differ in their functions alone (a spin loop, even one around a body of
several lines or one that calls a helper, stays in one or two chains of functions) and at least
``MIN_BRANCHES`` of those chains are not the callers of another (a loop that calls a helper that
calls another is one branch, however deep it is sampled), else None.
"""
from __future__ import annotations

import re
from typing import List, Optional

from ...events.stacks import StackSamples

__all__ = ["code_moves", "MIN_SAMPLES", "MIN_DISTINCT", "MIN_BRANCHES"]

MIN_SAMPLES = 4
MIN_DISTINCT = 3
MIN_FUNCTIONS = 3
MIN_BRANCHES = 2
SHOWN = 3
_LINE = re.compile(r":\d+\)$")


def _functions(stack: tuple) -> tuple:
    """The stack's frames without their line numbers."""
    return tuple(_LINE.sub(")", f) for f in stack)


def _branches(chains: set) -> int:
    """How many of ``chains`` (innermost frame first) are not the outer part of another one."""
    return sum(1 for c in chains
               if not any(len(d) > len(c) and d[len(d) - len(c):] == c for d in chains))


def _telling(stack: tuple, common: set) -> str:
    """The innermost frame of ``stack`` whose function is not in every sample (the place that
    tells the samples apart), else its innermost frame."""
    return next((f for f in stack if _LINE.sub(")", f) not in common), stack[0])


def code_moves(e: Optional[StackSamples]) -> Optional[str]:
    """The evidence that the thread's code moved (module doc), or None."""
    if e is None:
        return None
    samples = [tuple(s) for s in e.samples if s]
    if len(samples) < MIN_SAMPLES:
        return None
    distinct: List[tuple] = list(dict.fromkeys(samples))
    chains = {_functions(s) for s in distinct}
    if len(distinct) < MIN_DISTINCT or len(chains) < MIN_FUNCTIONS \
            or _branches(chains) < MIN_BRANCHES:
        return None
    common = set.intersection(*(set(_functions(s)) for s in distinct))
    telling = list(dict.fromkeys(_telling(s, common) for s in distinct))
    where = ", ".join(telling[:SHOWN])
    more = f" and {len(telling) - SHOWN} more" if len(telling) > SHOWN else ""
    return (f"its Python code moves: {len(distinct)} different stacks in {len(samples)} "
            f"samples over {e.span:.1f} s ({where}{more})")
