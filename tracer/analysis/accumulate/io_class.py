"""What a write or a read means: output, a wake-up, discarded, socket traffic, unknown.

Contract: the one home of the wake-up rule (pure). Every stage that asks whether bytes moved
are output calls here: the accumulator (call by call), the kernel's counts under eBPF (per fd,
its small and large writes), the /proc rule (``proc_output_bytes``: /proc/PID/io has only byte
and call totals), watch (``proc_input_bytes``) and the timeline export.
- ``write_class(kind, nbytes, internal)``, ``read_class(kind, internal)``: the ``IoClass`` of
  one call (which, when: their docstrings); ``internal_targets(fds)``: the self-pipes.
- ``judge_output(t, window, end, timestamps)``: a thread's output at the end of the window, and
  whether it is old news (``output_is_stale``); ``fd_label`` names an output target.
- Per thread: ``MAX_OUTPUT_TARGETS`` targets named, ``MAX_SOCKETS`` socket fds followed.
  ``WAKEUP_MAX_BYTES``: events.counts' (HT_SMALL_WRITE, a test checks it).
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence, Set

from ... import events as ev
from ...events.counts import WAKEUP_MAX_BYTES

from ...linux.fdtarget import OUTPUT_KINDS, SOCKET_KINDS
from ..vocab.verdict import StrEnum
from .stats import new_counter
from .traffic import keepalive

if TYPE_CHECKING:  # pragma: no cover
    from .stats import ThreadStats
    from .traffic import FdTraffic

__all__ = ["IoClass", "write_class", "read_class", "READ_KINDS", "proc_output_bytes",
           "proc_input_bytes", "judge_output", "output_at", "is_old_news", "fd_label", "internal_targets", "WAKEUP_MAX_BYTES", "CHANNEL_KINDS", "MAX_OUTPUT_TARGETS",
           "MAX_SOCKETS"]

CHANNEL_KINDS = frozenset({"pipe", "unix", "socket", "fifo"})   # what can be a wake-up channel
MAX_OUTPUT_TARGETS = 32     # output targets named per thread
MAX_SOCKETS = 64            # socket fds followed per thread (and TCP sockets per process)


class IoClass(StrEnum):
    OUTPUT = "output"
    WAKEUP = "wake-up"
    EVENTFD = "eventfd"
    DISCARDED = "discarded"
    SOCKET = "socket"
    UNKNOWN = "unknown"
    INPUT = "input"
    OTHER = "other"

    @property
    def is_wakeup(self) -> bool:
        return self in (IoClass.WAKEUP, IoClass.EVENTFD)


def write_class(kind: Optional[str], nbytes: int,
                internal: Callable[[], bool] = lambda: False) -> IoClass:
    """What a write of ``nbytes`` to an fd of ``kind`` is:

    - ``EVENTFD``: any write to an eventfd (a wake-up by its kind: libzmq, libuv);
    - ``UNKNOWN``: at most ``WAKEUP_MAX_BYTES`` to an fd whose kind is unknown (strace without
      -y): it could be an eventfd or a self-pipe poke; larger writes there are ``OUTPUT``;
    - ``WAKEUP``: at most ``WAKEUP_MAX_BYTES`` to a pipe, FIFO or socketpair whose both ends the
      process holds (``internal``: asyncio's and signal wake-up fds write 1 byte);
    - ``OUTPUT`` for larger writes to such a channel: the process talks to itself, but moves data;
    - ``DISCARDED``: /dev/null;
    - ``SOCKET``: a socket to a peer, judged at the end of the window by traffic.keepalive (a
      keep-alive is not output);
    - ``OUTPUT``: files, pipes, FIFOs, ttys and /dev/fuse (a FUSE daemon's replies)
      (fdtarget.OUTPUT_KINDS);
    - ``OTHER``: anything else (a device, an epoll fd): neither output nor a wake-up.

    ``internal`` is a callable, asked only for channel kinds (``CHANNEL_KINDS``): the hot path
    looks the fd tables up only when the answer matters."""
    if kind == "eventfd":
        return IoClass.EVENTFD
    if kind is None:
        return IoClass.OUTPUT if nbytes > WAKEUP_MAX_BYTES else IoClass.UNKNOWN
    if kind in CHANNEL_KINDS and internal():
        return IoClass.WAKEUP if nbytes <= WAKEUP_MAX_BYTES else IoClass.OUTPUT
    if kind == "null":
        return IoClass.DISCARDED
    if kind in SOCKET_KINDS:
        return IoClass.SOCKET
    if kind in OUTPUT_KINDS:
        return IoClass.OUTPUT
    return IoClass.OTHER


def read_class(kind: Optional[str], internal: Callable[[], bool] = lambda: False) -> IoClass:
    """What a read that returned data is: ``EVENTFD`` / ``WAKEUP`` (reading one's own channel is
    not input), ``SOCKET`` (input from a peer, its traffic followed), else ``INPUT``. ``internal``:
    as ``write_class``'s."""
    if kind == "eventfd":
        return IoClass.EVENTFD
    if kind in CHANNEL_KINDS and internal():
        return IoClass.WAKEUP
    if kind in SOCKET_KINDS:
        return IoClass.SOCKET
    return IoClass.INPUT


# The fd kinds read_class tells apart: a read of any other kind (None too) is INPUT, whoever
# holds the fd (the accumulator's compiled twin counts those reads itself: calls.py).
READ_KINDS = frozenset({"eventfd"}) | CHANNEL_KINDS | SOCKET_KINDS


def proc_output_bytes(wchar: int, syscw: int) -> int:
    """Bytes surely written as output, from /proc/PID/io deltas (every write(2) counted, no
    kinds): what exceeds ``WAKEUP_MAX_BYTES`` per write call, since wake-ups move at most that."""
    return max(0, wchar - WAKEUP_MAX_BYTES * syscw)


def proc_input_bytes(rchar: int, syscr: int) -> int:
    """Bytes surely read as input, from /proc/PID/io deltas (as ``proc_output_bytes``)."""
    return rchar - WAKEUP_MAX_BYTES * syscr


def fd_label(fd: Optional[int], target: Optional[str]) -> str:
    """An output target's name: "fd 3 (/var/x)"."""
    if fd is None:
        return "an fd not seen opened"
    return f"fd {fd} ({target})" if target else f"fd {fd}"


def judge_output(t: "ThreadStats", window: float, end: Optional[float] = None,
                 timestamps: bool = True) -> None:
    """The thread's output at the end of the window: plain writes plus socket traffic that is
    not a keep-alive (traffic.keepalive), on the fds it holds and on the fd lifetimes that ended,
    and whether it is old news (``output_is_stale``, over both: a start-up log followed by a long
    run of calls with nothing written). Recomputed from the accumulated state at every finish()."""
    t.output_bytes, t.output_writes = t.plain_bytes, t.plain_writes
    t.output_targets = Counter(t.plain_targets) if t.plain_targets else new_counter()
    t.last_output_ts = t.plain_last_ts
    t.keepalives = []
    sent: List["FdTraffic"] = []
    for tr in t.closed_sockets + list(t.sockets.values()):
        if tr.sends == 0:
            continue
        if keepalive(tr, window):
            t.keepalives.append(tr)
            continue
        sent.append(tr)
        t.output_bytes += tr.sent
        t.output_writes += tr.calls
        t.output_targets[fd_label(tr.fd, tr.target)] += tr.sent
        if tr.last_send is not None and (t.last_output_ts is None
                                         or tr.last_send > t.last_output_ts):
            t.last_output_ts = tr.last_send
    t.output_stale = output_is_stale(t, window, end, timestamps, sent)
    t.output_at = output_at(t, sent) or t.calls_at_output


STALE_CALLS_MIN = 200      # calls after the last output before it can be old news


def output_at(t: "ThreadStats", sent: Sequence["FdTraffic"] = ()) -> Optional[int]:
    """The thread's completed calls at its last output (plain, or ``sent`` on sockets); None
    when a socket's place among the calls is unknown (the kernel's counts)."""
    at = t.calls_at_output
    for tr in sent:
        if tr.calls_at_send is None:
            return None
        at = max(at, tr.calls_at_send)
    return at


def output_is_stale(t: "ThreadStats", window: float, end: Optional[float],
                    timestamps: bool, sent: Sequence["FdTraffic"] = ()) -> bool:
    """The thread's output (plain writes, and ``sent``: the socket traffic that is output) all
    lies well before the end: what it does at the end of the window (of a long log) is what it
    does now, and start-up log lines or a transfer on a connection long closed are not
    progress now. Stale when, after its last output, it made at least ``STALE_CALLS_MIN``
    calls and more than it made up to that output, and (with times) the last output is older
    than 2 s, half the window and three of its own intervals between outputs; a log without
    times decides by the order of the calls alone. Traffic whose place among the calls is
    unknown (the kernel's counts) is never old news."""
    at = output_at(t, sent)
    if at is None:
        return False
    writes = t.plain_writes + sum(tr.calls for tr in sent)
    first, last = t.plain_first_ts, t.plain_last_ts
    for tr in sent:
        first = tr.first_send if first is None or (tr.first_send is not None
                                                   and tr.first_send < first) else first
        last = tr.last_send if last is None or (tr.last_send is not None
                                                and tr.last_send > last) else last
    if writes == 0:
        return False
    every = (last - first) / (writes - 1) if last is not None and first is not None \
        and writes > 1 else 0.0
    return is_old_news(t.ncalls, at, last, window, end, timestamps, every)


def is_old_news(ncalls: int, at: Optional[int], last: Optional[float], window: float,
                end: Optional[float], timestamps: bool, every: float = 0.0) -> bool:
    """What a thread did at its call ``at`` (of ``ncalls``), last at time ``last``, lies well
    before the end (``output_is_stale``'s rule, for output and for connections alike). An
    ``at`` of None is a place among the calls that is unknown (the kernel's counts say when,
    not after which call): the time alone decides."""
    if at is not None:
        after = ncalls - at
        if after < STALE_CALLS_MIN or after <= at:
            return False
    if not timestamps:
        return at is not None
    if last is None or end is None:
        return False
    return end - last > max(2.0, 0.5 * window, 3 * every)


def internal_targets(fds: List[ev.FdInfo]) -> set:
    """Pipe/socket targets that appear on two fds of one process (both ends: a self-pipe or
    socketpair), which the accumulator's ``internal`` answers with."""
    seen: Set[str] = set()
    out: Set[str] = set()
    for f in fds:
        if f.kind in ("pipe", "fifo"):
            (out if f.target in seen else seen).add(f.target)
    return out
