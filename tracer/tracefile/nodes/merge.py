"""Traces of several nodes as one stream of events, for one analysis.

Contract:
- ``open_nodes(paths)`` reads each trace's header and names its node (``NodeTrace``,
  ``_name_nodes``); unreadable files raise errors.BadInput.
- Ids: the analyzer keys processes by pid and threads by tid, and pids of different nodes
  collide. Node i's pid or tid p becomes the key ``i * ID_STRIDE + p`` (node 0 keeps its ids;
  ID_STRIDE is above the kernel's largest pid, 2**22), and so does GPU index g (NVML counts
  from 0 on every node). ``real_id(key)`` and ``node_of(key)`` undo it (``key_of``).
- Clocks: ``estimate_clocks(nodes)`` sets each node's ``clock_offset``; ``merged_events(nodes)``
  then yields every node's events on keys and node 0's clock, in bounded memory.
"""
from __future__ import annotations

import itertools
import os
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Type

from ... import events as ev
from ...errors import BadInput, UsageError
from ...linux.fdtarget import FdTarget
from . import clock
from ..format import MAX_LINE_CHARS, TraceReader, open_input
from ..inputs import check_rereadable
from ..codec import BAD, RowCodec

__all__ = ["ID_STRIDE", "key_of", "real_id", "node_of", "NodeTrace", "open_nodes",
           "estimate_clocks", "merged_events", "node_stream"]

ID_STRIDE = 10_000_000     # > PID_MAX_LIMIT (4,194,304): node i's pid p is i * ID_STRIDE + p


def key_of(node: int, ident: int) -> int:
    """The key of pid/tid ``ident`` (> 0) of node ``node``; 0 and negative ids stay as they are
    (no process, "any child", a process group). Everything else that names an object (inodes,
    fd targets, futex addresses) is left as recorded: the analysis scopes it to the node of the
    pid that holds it (analysis/vocab/nodes.py)."""
    return node * ID_STRIDE + ident if ident > 0 else ident


def real_id(key: int) -> int:
    """The pid, tid or GPU index on its own node."""
    return key % ID_STRIDE if key >= 0 else key


def node_of(key: int) -> int:
    """The index of the node a key belongs to (0 for ids that name no process)."""
    return key // ID_STRIDE if key > 0 else 0


@dataclass
class NodeTrace:
    """One node's trace and what the merge knows of it."""
    index: int
    path: str
    name: str = ""
    hostname: str = ""
    netns: Optional[int] = None
    netns_name: str = ""
    addrs: List[str] = field(default_factory=list)
    header: Dict[str, Any] = field(default_factory=dict)
    processes: List[ev.ProcessInfo] = field(default_factory=list)    # keys, node 0's clock
    clock_offset: float = 0.0          # this node's clock minus node 0's (seconds)
    clock_note: str = ""               # how the offset was found, or why it was not
    raw_end: Optional[float] = None    # the trace's end record (its own clock), once read
    truncated: bool = False
    bad_lines: int = 0

    @property
    def base(self) -> int:
        return self.index * ID_STRIDE

    @property
    def start(self) -> Optional[float]:
        """When it began recording, on node 0's clock."""
        s = self.header.get("start")
        return None if s is None else float(s) - self.clock_offset

    @property
    def end(self) -> Optional[float]:
        """When it ended (its end record; known once the trace was read), node 0's clock."""
        return None if self.raw_end is None else self.raw_end - self.clock_offset


def _file_name(path: str) -> str:
    name = os.path.basename(path)
    for suffix in (".gz", ".htrace", ".trace"):
        if name.endswith(suffix):
            name = name[:-len(suffix)]
    return name or path


