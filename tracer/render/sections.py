"""The report's sections beside the process tree, as rich Trees: PyTorch's flight recorder, the
ranks grouped by their main thread's stack (STAT-style), the wait-for graph's proof.

Contract: each function reads only its part of the Report's JSON form (never /proc) and returns
a Tree, or None when there is nothing to show; every text from processes is escaped.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from rich.text import Text
from rich.tree import Tree

from .fold import label_ranges
from .markup import escape

__all__ = ["flight_recorder_tree", "rank_stacks_tree", "wait_graph_tree"]


def flight_recorder_tree(fr: Optional[Dict]) -> Optional[Tree]:
    """PyTorch Flight Recorder: each group's ranks at their last collective, then findings."""
    if not fr or not (fr.get("groups") or fr.get("findings")):
        return None
    tree = Tree("[bold]flight recorder[/] [dim](PyTorch, per-rank collective log)[/]",
                guide_style="dim")
    for g in fr.get("groups", []):
        node = tree.add(Text(f"group {g['group']} (ranks {g['ranks']})"))
        for s in g["states"]:
            pid = f" pid {s['pid']}" if s.get("pid") else ""
            node.add(Text(f"rank {s['rank']}{pid}: enqueued up to {s['last_enqueued']}, "
                          f"completed up to {s['last_completed']}: {s['op']}", style="dim"))
    for f in fr.get("findings", []):
        tree.add(Text.from_markup(f"[bold red]{escape(f['kind'])}:[/] {escape(f['text'])}"))
    return tree


def rank_stacks_tree(groups: List[Dict], frames: int = 4,
                     compact: bool = False) -> Optional[Tree]:
    """Ranks grouped by their main thread's Python stack (STAT-style), largest group first;
    ``compact``: one line a group, its labels as rank ranges and its innermost frame."""
    if len(groups) < 1 or sum(len(g.get("pids", [])) for g in groups) < 2:
        return None
    tree = Tree("[bold]ranks by main-thread stack[/]", guide_style="dim")
    for g in groups:
        labels = g.get("labels") or [f"pid {p}" for p in g.get("pids", [])]
        names = _rank_names(labels) if compact else ", ".join(labels)
        where = "[magenta]in a collective[/] " if g.get("collective") else ""
        line = f"{len(g.get('pids', []))} × {where}{escape(names)}"
        shown = (g.get("frames") or [])[:1 if compact else frames]
        if compact and shown and len(groups) == 1:      # every rank in one stack: one line
            return Tree(Text.from_markup(f"[bold]ranks by main-thread stack:[/] {line}: "
                                         f"[dim]{escape(shown[0])}[/]"), guide_style="dim")
        if compact and shown:
            tree.add(Text.from_markup(f"{line}: [dim]{escape(shown[0])}[/]"))
            continue
        node = tree.add(Text.from_markup(line))
        for f in shown:
            node.add(Text(f, style="dim"))
    return tree


def _rank_names(labels: List[str]) -> str:
    """"scheduler TP0 (pid 4)", ... as "scheduler TP0-7" (fold.label_ranges)."""
    return label_ranges([label.split(" (pid ")[0] for label in labels])


# --------------------------------------------------------------------------- wait-for graph
def wait_graph_tree(g: Optional[Dict], verbose: bool = False, limit: int = 8) -> Optional[Tree]:
    """The wait-for graph as a tree of waits from the proof's first thread (or, with
    ``verbose``, from every waiting thread nobody waits for), the proof's edges in red, the
    cycle's closing node and dead ends marked. None when there is nothing to show."""
    if not g or not g.get("edges"):
        return None
    proof = g.get("proof")
    if not proof and not verbose:
        return None
    nodes = {n["id"]: n for n in g["nodes"]}
    out: Dict[str, List[Dict]] = {}
    for e in g["edges"]:
        out.setdefault(e["src"], []).append(e)
    hot = {(e["src"], e["dst"], e["object"]) for e in (proof or {}).get("path", [])}
    kind = {"cycle": "a cycle", "dead-end": "a dead end", "closed": "no thread left to wake them"}
    title = "[bold]wait-for graph[/]" + (f": [bold red]{kind.get(proof['kind'], proof['kind'])}"
                                         "[/]" if proof else "")
    tree = Tree(Text.from_markup(title), guide_style="dim")

    def waiting_threads(pid: int) -> List[str]:
        return [n["id"] for n in nodes.values() if n["kind"] == "thread" and n["pid"] == pid
                and n["id"] in out]

    def add(branch: Tree, nid: str, seen: List[str], depth: int) -> None:
        edges = sorted(out.get(nid, []), key=lambda e: (e["src"], e["dst"], e["object"]) not in hot)
        for e in edges[:limit]:
            red = (e["src"], e["dst"], e["object"]) in hot
            dst = nodes.get(e["dst"], {"label": e["dst"], "kind": "?"})
            style = "bold red" if red else "white"
            what = e["object"] if e["object"].startswith(e["kind"]) else f"{e['kind']} {e['object']}"
            line = f"[{style}]{escape(what)}[/] -> {escape(dst['label'])}"
            if e["dst"] in seen:
                line += " [bold red](cycle: waits on the start of the loop)[/]"
            elif dst.get("dead"):
                line += f" [bold red](dead end: {escape(dst.get('state') or 'gone')})[/]"
            child = branch.add(Text.from_markup(line))
            if e["dst"] in seen or dst.get("dead") or depth >= limit:
                continue
            if dst.get("kind") == "process":
                for t in waiting_threads(dst["pid"]):
                    if t in seen:
                        child.add(Text.from_markup(
                            f"[bold red]{escape(nodes[t]['label'])} (cycle)[/]"))
                    else:
                        tn = child.add(Text.from_markup(f"{escape(nodes[t]['label'])} "
                                                        f"[dim]{nodes[t]['state']}[/]"))
                        add(tn, t, seen + [e["dst"], t], depth + 1)
            else:
                add(child, e["dst"], seen + [e["dst"]], depth + 1)

    if proof:
        starts = [proof["path"][0]["src"]] if proof.get("path") else []
    else:
        targets = {e["dst"] for e in g["edges"]}
        starts = [s for s in out if s not in targets][:limit]
    for s in starts:
        n = nodes[s]
        branch = tree.add(Text.from_markup(f"[bold]{escape(n['label'])}[/] [dim]{n['state']}[/]"))
        add(branch, s, [s], 0)
    if proof:
        tree.add(Text.from_markup(f"[italic]{escape(proof['text'])}[/]"))
    return tree
