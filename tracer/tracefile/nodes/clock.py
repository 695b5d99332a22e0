"""Clock offsets between nodes, from the messages their traces saw cross the network.

Contract (pure, bounded, never raises):
- ``crosses_nodes(target)``: a TCP/UDP connection whose two ends have addresses that can name
  different nodes (neither loopback nor unspecified): only such a 4-tuple can link a process of
  one node to one of another. Everything else is local to its node.
- ``Messages``: what one node saw of one connection (sends: call start and bytes; receives:
  call end and bytes), at most ``MAX_MESSAGES`` of each.
- ``pair_bounds(a, b)``: ``Bounds`` on theta = clock_b - clock_a from one connection seen at
  both ends; ``estimate(bounds)``: the offset most candidate pairs agree with (``Offset.error``
  its error); ``solve(n, edges)``: per-node offsets relative to node 0, None for a node with no
  path to it. Causality, matching and limits: the docstrings of ``pair_bounds`` and ``estimate``.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from ...linux.fdtarget import FdTarget

__all__ = ["crosses_nodes", "Messages", "Bounds", "Offset", "pair_bounds", "estimate", "solve",
           "MAX_MESSAGES", "TOL"]

MAX_MESSAGES = 512       # sends and receives kept per connection and node (the first ones)
NEAREST = 64             # sends of a receive's size tried on each side of it
MAX_SKEW = 3600.0        # seconds: a pair further apart than this is not considered
MAX_BOUNDS = 20000       # per node pair
MIN_PAIRS = 2            # an offset fewer agreeing pairs support is not used
TOL = 0.05               # seconds: the one-way latency of a pair that counts as tight


def _local_only(addr: str) -> bool:
    host = addr.rsplit(":", 1)[0].strip("[]")
    return (host.startswith("127.") or host in ("::1", "0.0.0.0", "::", "*", "")
            or host.startswith("fe80:"))


def crosses_nodes(target: FdTarget) -> bool:
    """True for a connected inet socket whose two ends may be on different nodes."""
    if target.kind not in ("tcp", "udp") or target.local is None or target.remote is None:
        return False
    return not (_local_only(target.local) or _local_only(target.remote))


@dataclass
class Messages:
    sends: List[Tuple[float, int]] = field(default_factory=list)   # (call start, bytes)
    recvs: List[Tuple[float, int]] = field(default_factory=list)   # (call end, bytes)

    def add_send(self, ts: float, n: int) -> None:
        if len(self.sends) < MAX_MESSAGES:
            self.sends.append((ts, n))

    def add_recv(self, ts: float, n: int) -> None:
        if len(self.recvs) < MAX_MESSAGES:
            self.recvs.append((ts, n))


@dataclass
class Bounds:
    """Candidate bounds on theta = clock_b - clock_a (module doc)."""
    upper: List[float] = field(default_factory=list)      # theta <= u: a sent, b received
    lower: List[float] = field(default_factory=list)      # theta >= l: b sent, a received

    def extend(self, other: "Bounds") -> None:
        room = MAX_BOUNDS - len(self.upper) - len(self.lower)
        if room > 0:
            self.upper += other.upper[:room]
            self.lower += other.lower[:max(0, room - len(other.upper))]


@dataclass
class Offset:
    theta: float          # clock_b - clock_a, seconds
    error: float          # half-width of the interval it lies in (TOL: one direction only)
    pairs: int            # candidate pairs that agree with it
    both_ways: bool


def _deltas(sends: Sequence[Tuple[float, int]], recvs: Sequence[Tuple[float, int]]
            ) -> List[float]:
    """receive time - send time for candidate pairs of equal size (module doc)."""
    by_size: Dict[int, List[float]] = {}
    for t, n in sends:
        by_size.setdefault(n, []).append(t)
    for times in by_size.values():
        times.sort()
    out: List[float] = []
    for t, n in recvs:
        times = by_size.get(n)
        if not times:
            continue
        i = bisect_left(times, t)
        for s in times[max(0, i - NEAREST):i + NEAREST]:
            if abs(t - s) <= MAX_SKEW:
                out.append(t - s)
    return out


def pair_bounds(a: Messages, b: Messages) -> Bounds:
    """Bounds from one connection seen at node a (``a``) and at node b (``b``, the reversed
    4-tuple). Causality: a byte is received after it was sent, so a send at s (a's clock) received
    at r (b's clock) gives theta <= r - s, and a send of b received by a gives theta >= s - r.
    Which receive belongs to which send is not recorded: a send and a receive of the same size are
    candidates, each receive with the sends of that size nearest in time."""
    return Bounds(upper=_deltas(a.sends, b.recvs),
                  lower=[-d for d in _deltas(b.sends, a.recvs)])


def _count(sorted_vals: List[float], lo: float, hi: float) -> int:
    return bisect_right(sorted_vals, hi) - bisect_left(sorted_vals, lo)


def estimate(bounds: Bounds, tol: float = TOL) -> Optional[Offset]:
    """The offset the most candidate pairs agree with (module doc); None without pairs.
    The point covered by the most intervals [u - TOL, u] (upper bounds) and [l, l + TOL] (lower
    bounds), nearest zero on a tie (clocks are usually close); then, among the pairs that agree,
    theta in [max lower, min upper]: the middle when both directions were seen (NTP's symmetric
    estimate), else the one bound (too large by the one-way latency). ``Offset.error`` is half the
    interval's width, or TOL with one direction only. Limits: periodic messages of one size
    (keep-alives) match every period; the estimate then rests on the alignment most pairs share
    (traces that cover about the same time favour the true one) and on both directions agreeing. A
    receive is matched with the NEAREST sends of its size on either side in raw time, so a skew
    larger than that many messages' spacing on every connection between two nodes is not found."""
    up, low = sorted(bounds.upper), sorted(bounds.lower)
    if not up and not low:
        return None
    best: Optional[Tuple[int, float, float]] = None       # (-count, |x|, x)
    for x in [u - tol for u in up] + low:                 # interval starts
        n = _count(up, x, x + tol) + _count(low, x - tol, x)
        key = (-n, abs(x), x)
        if best is None or key < best:
            best = key
    assert best is not None
    x = best[2]
    agree_up = [u for u in up if x <= u <= x + tol]
    agree_low = [lv for lv in low if x - tol <= lv <= x]
    hi = min(agree_up) if agree_up else None
    lo = max(agree_low) if agree_low else None
    pairs = len(agree_up) + len(agree_low)
    if hi is not None and lo is not None:
        if lo <= hi:
            return Offset((lo + hi) / 2, (hi - lo) / 2, pairs, True)
        return Offset((lo + hi) / 2, tol, pairs, True)     # pairs disagree a little
    if hi is not None:
        return Offset(hi, tol, pairs, False)
    assert lo is not None
    return Offset(lo, tol, pairs, False)


def solve(n: int, edges: Dict[Tuple[int, int], Offset]) -> List[Optional[Tuple[float, Offset,
                                                                            int]]]:
    """Per node: (offset to node 0, the pairwise estimate used, the node it was reached from),
    or None when no chain of estimates leads to node 0; node 0 is (0.0, None-like, 0).
    ``edges`` maps (a, b), a < b, to the estimate of clock_b - clock_a.
    The path follows the best-supported pairwise estimates (a maximum spanning tree by number of
    agreeing pairs; an estimate fewer than MIN_PAIRS pairs agree with is not used)."""
    out: List[Optional[Tuple[float, Offset, int]]] = [None] * n
    if n == 0:
        return out
    out[0] = (0.0, Offset(0.0, 0.0, 0, True), 0)
    reached = {0}
    while True:          # Prim: always the best-supported edge out of the reached set
        cand = None
        for (a, b), off in edges.items():
            if (a in reached) == (b in reached) or off.pairs < MIN_PAIRS:
                continue
            if cand is None or off.pairs > cand[1].pairs:
                cand = ((a, b), off)
        if cand is None:
            return out
        (a, b), off = cand
        if a in reached:
            base = out[a]
            assert base is not None
            out[b] = (base[0] + off.theta, off, a)
            reached.add(b)
        else:
            base = out[b]
            assert base is not None
            out[a] = (base[0] - off.theta, off, b)
            reached.add(a)
