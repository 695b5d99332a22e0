"""Human rendering of a ``Report`` with rich: the verdict, the root cause, the process tree.

Contract: reads only the Report (never /proc, never the trace). Threads that did not decide a
verdict (library helpers, parked pool threads) are folded into one line per process unless
``verbose``, and so are exited children and threads past the first ``FOLD_EXITED_AFTER``
(``_fold_exited``); everything else shows its verdict, the rule that fired and its evidence.
A merged report (several nodes) shows one tree per node, and pids and tids as their node knows
them (the report's ids are keys there: ``_Ids``). ``report_console(file, stderr)`` is the
Console a report goes to: wrapped to a terminal's width, else never wrapped and without
colours, so that grep over saved reports finds whole lines.
"""
from __future__ import annotations

import errno
from typing import Any, Dict, List, Optional, Tuple, Union

from rich.console import Console
from .markup import escape
from rich.text import Text
from rich.tree import Tree

from ..report import ProcessReport, Report, ThreadReport

STACK_FRAMES = 6        # Python frames shown per thread (innermost first)
LOW_FRAMES = 4          # kernel and native frames shown per thread (innermost first)
NO_WRAP_WIDTH = 1_000_000   # "never wrap": wider than any line a report has
FOLD_EXITED_AFTER = 20  # exited childless children drawn per process; the rest are counted
EXITED_VERDICT = "exited"
STYLE = {"progressing": "bold green", "idle": "green", "busy-waiting": "bold yellow",
         "blocked": "bold magenta", "deadlocked": "bold red", "exited": "bold cyan",
         "unknown": "dim"}


