"""The wait-for graph of a trace for Graphviz (``hangtrace export FILE --format dot``).

Contract: ``export(trace_path, out)`` analyzes the trace (the same analysis as ``hangtrace
analyze``) and writes its wait-for graph as one DOT digraph; returns the number of edges. Only
what takes part in a wait is drawn (blocked threads, what they wait for and, for a process
node, nothing more); ``render_dot(graph)`` is the pure part (the report's ``wait_graph`` dict).
The proof's edges are red and bold, its cycle's nodes red, dead nodes grey: ``dot -Tsvg``.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, TextIO

from ..visible import visible

_SURROGATE = re.compile("[\ud800-\udfff]")


def _q(s: object) -> str:
    """A DOT string: quoted, escaped, and encodable (a comm read from /proc with bytes that are
    not UTF-8 holds lone surrogates: each becomes U+FFFD, so no output stream refuses it), with
    other characters that are not printable made visible (render/visible.py: a comm's escape
    sequence reaches no terminal the graph is printed on)."""
    text = visible(_SURROGATE.sub("\ufffd", str(s)), keep="\n")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def render_dot(graph: Dict[str, Any], title: str = "") -> str:
    """DOT text of a report's ``wait_graph`` (see waitgraph.WaitGraph.to_json)."""
    edges: List[Dict[str, str]] = graph.get("edges") or []
    proof = graph.get("proof") or {}
    proof_edges = {(e["src"], e["dst"], e["object"]) for e in proof.get("path", [])}
    cycle = set(graph.get("cycle") or [])
    used = {e["src"] for e in edges} | {e["dst"] for e in edges}
    lines = ["digraph waitfor {", "  rankdir=LR;",
             '  node [shape=box, style="rounded,filled", fillcolor=white, fontname=Helvetica];',
             "  edge [fontname=Helvetica, fontsize=10];"]
    if title:
        lines.append(f"  label={_q(title)}; labelloc=t;")
    for n in graph.get("nodes") or []:
        if n["id"] not in used:
            continue
        attrs = [f"label={_q(n['label'] + (' [' + n['state'] + ']' if n.get('state') else ''))}"]
        if n["kind"] in ("process", "any-thread"):
            attrs.append('shape=folder')
        elif n["kind"] in ("outside", "gpu"):
            attrs.append("shape=ellipse")
        if n.get("dead"):
            attrs.append("fillcolor=grey80, fontcolor=grey30")
        elif n["id"] in cycle:
            attrs.append("color=red, penwidth=2")
        elif n.get("stuck"):
            attrs.append("color=orange")
        lines.append(f"  {_q(n['id'])} [{', '.join(attrs)}];")
    nodes = {n["id"]: n for n in graph.get("nodes") or []}
    for n in nodes.values():      # "some thread of this process": dashed, to its waiting threads
        if n["kind"] in ("process", "any-thread") and n["id"] in used:
            for t in nodes.values():
                if t["kind"] == "thread" and t["pid"] == n["pid"] and t["id"] in used \
                        and any(e["src"] == t["id"] for e in edges):
                    lines.append(f"  {_q(n['id'])} -> {_q(t['id'])} [style=dashed, arrowhead=none];")
    for e in edges:
        attrs = [f"label={_q(e['kind'] + ': ' + e['object'])}", f"tooltip={_q(e['text'])}"]
        if (e["src"], e["dst"], e["object"]) in proof_edges:
            attrs.append("color=red, penwidth=2.5, fontcolor=red")
        lines.append(f"  {_q(e['src'])} -> {_q(e['dst'])} [{', '.join(attrs)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def export(trace_path: str, out: TextIO, progress: Optional[Callable[[int], None]] = None) -> int:
    from ...load.trace import analyze_trace
    report = analyze_trace(trace_path, progress=progress)
    graph = report.wait_graph or {}
    proof = (graph.get("proof") or {}).get("text", "")
    title = f"hangtrace: {report.verdict}" + (f" - {proof}" if proof else "")
    out.write(render_dot(graph, title[:300]))
    return len(graph.get("edges") or [])