def _name_nodes(nodes: List[NodeTrace]) -> None:
    """Names: the host name ``attach`` recorded (header "node", linux/netns.py); plus the network
    namespace when two traces share a host name (two containers, or two ``ip netns`` namespaces, of
    one machine); a trace without that record (an older trace, an strace import, whose header
    "host" is the machine that imported it) is named after its file."""
    by_host: Dict[str, List[NodeTrace]] = {}
    for n in nodes:
        if n.hostname:
            by_host.setdefault(n.hostname, []).append(n)
        else:
            n.name = _file_name(n.path)
    for host, group in by_host.items():
        for n in group:
            if len(group) == 1:
                n.name = host
            elif n.netns_name or n.netns is not None:
                n.name = f"{host}/{n.netns_name or f'netns:{n.netns}'}"
            else:
                n.name = f"{host}/{_file_name(n.path)}"
    count: Dict[str, int] = {}
    for n in nodes:
        count[n.name] = count.get(n.name, 0) + 1
    seen: Dict[str, int] = {}
    for n in nodes:
        if count[n.name] > 1 and not n.name.endswith(_file_name(n.path)):
            n.name = f"{n.name}/{_file_name(n.path)}"
        base, k = n.name, 1
        while n.name in seen:
            k += 1
            n.name = f"{base}#{k}"
        seen[n.name] = 1


def open_nodes(paths: List[str]) -> List[NodeTrace]:
    """One ``NodeTrace`` per trace, named (module doc). Raises errors.BadInput for a file that
    is no readable trace and UsageError for the same file given twice."""
    real = [os.path.realpath(p) for p in paths]
    dup = next((p for i, p in enumerate(paths) if real[i] in real[:i]), None)
    if dup is not None:
        raise UsageError(f"{dup}: given twice")
    for path in paths:
        check_rereadable(path, BadInput, "merge reads each trace more than once")
    nodes = []
    for i, path in enumerate(paths):
        reader = TraceReader(path)
        reader.close()                  # the header only: the events are read later
        h = reader.info.header
        ident = h.get("node") if isinstance(h.get("node"), dict) else {}
        n = NodeTrace(i, path, hostname=str(ident.get("hostname") or ""),
                      netns=ident.get("netns"), netns_name=str(ident.get("netns_name") or ""),
                      addrs=list(ident.get("addrs") or []), header=h)
        rw = Rewriter(n.base, 0.0)
        n.processes = [rw(p) for p in reader.info.processes]  # type: ignore[misc]
        nodes.append(n)
    _name_nodes(nodes)
    return nodes


# --------------------------------------------------------------------------- rewriting
_ID_FIELDS = ("pid", "tid", "ppid", "child", "sender", "parent_tid", "owner_tid", "owner_pid")
_ID_LISTS = ("waiters", "pids")
_TIME_FIELDS = ("ts", "since", "start_time", "last_begin", "last_end")


def _threads(e: Any, base: int, shift: float) -> None:
    if base:
        e.threads = {t + base if t > 0 else t: c for t, c in e.threads.items()}


def _outside(e: Any, base: int, shift: float) -> None:
    if base:
        e.outside = {k: [p + base if p > 0 else p for p in v]
                     for k, v in e.outside.items()}


def _klog(e: Any, base: int, shift: float) -> None:
    if shift:
        e.lines = [[x[0] - shift, *x[1:]] if x and isinstance(x[0], (int, float)) else x
                   for x in e.lines]


def _log_targets(e: Any, base: int, shift: float) -> None:
    if shift:
        for t in e.targets:
            if isinstance(t.get("mtime"), (int, float)):
                t["mtime"] -= shift


_SPECIAL: Dict[str, Callable[[Any, int, float], None]] = {
    "pi": _threads, "skp": _outside, "klog": _klog, "logs": _log_targets}