class _ReportConsole(Console):
    """rich's Console, except that a reader gone away (``| head``) is an EPIPE for the command
    line to map to its exit status (141), not rich's own ``SystemExit(1)``."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "the reader of the output went away")


def report_console(file: Any = None, stderr: bool = False) -> Console:
    """The Console a report is printed on: on a terminal it wraps to the terminal's width; anywhere
    else (a pipe, a file, watch's REPORT.txt) it never wraps a line and has no colours, so that
    grep over saved reports finds whole lines."""
    import sys
    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    try:
        tty = stream is not None and stream.isatty()
    except (ValueError, OSError):
        tty = False
    if tty:
        return _ReportConsole(file=file, stderr=stderr)
    return _ReportConsole(file=file, stderr=stderr, width=NO_WRAP_WIDTH, soft_wrap=True,
                          color_system=None)


def _verdict(v: str) -> str:
    return f"[{STYLE.get(v, 'white')}]{v}[/]"


def _counters(c: Dict[str, float]) -> str:
    parts = []
    if "syscalls_per_s" in c:
        parts.append(f"{c['syscalls_per_s']:.0f} syscalls/s")
    elif c.get("syscalls"):
        parts.append(f"{c['syscalls']:.0f} syscalls")
    for key, label in (("eventfd_writes", "eventfd writes"), ("futex_waits", "futex waits"),
                       ("gpu_ioctls", "GPU ioctls"), ("poll_timeouts", "poll timeouts")):
        if c.get(key):
            parts.append(f"{c[key]:.0f} {label}")
    if c.get("bytes_written"):
        out = c.get("output_bytes", c["bytes_written"])
        parts.append(f"{c['bytes_written']:.0f} B written"
                     + (f" ({out:.0f} B of it output)" if out != c["bytes_written"] else ""))
    if "cpu_pct" in c:
        parts.append(f"CPU {c['cpu_pct']:.0f}%")
    return ", ".join(parts)


class _Ids:
    """Keys of a merged report back to (node, pid): node i's pid p is key_offset + p."""

    def __init__(self, report: Report) -> None:
        self.node = {p.pid: p.node for p in report.processes if p.node is not None}
        self.offset = {p.pid: p.pid - p.node_pid for p in report.processes
                       if p.node_pid is not None}

    def pid(self, key: int) -> str:
        if key not in self.offset:
            return f"pid {key}"
        return f"pid {key - self.offset[key]} on node {self.node.get(key)}"

    def tid(self, pid: int, tid: int) -> int:
        return tid - self.offset.get(pid, 0)


def _thread_line(t: ThreadReport, tid: Optional[int] = None) -> Text:
    name = escape(t.name or "?")
    cur = f" in {escape(t.current)}" if t.current else ""
    who = t.tid if tid is None else tid
    line = f"[bold]{who or 'unknown'}[/] {name} [dim]{t.state}{cur}[/]  {_verdict(t.verdict)} [dim]({t.rule})[/]"
    counters = _counters(t.counters)
    if counters:
        line += f"  [dim]{counters}[/]"
    if t.stack:     # Python stack (py-spy), innermost frame first
        shown = t.stack[:STACK_FRAMES]
        more = len(t.stack) - len(shown)
        line += "\n  [cyan]py:[/] " + "\n      ".join(f"[cyan]{escape(f)}[/]" for f in shown)
        if more:
            line += f"\n      [dim]… {more} outer frames[/]"
    for label, style, frames in (("native", "green", t.native_stack),
                                 ("kernel", "magenta", t.kernel_stack)):
        if frames:      # below Python: the C frames, then the kernel's (issue 24)
            shown = frames[:LOW_FRAMES]
            line += f"\n  [{style}]{label}:[/] " + "\n          ".join(
                f"[{style}]{escape(f)}[/]" for f in shown)
            if len(frames) > len(shown):
                line += f"\n          [dim]… {len(frames) - len(shown)} outer frames[/]"
    return Text.from_markup(line)


def _process_label(p: ProcessReport) -> Text:
    cmd = escape(" ".join(p.cmdline)[:90] or p.comm)
    role = f"[bold]{escape(p.role)}[/] " if p.role != "other" else ""
    pid = p.pid if p.node_pid is None else p.node_pid
    if p.pid_unknown and not pid:     # a log that names no task (strace -o LOG -p N)
        who = "thread [bold]unknown[/] [dim](the log does not name its process: give --pid)[/]"
    elif p.pid_unknown:
        who = f"thread [bold]{pid}[/] [dim](its process is not shown by the recording)[/]"
    else:
        who = f"pid [bold]{pid}[/]"
        if p.ns_pid is not None:
            who += f" [dim](pid {p.ns_pid} in its namespace)[/]"
    line = f"{role}{who} {cmd}  {_verdict(p.verdict)} [dim]({p.rule})[/]"
    counters = _counters(p.counters)
    if counters:
        line += f"\n[dim]{counters}[/]"
    return Text.from_markup(line)


def _add_process(node: Tree, p: ProcessReport, verbose: bool, ids: _Ids) -> None:
    if not p.rule.startswith("thread-"):     # thread-level evidence is shown at its thread
        for e in p.evidence:
            node.add(Text.from_markup(f"[italic]{escape(e)}[/]"))
    for w in p.waits_on:
        if w["pids"]:
            who = ", ".join(ids.pid(q) for q in w["pids"])
            node.add(Text.from_markup(f"waits on {escape(who)} [dim]({escape(w['kind'])})[/]"))
    folded: List[ThreadReport] = []
    gone = 0                # exited threads past the first FOLD_EXITED_AFTER (thread churn)
    for t in p.threads:
        if not verbose and (t.helper or t.parked) and len(p.threads) > 3:
            folded.append(t)
            continue
        if not verbose and t.verdict == EXITED_VERDICT:
            gone += 1
            if gone > FOLD_EXITED_AFTER:
                continue
        tn = node.add(_thread_line(t, ids.tid(p.pid, t.tid)))
        for e in t.evidence:
            tn.add(Text.from_markup(f"[dim]{escape(e)}[/]"))
    if gone > FOLD_EXITED_AFTER:
        node.add(Text.from_markup(f"[dim]+ {gone - FOLD_EXITED_AFTER} more threads that exited "
                                  "during the recording (--verbose shows them)[/]"))
    if folded:
        helpers = sum(1 for t in folded if t.helper)
        parked = len(folded) - helpers
        bits = []
        if helpers:
            names = sorted({t.name or (t.helper or "").split(" (")[0]
                            for t in folded if t.helper})
            bits.append(f"{helpers} library helper threads ({escape(', '.join(names[:4]))})")
        if parked:
            bits.append(f"{parked} threads parked in one wait all along (pool/I-O threads)")
        node.add(Text.from_markup(f"[dim]+ {' and '.join(bits)}: they do not decide the "
                                  "verdict (--verbose shows them)[/]"))


def window_text(window: Dict[str, Any]) -> str:
    """How long the recording lasted, in words: a log without times says so, never "0.0 s"."""
    if window.get("timed", True):
        return f"{window['duration']:.1f} s"
    clock = window.get("by_clock")
    if clock:
        return f"at least {clock:.1f} s (the program's own {window.get('clock', 'clock')} " \
               "readings; no times in the log)"
    least = window.get("at_least")
    return f"at least {least:.1f} s (-T durations; no times)" if least else "no times in the log"


def process_tree(report: Report, verbose: bool = False, ids: Optional["_Ids"] = None) -> Tree:
    """The report's processes as a tree by parent (one subtree per node of a merged report),
    each process's children in the report's order: children are looked up by ppid, so the
    tree costs what it shows, not the square of the processes."""
    ids = ids or _Ids(report)
    by_pid = {p.pid: p for p in report.processes}
    roots = [p for p in report.processes if p.ppid not in by_pid or p.ppid == p.pid]
    children: Dict[int, List[ProcessReport]] = {}
    for p in report.processes:
        if p.ppid != p.pid:
            children.setdefault(p.ppid, []).append(p)
    tree = Tree("[bold]process tree[/]", guide_style="dim")
    per_node: Dict[str, Tree] = {}
    for r in roots:
        if r.node is not None and r.node not in per_node:
            per_node[r.node] = tree.add(Text.from_markup(f"[bold]node {escape(r.node)}[/]"))
        pending: List[Tuple[Tree, Union[ProcessReport, int]]] = [
            (per_node.get(r.node or "", tree), r)]
        while pending:              # depth first, as a recursion would, without its limit
            parent, p = pending.pop()
            if isinstance(p, int):  # the count of the exited children not shown, last
                parent.add(Text.from_markup(f"[dim]+ {p} more processes that exited during "
                                            "the recording, without children (--verbose "
                                            "shows them)[/]"))
                continue
            node = parent.add(_process_label(p))
            _add_process(node, p, verbose, ids)
            shown, folded = _fold_exited(children.get(p.pid, []), children, verbose)
            if folded:
                pending.append((node, folded))
            pending.extend((node, c) for c in reversed(shown))
    return tree


def _fold_exited(kids: List[ProcessReport], children: Dict[int, List[ProcessReport]],
                 verbose: bool) -> Tuple[List[ProcessReport], int]:
    """The children to show and how many are left out: past the first ``FOLD_EXITED_AFTER``
    that exited without children of their own, the others such are counted, not drawn (a fork
    storm leaves thousands; drawing each took rich about 2 ms).
    A process's children that exited without children of their own are folded past the first
    ``FOLD_EXITED_AFTER`` (one line counts the others), and a process's exited threads past as
    many."""
    gone = [c for c in kids if c.verdict == EXITED_VERDICT and c.pid not in children]
    if verbose or len(gone) <= FOLD_EXITED_AFTER:
        return kids, 0
    hidden = {id(c) for c in gone[FOLD_EXITED_AFTER:]}
    return [c for c in kids if id(c) not in hidden], len(hidden)


def render_report(report: Report, console: Optional[Console] = None, *,
                  verbose: bool = False) -> None:
    console = console or report_console()
    v = report.verdict
    partial = "  [yellow]partial: not everything could be observed[/]" \
        if report.unobserved else ""
    console.print(Text.from_markup(f"[bold]hangtrace verdict:[/] {_verdict(v)}  "
                                   f"[dim]({report.rule}, {window_text(report.window)}, "
                                   f"backends: {', '.join(report.backends) or '?'})[/]"
                                   + partial))
    for line in report.unobserved:      # the verdict rests on the rest: say what was not seen
        console.print(Text.from_markup(f"[yellow]not observed:[/] {escape(line)}"))
    if report.watch:       # a capture by ``hangtrace watch``: when the silence began
        console.print(Text.from_markup(f"[bold]watch:[/] {escape(report.watch['summary'])}"))
    rc = report.root_cause
    ids = _Ids(report)
    if rc.get("summary"):
        pick = next((p for p in report.processes if p.pid == rc.get("pid")), None)
        if rc.get("pid") is None and any(p.pid_unknown and not p.pid
                                         for p in report.processes):
            who = "thread unknown"
        elif pick is not None and pick.pid_unknown:
            who = f"tid {ids.pid(rc['pid']).removeprefix('pid ')}, process unknown"
        else:
            who = ids.pid(rc["pid"]) + (f" tid {ids.tid(rc['pid'], rc['tid'])}" if rc.get("tid")
                                        else "") if rc.get("pid") else ""
        console.print(Text.from_markup(f"[bold]root cause[/]{' [dim]' + who + '[/]' if who else ''}: "
                                       f"{escape(rc['summary'])}"))
    tree = process_tree(report, verbose, ids)
    if report.processes:
        console.print(tree)
    recorder = flight_recorder_tree(report.flight_recorder)
    if recorder is not None:
        console.print(recorder)
    waits = wait_graph_tree(report.wait_graph, verbose)
    if waits is not None:
        console.print(waits)
    stacks = rank_stacks_tree(report.rank_stacks)
    if stacks is not None:
        console.print(stacks)
    for h in report.partial_hangs:      # part of the tree hung while the rest goes on
        tids = ", ".join(map(str, h["tids"][:8])) + (" ..." if len(h["tids"]) > 8 else "")
        style = "bold red" if h["certain"] else "yellow"
        console.print(Text.from_markup(
            f"[{style}]partial hang:[/] {ids.pid(h['pid'])}: {len(h['tids'])} thread"
            f"{'s' if len(h['tids']) > 1 else ''} ({tids}) blocked all window on "
            f"{escape(h['object'])}: {escape(h['evidence'])}"))
    from .evidence import render_evidence
    render_evidence(report.evidence, console, verbose, ids.pid)
    for n in report.notes:
        console.print(Text.from_markup(f"[yellow]note:[/] {escape(n)}"))
    if report.trace_path:
        console.print(Text.from_markup(f"[dim]trace saved: {escape(report.trace_path)}[/]"))


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


def rank_stacks_tree(groups: List[Dict], frames: int = 4) -> Optional[Tree]:
    """Ranks grouped by their main thread's Python stack (STAT-style), largest group first."""
    if len(groups) < 1 or sum(len(g.get("pids", [])) for g in groups) < 2:
        return None
    tree = Tree("[bold]ranks by main-thread stack[/]", guide_style="dim")
    for g in groups:
        names = ", ".join(g.get("labels") or [f"pid {p}" for p in g.get("pids", [])])
        where = "[magenta]in a collective[/] " if g.get("collective") else ""
        node = tree.add(Text.from_markup(f"{len(g.get('pids', []))} × {where}{escape(names)}"))
        for f in (g.get("frames") or [])[:frames]:
            node.add(Text(f, style="dim"))
    return tree


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
