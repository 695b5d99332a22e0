"""Human rendering of a ``Report`` with rich: the verdict, the root cause, the process tree.

Contract: reads only the Report (never /proc, never the trace). By default it is laid out for one
screen (compact.py's folds; evidence a line per kind; on a screen each line one row) and ends
with the verdict, the root cause (two rows at most) and the chain of waits, a line a hop;
``verbose`` shows every thread, the root cause under the verdict. Helper and parked threads are
folded into one line per process unless ``verbose``, and so are exited children and threads
past ``FOLD_EXITED_AFTER``, and process levels past ``MAX_DEPTH`` (tree_fold.py: folded
into one line, or with ``verbose`` drawn at that depth). Thread lines: thread_lines.py; other
sections: sections.py. A merged report shows a tree per node, pids and tids as their node knows
them (``Ids``). ``report_console(file, stderr)``: wrapped to a terminal's width, else never
wrapped and without colours (grep finds whole lines).
"""
from __future__ import annotations

import errno
from typing import Any, Dict, List, Optional, Tuple, Union

from rich.console import Console
from .markup import SafeConsole, escape
from rich.text import Text
from rich.tree import Tree

from ..report import ProcessReport, Report, ThreadReport
from . import compact as cv
from .fold import cut, number_ranges, pid_runs
from .rows import one_row_each, print_rows
from .sections import flight_recorder_tree, rank_stacks_tree, wait_graph_tree
from .thread_lines import Ids, add_compact_threads, counters_text, thread_line, verdict_markup
from .tree_fold import (EXITED_VERDICT, FOLD_EXITED_AFTER, MAX_DEPTH, below, deeper_line,
                        fold_exited, naming_parent)

NO_WRAP_WIDTH = 1_000_000   # "never wrap": wider than any line a report has
COMPACT_EVIDENCE = 1    # evidence lines a process shows in the default view


