"""Traffic on one socket fd of one thread, and what tells a keep-alive from output.

Contract:
- ``FdTraffic`` accumulates, for one (thread, fd) over one lifetime of the fd, the sends and
  receives a syscall backend saw (which: its docstring); eBPF's in-kernel counts fill the same
  fields except the intervals (kernel_counts.socket_traffic, through ``from_counters``).
- ``keepalive(tr, window)`` is a pure predicate: small messages of near-constant size at a
  steady, slow period are a heartbeat, which keeps a connection alive and says nothing about
  progress; anything else sent on a socket is output. It decides by behaviour only: thread
  and peer names are never consulted. Its thresholds (``SMALL``, ``SIZE_SLACK``,
  ``MAX_RATE``, ``MAX_CV``): its docstring. ``describe(tr)``: one line for the evidence.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

SMALL = 256
SIZE_SLACK = 32
MAX_RATE = 4.0
MAX_CV = 0.6
BURST_GAP = 0.05      # sends this close together are one message (a length prefix, a body)


@dataclass
class FdTraffic:
    """One (thread, fd) over one lifetime of the fd (a close, a dup2 onto it or another object
    behind the number starts a new one: fd_lifetimes.traffic_of): the sends and receives a syscall
    backend saw: calls, bytes, smallest and largest message, first and last send (and the thread's
    call count then), and the spread of the intervals between sends (Welford's running mean and
    variance). eBPF's in-kernel counts fill the same fields except the intervals
    (kernel_counts.socket_traffic)."""
    fd: int
    target: str = ""
    kind: Optional[str] = None
    sends: int = 0                # messages: sends closer than BURST_GAP to the one before
    sent: int = 0                 # are one message (a length prefix and its body, ...)
    min_send: Optional[int] = None
    max_send: int = 0
    first_send: Optional[float] = None
    last_send: Optional[float] = None
    receives: int = 0
    received: int = 0
    max_receive: int = 0
    gaps: int = 0                 # Welford over the intervals between messages
    gap_mean: float = 0.0
    gap_m2: float = 0.0
    calls: int = 0                # send calls
    calls_at_send: Optional[int] = None   # the thread's completed calls at its last send
    _burst: int = 0               # bytes of the message being sent
    _burst_start: Optional[float] = None
    _recv_burst: int = 0
    _last_recv: Optional[float] = None

    def send(self, ts: float, n: int) -> None:
        self.calls += 1
        self.sent += n
        if self.last_send is not None and 0 <= ts - self.last_send < BURST_GAP:
            self._burst += n                      # the same message, sent in pieces
            self.last_send = ts
            self.max_send = max(self.max_send, self._burst)
            return
        if self._burst_start is not None:         # the message before is complete
            self.min_send = self._burst if self.min_send is None else min(self.min_send,
                                                                          self._burst)
            gap = ts - self._burst_start
            if gap >= 0:
                self.gaps += 1
                d = gap - self.gap_mean
                self.gap_mean += d / self.gaps
                self.gap_m2 += d * (gap - self.gap_mean)
        if self.first_send is None:
            self.first_send = ts
        self.sends += 1
        self._burst, self._burst_start, self.last_send = n, ts, ts
        self.max_send = max(self.max_send, n)

    @property
    def min_message(self) -> Optional[int]:
        """The smallest message sent, the one being sent included."""
        if self.sends == 0:
            return self.min_send
        last = self._burst if self._burst_start is not None else None
        sizes = [x for x in (self.min_send, last) if x is not None]
        return min(sizes) if sizes else None

    def receive(self, n: int, ts: Optional[float] = None) -> None:
        if ts is not None and self._last_recv is not None and 0 <= ts - self._last_recv < \
                BURST_GAP:
            self._recv_burst += n
        else:
            self.receives += 1
            self._recv_burst = n
        self._last_recv = ts
        self.received += n
        self.max_receive = max(self.max_receive, self._recv_burst)

    @property
    def gap_cv(self) -> Optional[float]:
        """Coefficient of variation of the intervals between messages (None: fewer than 2)."""
        if self.gaps < 2 or self.gap_mean <= 0:
            return None
        return math.sqrt(self.gap_m2 / (self.gaps - 1)) / self.gap_mean

    def period(self) -> Optional[float]:
        if self.gaps >= 1 and self.gap_mean > 0:
            return self.gap_mean
        return None


def keepalive(tr: FdTraffic, window: float) -> bool:
    """Whether the traffic on this fd is a heartbeat, not output: small messages of near-constant
    size at a steady, slow period (answered, if at all, by small messages too), as NCCL's RAS
    keep-alives, PyTorch's TCPStore heartbeat, ZeroMQ and gRPC keep-alives, a health check.

    Thresholds: a keep-alive message carries at most ``SMALL`` bytes (NCCL RAS: 4+56 B; TCPStore
    check: a few bytes), its size varies by at most max(``SIZE_SLACK`` B, a quarter), it comes at
    most ``MAX_RATE`` times a second each way (a token stream of a serving engine comes faster:
    that is output), and with three messages or more their intervals vary by at most ``MAX_CV`` of
    their mean (a steady period)."""
    if tr.sends == 0 or tr.sent == 0:
        return False
    if tr.max_send > SMALL or tr.max_receive > SMALL:
        return False
    low = tr.min_message if tr.min_message is not None else tr.max_send
    if tr.max_send - low > max(SIZE_SLACK, tr.max_send // 4):
        return False
    if window > 0 and (tr.sends / window > MAX_RATE or tr.receives / window > MAX_RATE):
        return False
    cv = tr.gap_cv
    return tr.sends < 3 or cv is None or cv <= MAX_CV


def from_counters(fd: int, target: str, sends: int, sent: int, receives: int,
                  received: int, kind: Optional[str] = "tcp") -> FdTraffic:
    """A socket's traffic as the kernel's counters show it (no sizes per message, no times):
    every message taken at the average size."""
    avg_out = sent // sends if sends else 0
    avg_in = received // receives if receives else 0
    return FdTraffic(fd, target, kind, sends=sends, sent=sent, min_send=avg_out,
                     max_send=avg_out, receives=receives, received=received,
                     max_receive=avg_in, calls=sends)


def describe(tr: FdTraffic) -> str:
    """'fd 5 (TCP:[..]): 12 messages of 30 B each way, every 0.50 s' for the evidence."""
    where = f"fd {tr.fd} ({tr.target})" if tr.target else f"fd {tr.fd}"
    low = tr.min_message
    size = f"{low}-{tr.max_send} B" if low != tr.max_send else f"{tr.max_send} B"
    period = tr.period()
    every = f", every {period:.2f} s" if period else ""
    return (f"{where}: {tr.sends} messages of {size} sent and {tr.receives} received "
            f"(at most {tr.max_receive} B){every}")