class Rewriter:
    """Rewrites one node's events in place to keys and node 0's clock (module doc). One
    function per event class, compiled once (straight-line code: a million events a run)."""

    def __init__(self, base: int, shift: float) -> None:
        self.base, self.shift = base, shift
        self._fns: Dict[Type[ev.Event], Callable[[ev.Event], ev.Event]] = {}

    def _compile(self, cls: Type[ev.Event]) -> Callable[[ev.Event], ev.Event]:
        names = set(ev.field_names(cls))
        base, shift = self.base, self.shift
        body = []
        if base:
            for n in (n for n in _ID_FIELDS if n in names):
                body += [f"v = e.{n}", f"if v is not None and v > 0: e.{n} = v + {base}"]
            for n in (n for n in _ID_LISTS if n in names):
                body.append(f"e.{n} = [x + {base} if x > 0 else x for x in e.{n}]")
            if "gpu" in names:
                body.append(f"e.gpu += {base}")
        if shift:
            for n in (n for n in _TIME_FIELDS if n in names):
                body += [f"v = e.{n}", f"if v: e.{n} = v - {shift!r}"]
        if cls.TAG in _SPECIAL:
            body.append(f"special(e, {base}, {shift!r})")
        ns: Dict[str, Any] = {"special": _SPECIAL.get(cls.TAG)}
        src = "def rewrite(e):\n" + "".join(f"    {line}\n" for line in body) + \
            "    return e\n"
        exec(src, ns)  # noqa: S102 - made from the event classes' field names only
        fn = self._fns[cls] = ns["rewrite"]
        return fn

    def __call__(self, e: ev.Event) -> ev.Event:
        fn = self._fns.get(type(e)) or self._compile(type(e))
        return fn(e)


# --------------------------------------------------------------------------- clocks
_SCAN = (b'\n["wr",', b'\n["rd",', b'\n["end",')


def _find_lines(block: bytes) -> List[bytes]:
    """The lines of ``block`` (each after a newline) that start a row of _SCAN's tags, in
    file order: bytes.find runs in C, and such rows are a small share of a trace."""
    found = []
    for needle in _SCAN:
        i = block.find(needle)
        while i >= 0:
            j = block.find(b"\n", i + 1)
            found.append((i, block[i + 1:j if j >= 0 else len(block)]))
            i = block.find(needle, i + 1)
    found.sort()
    return [line for _, line in found]


def _rows(n: NodeTrace) -> Iterator[ev.Event]:
    """The send, receive and end rows of a trace, found by their first bytes in large blocks
    (the other rows are not decoded: this pass is a fraction of a full read). Rows are
    checked like every read (codec.RowCodec); a bad one, or a trace cut short, ends nothing
    but that row or this pass."""
    schema = n.header.get("schema") or ev.schema()
    codec = RowCodec({t: schema[t] for t in ("wr", "rd", "end") if t in schema})
    _, stream = open_input(n.path)
    carry, first = b"", True
    try:
        while True:
            try:
                chunk = stream.read(1 << 20)
            except (EOFError, OSError, zlib.error):
                return
            if not chunk:
                return
            block = carry + chunk
            cut = block.rfind(b"\n") + 1
            block, carry = block[:cut], block[cut:]
            if len(carry) > MAX_LINE_CHARS:
                carry = b""
            if first and cut:
                block, first = block[block.find(b"\n") + 1:], False      # the header
            for line in _find_lines(b"\n" + block):
                event = codec.line(line)
                if event is not BAD:
                    yield event
    finally:
        stream.close()


def _connections(n: NodeTrace) -> Dict[str, clock.Messages]:
    """The sends and receives node ``n`` saw on connections that may cross nodes, by target;
    sets ``raw_end`` from its end record."""
    out: Dict[str, clock.Messages] = {}
    for e in _rows(n):
        if isinstance(e, ev.RecordingEnd):
            n.raw_end = e.closed_at()
            continue
        if e.fd_kind != "tcp" or e.err is not None or not e.fd_target:  # type: ignore
            continue
        msgs = out.get(e.fd_target)  # type: ignore[attr-defined]
        if msgs is None:
            if not clock.crosses_nodes(FdTarget.parse(e.fd_target)):  # type: ignore
                continue
            msgs = out[e.fd_target] = clock.Messages()  # type: ignore[attr-defined]
        if isinstance(e, ev.WriteCall):
            if e.nbytes > 0:
                msgs.add_send(e.ts, e.nbytes)
        elif e.ret is not None and e.ret > 0 and not e.name.startswith("accept"):  # type: ignore
            msgs.add_recv(e.ts + (e.dur or 0.0), e.ret)  # type: ignore[attr-defined]
    return out