class _ReportConsole(SafeConsole):
    """rich's Console, except that a reader gone away (``| head``) is an EPIPE for the command
    line to map to its exit status (141), not rich's own ``SystemExit(1)``."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "the reader of the output went away")


def report_console(file: Any = None, stderr: bool = False) -> Console:
    """The Console a report is printed on: on a terminal it wraps to the terminal's width; anywhere
    else (a pipe, a file, watch's REPORT.txt) it never wraps a line and has no colours, so that
    grep over saved reports finds whole lines; on stdout/stderr ``--color`` and NO_COLOR decide
    the colours (render/colour.py)."""
    import sys
    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    try:
        tty = stream is not None and stream.isatty()
    except (ValueError, OSError):
        tty = False
    from .colour import console_options
    colours = console_options(tty) if file is None else {}      # --color: the std streams only
    if tty:
        return _ReportConsole(file=file, stderr=stderr, **colours)
    return _ReportConsole(file=file, stderr=stderr, width=NO_WRAP_WIDTH, soft_wrap=True,
                          **(colours or {"color_system": None}))


def _process_label(p: ProcessReport, cmd_chars: int = 90, compact: bool = False,
                   waits: str = "") -> Text:
    """Its role, pid, command line, verdict and counters; ``compact``: on one line, the
    verdict and ``waits`` (what it waits on) before the command line (a screen's row cut at
    its end keeps the verdict)."""
    cmd = escape(cut(" ".join(p.cmdline), cmd_chars) or p.comm)
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
    counters = counters_text(p.counters)
    if compact:
        return Text.from_markup(f"{role}{who}  {verdict_markup(p.verdict)} "
                                f"[dim]({escape(p.rule)})[/]  "
                                f"{escape(waits) + '  ' if waits else ''}"
                                f"[dim]{counters + '  ' if counters else ''}{cmd}[/]")
    line = f"{role}{who} {cmd}  {verdict_markup(p.verdict)} [dim]({escape(p.rule)})[/]"
    if counters:
        line += f"\n[dim]{counters}[/]"
    return Text.from_markup(line)


def _add_process(node: Tree, p: ProcessReport, verbose: bool, ids: Ids,
                 compact: bool = False, keep: frozenset = frozenset(),
                 alone: frozenset = frozenset()) -> None:
    """A process's evidence, waits and threads under ``node``; ``compact`` (the default view,
    compact.py): at most ``COMPACT_EVIDENCE`` lines of evidence each, alike threads folded,
    one Python frame a thread but for the threads in ``keep`` (the root cause's)."""
    if not p.rule.startswith("thread-"):     # thread-level evidence is shown at its thread
        for e in p.evidence[:COMPACT_EVIDENCE] if compact else p.evidence:
            node.add(Text.from_markup(f"[italic]{escape(pid_runs(e) if compact else e)}[/]"))
    for w in [] if compact else p.waits_on:        # compact: on its label (_waits_text)
        if w["pids"]:
            who = ", ".join(ids.pid(q) for q in w["pids"])
            node.add(Text.from_markup(f"waits on {escape(who)} [dim]({escape(w['kind'])})[/]"))
    folded: List[ThreadReport] = []
    shown: List[ThreadReport] = []
    gone = 0                # exited threads past the first FOLD_EXITED_AFTER (thread churn)
    for t in p.threads:
        if not verbose and (t.helper or t.parked) and len(p.threads) > 3:
            folded.append(t)
            continue
        if not verbose and t.verdict == EXITED_VERDICT:
            gone += 1
            if gone > FOLD_EXITED_AFTER:
                continue
        shown.append(t)
    if compact:
        add_compact_threads(node, p, shown, ids, keep, alone)
    else:
        for t in shown:
            tn = node.add(thread_line(t, ids.tid(p.pid, t.tid)))
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


def _waits_text(p: ProcessReport, ids: Ids) -> str:
    """"waits on pid 3-5,9 (pipe); pid 7 (collective, socket)": each set of processes it waits
    on once, with every reason."""
    kinds: Dict[Tuple[int, ...], List[str]] = {}
    for w in p.waits_on:
        if w["pids"] and w["kind"] not in kinds.setdefault(tuple(w["pids"]), []):
            kinds[tuple(w["pids"])].append(w["kind"])
    parts = [f"{_pids_text(list(t), ids)} ({', '.join(k)})" for t, k in kinds.items()]
    return "waits on " + "; ".join(parts) if parts else ""


def _pids_text(pids: List[int], ids: Ids) -> str:
    """"pid 3-5,9" for pids of one trace; one by one in a merged report (node ids)."""
    named = [ids.pid(q) for q in pids]
    if len(pids) < 3 or any(" on node " in n for n in named):
        return ", ".join(named)
    return "pid " + number_ranges(pids)


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


def process_tree(report: Report, verbose: bool = False, ids: Optional["Ids"] = None,
                 compact: bool = False) -> Tree:
    """The report's processes as a tree by parent (one subtree per node of a merged report),
    each process's children in the report's order: children are looked up by ppid, so the
    tree costs what it shows, not the square of the processes. ``compact`` (the default view):
    alike leaf siblings folded into one line (compact.process_groups), the root cause's process
    never. At most ``MAX_DEPTH`` levels are nested (a drawn line costs its depth, so a chain
    drawn nested costs the square of its length): below a process at that depth, ``compact``
    folds its descendants into one line (the root cause's process drawn under it), else they
    are drawn at that depth, each naming its parent (tree_fold.py)."""
    ids = ids or Ids(report)
    by_pid = {p.pid: p for p in report.processes}
    roots = [p for p in report.processes if p.ppid not in by_pid or p.ppid == p.pid]
    children: Dict[int, List[ProcessReport]] = {}
    for p in report.processes:
        if p.ppid != p.pid:
            children.setdefault(p.ppid, []).append(p)
    parents = set(children)         # once: a set per process drawn was the square of them
    rc = report.root_cause
    keep_pids = {rc["pid"]} if rc.get("pid") is not None else set()
    keep_tids = frozenset({rc["tid"]} if rc.get("tid") is not None else ())
    alone = frozenset(cv.proof_tids(report)) if compact else frozenset()
    tree = Tree("[bold]process tree[/]", guide_style="dim")
    per_node: Dict[str, Tree] = {}
    _Item = Union[ProcessReport, int, List[ProcessReport], Tuple[ProcessReport]]
    for r in roots:
        if r.node is not None and r.node not in per_node:
            per_node[r.node] = tree.add(Text.from_markup(f"[bold]node {escape(r.node)}[/]"))
        pending: List[Tuple[Tree, _Item, int]] = [(per_node.get(r.node or "", tree), r, 1)]
        while pending:              # depth first, as a recursion would, without its limit
            parent, p, depth = pending.pop()
            if isinstance(p, int):  # the count of the exited children not shown, last
                parent.add(Text.from_markup(f"[dim]+ {p} more processes that exited during "
                                            "the recording, without children (--verbose "
                                            "shows them)[/]"))
                continue
            if isinstance(p, list):     # alike siblings, folded
                parent.add(_folded_processes(p, by_pid, ids))
                continue
            if isinstance(p, tuple):    # compact: the descendants past MAX_DEPTH, folded
                count, levels, verdicts, kept = below(p[0], children, keep_pids)
                fold = parent.add(deeper_line(count, levels, verdicts))
                for k in kept:          # the root cause is never folded away
                    label = _process_label(k, cv.CMDLINE_CHARS, True, _waits_text(k, ids))
                    _add_process(fold.add(naming_parent(label, ids.pid(k.ppid))), k, False,
                                 ids, True, keep_tids, alone)
                continue
            label = _process_label(p, cv.CMDLINE_CHARS if compact else 90, compact,
                                   _waits_text(p, ids) if compact else "")
            if depth > MAX_DEPTH:       # not compact: drawn at MAX_DEPTH, naming its parent
                label = naming_parent(label, ids.pid(p.ppid))
            node = parent.add(label)
            _add_process(node, p, verbose, ids, compact,
                         keep_tids if p.pid in keep_pids else frozenset(), alone)
            kids = children.get(p.pid, [])
            if compact and depth >= MAX_DEPTH and kids:
                pending.append((node, (p,), depth + 1))
                continue
            under = node if depth < MAX_DEPTH else parent
            shown, folded = fold_exited(kids, children, verbose)
            if folded:
                pending.append((under, folded, depth + 1))
            if not compact:
                pending.extend((under, c, depth + 1) for c in reversed(shown))
                continue
            for group in reversed(cv.process_groups(shown, parents, keep_pids)):
                pending.append((under, group if len(group) > 1 else group[0], depth + 1))
    return tree


def _folded_processes(group: List[ProcessReport], by_pid: Dict[int, ProcessReport],
                      ids: Ids) -> Text:
    """One line for alike sibling processes: "x7 scheduler TP0-4,6-7 pids ...: blocked (rule):
    waits on scheduler TP5 pid 42 (collective)"."""
    p = group[0]
    pids = _pids_text([m.pid for m in group], ids)
    line = (f"[bold]x{len(group)}[/] [bold]{escape(cv.process_word(group))}[/]  "
            f"{verdict_markup(p.verdict)} [dim]({escape(p.rule)})  {pids}[/]")
    kinds: Dict[Tuple[int, ...], List[str]] = {}
    for w in p.waits_on:
        targets = tuple(q for q in w["pids"] if q in by_pid)
        if targets and w["kind"] not in kinds.setdefault(targets, []):
            kinds[targets].append(w["kind"])
    waits = [f"{cv.process_word([by_pid[q] for q in t])} ({', '.join(k)})"
             for t, k in kinds.items()]
    if waits:
        line += f"\nwaits on {escape('; '.join(waits))}"
    counts = sorted({len(m.threads) for m in group})
    n = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    line += f"\n[dim]{n} thread{'s' if n != '1' else ''} each (--verbose shows them)[/]"
    return Text.from_markup(line)


def _root_cause_who(report: Report, ids: Ids) -> str:
    """Who the root cause names, as its line starts ("pid 42 tid 43", "thread unknown")."""
    rc = report.root_cause
    pick = next((p for p in report.processes if p.pid == rc.get("pid")), None)
    if rc.get("pid") is None and any(p.pid_unknown and not p.pid for p in report.processes):
        return "thread unknown"
    if pick is not None and pick.pid_unknown:
        return f"tid {ids.pid(rc['pid']).removeprefix('pid ')}, process unknown"
    if not rc.get("pid"):
        return ""
    return ids.pid(rc["pid"]) + (f" tid {ids.tid(rc['pid'], rc['tid'])}" if rc.get("tid")
                                 else "")


def _root_cause_text(report: Report, ids: Ids, summary: str) -> Text:
    who = _root_cause_who(report, ids)
    return Text.from_markup(f"[bold]root cause[/]{' [dim]' + who + '[/]' if who else ''}: "
                            f"{escape(summary)}")


def render_report(report: Report, console: Optional[Console] = None, *,
                  verbose: bool = False) -> None:
    """The report: the verdict first; by default (compact.py) the tree folded to one screen and
    the verdict, root cause and chain of waits last, so that they stay on the screen; with
    ``verbose`` every thread and every line of evidence, the root cause under the verdict."""
    console = console or report_console()
    compact = not verbose
    screen = console.width < NO_WRAP_WIDTH     # a terminal (or a fixed width): rows count
    v = report.verdict
    cut = report.cut_short_text()
    partial = f"  [bold yellow]partial: {escape(cut)}[/]" if cut else \
        "  [yellow]partial: not everything could be observed[/]" if report.unobserved else ""
    header = Text.from_markup(f"[bold]hangtrace verdict:[/] {verdict_markup(v)}  "
                              f"[dim]({escape(report.rule)}, "
                              f"{window_text(report.window)}, "
                              f"backends: {escape(', '.join(report.backends) or '?')})[/]" + partial)
    console.print(header)
    for line in report.unobserved:      # the verdict rests on the rest: say what was not seen
        console.print(Text.from_markup(f"[yellow]not observed:[/] {escape(line)}"))
    if report.watch:       # a capture by ``hangtrace watch``: when the silence began
        console.print(Text.from_markup(f"[bold]watch:[/] {escape(report.watch['summary'])}"))
    ids = Ids(report)
    if report.root_cause.get("summary") and not compact:
        console.print(_root_cause_text(report, ids, report.root_cause["summary"]))

    def show(tree: Optional[Tree]) -> None:
        if tree is not None:
            console.print(one_row_each(tree) if compact and screen else tree)

    if report.processes:
        show(process_tree(report, verbose, ids, compact))
    show(flight_recorder_tree(report.flight_recorder))
    show(wait_graph_tree(report.wait_graph, verbose))
    show(rank_stacks_tree(report.rank_stacks, compact=compact))
    for h in report.partial_hangs:      # part of the tree hung while the rest goes on
        tids = ", ".join(map(str, h["tids"][:8])) + (" ..." if len(h["tids"]) > 8 else "")
        style = "bold red" if h["certain"] else "yellow"
        console.print(Text.from_markup(
            f"[{style}]partial hang:[/] {ids.pid(h['pid'])}: {len(h['tids'])} thread"
            f"{'s' if len(h['tids']) > 1 else ''} ({tids}) blocked all window on "
            f"{escape(h['object'])}: {escape(h['evidence'])}"))
    from .evidence import evidence_tree
    show(evidence_tree(report.evidence, verbose, ids.pid, compact=compact))
    for n in report.notes:
        note = Text.from_markup(f"[yellow]note:[/] {escape(n)}")
        if compact and screen:
            console.print(note, no_wrap=True, overflow="ellipsis")
        else:
            console.print(note)
    if report.trace_path:
        console.print(Text.from_markup(f"[dim]trace saved: {escape(report.trace_path)}[/]"))
    if compact:
        _render_summary(report, console, ids, screen)


def _render_summary(report: Report, console: Console, ids: Ids, screen: bool) -> None:
    """The default view's last lines: the verdict, the root cause (condensed, at most
    ``compact.ROOT_CAUSE_ROWS`` rows on a screen) and the chain of waits, one line a hop."""
    console.print(Text.from_markup(f"[bold]verdict:[/] {verdict_markup(report.verdict)} "
                                   f"[dim]({escape(report.rule)})[/]"))
    if report.root_cause.get("summary"):
        line = _root_cause_text(report, ids, cv.condensed_summary(report))
        if screen:
            print_rows(console, line, cv.ROOT_CAUSE_ROWS)
        else:
            console.print(line)
    for i, hop in enumerate(cv.chain_lines(report)):
        text = Text.from_markup(("[bold]chain:[/] " if i == 0 else "       ") + escape(hop))
        if screen:
            console.print(text, no_wrap=True, overflow="ellipsis")
        else:
            console.print(text)
