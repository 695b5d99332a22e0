"""One report for a job recorded on several nodes: ``analyze_merged(paths)``.

Contract: the traces (one per node, tracefile/nodes/merge.py names the nodes) are analyzed as one
recording by the ordinary ``Analyzer``: their events, rewritten to keys unique across nodes and
moved onto the first node's clock (estimated from matching send/receive pairs), are fed node
after node, each in its own time order (merge.merged_events); the wait-for graph then resolves
waits between nodes itself (a TCP 4-tuple seen at both ends), NCCL RAS answers in any trace
speak for every node (ras.localize_ras), and labels name the node ("node b, rank 1 (pid
4242)"). The window: ``_window_start``. ``failed`` nodes are listed in the report's ``nodes``
with their error and said in a note, and a job judged fine without them is ``unknown``
(verdicts/merged.py): the others are merged all the same. Unreadable traces raise
errors.BadInput (one line).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Set, Tuple

from ..linux.fdtarget import FdTarget
from ..report import Report
from ..tracefile.nodes.merge import NodeTrace, estimate_clocks, merged_events, open_nodes
from ..analysis.analyzer import Analyzer
from ..analysis.vocab.nodes import NodeMap

__all__ = ["analyze_merged"]


def _host(addr: str) -> str:
    return addr.rsplit(":", 1)[0].strip("[]") if ":" in addr else addr


def _addresses(n: NodeTrace) -> Set[str]:
    """The node's own addresses: what attach recorded, and the local ends of its TCP sockets
    (older traces, imports)."""
    out = set(n.addrs)
    for p in n.processes:
        for f in p.fds:
            if f.kind in ("tcp", "udp"):
                t = FdTarget.parse(f.target)
                if t.local and t.remote:
                    out.add(_host(t.local))
    return out


def _capabilities(nodes: List[NodeTrace]) -> Dict[str, bool]:
    """What every trace could show: a capability missing in one is missing for the job."""
    out: Dict[str, bool] = {}
    for n in nodes:
        caps = (n.header.get("options") or {}).get("capabilities") or {}
        for k, v in caps.items():
            out[k] = out.get(k, True) and bool(v)
    return out


def _window_start(nodes: List[NodeTrace]) -> Tuple[Optional[float], str]:
    """Where the window starts: the moment every node was recording (the latest start), or the
    earliest start when the traces do not overlap (with a note saying so); the window runs to the
    last end."""
    starts = [s for n in nodes if (s := n.start) is not None]
    if not starts:
        return None, ""
    ends = [e for n in nodes if (e := n.end) is not None]     # read by estimate_clocks
    latest = max(starts)
    if ends and latest >= min(ends):
        return min(starts), ("the traces do not overlap in time: the window runs from the "
                             "first start")
    return latest, ""


def _node_json(n: NodeTrace) -> Dict[str, object]:
    return {"name": n.name, "hostname": n.hostname or None, "netns": n.netns,
            "trace": n.path, "key_offset": n.base, "clock_offset": round(n.clock_offset, 6),
            "clock": n.clock_note, "truncated": n.truncated,
            "window": {"start": n.start, "end": n.end}, "error": None}


def analyze_merged(paths: Sequence[str],
                   failed: Sequence[Tuple[str, str]] = ()) -> Report:
    """The report of the job (module doc). ``failed``: (node name, why) of nodes without a trace
    (``hangtrace cluster``: the launcher could not record them)."""
    nodes = open_nodes(list(paths))
    estimate_clocks(nodes)
    nmap = NodeMap([n.name for n in nodes], [_addresses(n) for n in nodes])
    start, start_note = _window_start(nodes)
    backends: List[str] = []
    for n in nodes:
        backends += [b for b in n.header.get("backends") or [] if b not in backends]
    roots = [t + n.base for n in nodes for t in n.header.get("targets") or []]
    an = Analyzer(start=start, backends=backends, capabilities=_capabilities(nodes),
                  processes=[p for n in nodes for p in n.processes], roots=roots,
                  source="merge", nodes=nmap)
    an.feed_all(merged_events(nodes))
    an.ras.sort(key=lambda e: e.ts)      # node after node: the latest answer is the last
    ends = [n.end for n in nodes if n.end is not None]
    notes = [f"{len(nodes)} nodes merged: " + "; ".join(
        f"{n.name} ({n.path})" for n in nodes)]
    notes += [f"clock of {n.name}: {n.clock_note}" for n in nodes[1:] if n.clock_note]
    if start_note:
        notes.append(start_note)
    for n in nodes:
        notes += [f"{n.name}: {e}" for e in (n.header.get("options") or {}).get("errors", [])]
        if n.bad_lines:
            notes.append(f"{n.name}: {n.bad_lines} corrupt lines in its trace were skipped")
        if n.truncated:
            notes.append(f"{n.name}: its trace was cut short; merged up to its last event")
    report = an.report(end=max(ends) if ends else None,
                       truncated=any(n.truncated for n in nodes), extra_notes=notes,
                       unrecorded_nodes=failed)
    report.unobserved += [f"node {name} could not be recorded: {why}" for name, why in failed]
    report.nodes = [_node_json(n) for n in nodes] + [
        {"name": name, "hostname": None, "netns": None, "trace": None, "key_offset": None,
         "clock_offset": None, "clock": "", "truncated": False, "window": None, "error": why}
        for name, why in failed]
    return report