def estimate_clocks(nodes: List[NodeTrace]) -> None:
    """Set each node's ``clock_offset`` (its clock minus node 0's) and ``clock_note``: each trace
    is read once more for its TCP sends and receives (clock.py), and an offset is set where
    matching send/receive pairs link the node to node 0."""
    if len(nodes) < 2:
        return
    seen = [_connections(n) for n in nodes]
    by_target: Dict[str, List[int]] = {}
    for i, conns in enumerate(seen):
        for target in conns:
            by_target.setdefault(target, []).append(i)
    pooled: Dict[Tuple[int, int], clock.Bounds] = {}
    links: Dict[Tuple[int, int], int] = {}
    for target, owners in by_target.items():
        rev = FdTarget.parse(target).reversed()
        for a in owners:
            for b in by_target.get(rev or "", []):
                if a >= b:
                    continue
                links[(a, b)] = links.get((a, b), 0) + 1
                got = pooled.setdefault((a, b), clock.Bounds())
                if len(got.upper) + len(got.lower) < clock.MAX_BOUNDS:
                    got.extend(clock.pair_bounds(seen[a][target], seen[b][rev or ""]))
    edges = {k: off for k, b in pooled.items() if (off := clock.estimate(b)) is not None}
    solved = clock.solve(len(nodes), edges)
    ref = nodes[0].name
    nodes[0].clock_note = "the reference clock"
    for n, got in zip(nodes[1:], solved[1:]):
        if got is None:
            n.clock_note = (f"not aligned with {ref}: no send/receive pairs link it to the "
                            "other nodes (a syscall backend records them: strace or ebpf)")
            continue
        n.clock_offset, off, via = got[0], got[1], got[2]
        key = (min(via, n.index), max(via, n.index))
        ways = "both ways" if off.both_ways else "one way only: late by the latency"
        n.clock_note = (f"{n.clock_offset * 1e3:+.3f} ms against {ref} (±{off.error * 1e3:.3f}"
                        f" ms; {off.pairs} send/receive pairs on {links.get(key, 0)} "
                        f"connection(s) with {nodes[via].name}, {ways})")
        shift = Rewriter(0, n.clock_offset)
        for p in n.processes:
            shift(p)


# --------------------------------------------------------------------------- the stream
def node_stream(n: NodeTrace) -> Iterator[ev.Event]:
    """Node ``n``'s events, rewritten (module doc); sets ``raw_end``, ``truncated`` and
    ``bad_lines`` once read to the end."""
    reader = TraceReader(n.path)
    rw = Rewriter(n.base, n.clock_offset)
    if not n.base and not n.clock_offset:
        yield from reader.events()
    else:
        fns, compile_ = rw._fns, rw._compile
        for e in reader.events():
            fn = fns.get(type(e)) or compile_(type(e))
            yield fn(e)
    info = reader.info
    n.truncated, n.bad_lines = info.truncated, info.bad_lines
    n.raw_end = info.end.closed_at() if info.end is not None else None


def merged_events(nodes: List[NodeTrace]) -> Iterator[ev.Event]:
    """All nodes' events: each node's in its own time order, one node after the other. Nodes
    share no thread, process, socket, pipe or futex (the analysis scopes them: nodes.py), so
    no state the analyzer keeps depends on the order between nodes; interleaving a million
    events by time would cost a second for nothing. What spans nodes is ordered by the
    caller (load/merged.py: NCCL RAS answers).
    Each trace is read as a stream: memory stays bounded by the connections followed, not by
    events."""
    return itertools.chain.from_iterable(node_stream(n) for n in nodes)
