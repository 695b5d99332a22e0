"""The console report's default view: one screen for a tree of hundreds of threads (issue 43).

Contract: reads only the Report (never /proc); console.py draws it unless ``--verbose``. With
fold.py's rules (``snapshot``'s): alike threads of a process (``thread_key``: what they do,
whatever verdict a window's sampling gave each) -> one line "x4 python3 tids 10-13" that says
the verdicts its members got (``verdict_mix``); alike leaf sibling processes
(``process_key``) -> one line "x7 scheduler TP0-4,6-7"; the root cause's summary with label
lists as rank ranges and alike clauses folded (``condensed_summary``); the chain of waits
from the tree's root to the root cause, a line a hop (``chain_lines``). The root cause's
process and thread, and the threads on the wait graph's proven path (``proof_tids``), are
never folded.
"""
from __future__ import annotations

import re
from typing import Dict, Hashable, Iterator, List, Optional, Sequence, Set, Tuple

from ..report import ProcessReport, Report, ThreadReport
from .fold import fold_groups, label_ranges, number_ranges, shape

__all__ = ["ROOT_CAUSE_ROWS", "CMDLINE_CHARS", "thread_key", "thread_groups", "verdict_mix",
           "states", "proof_tids", "process_key",
           "process_groups", "process_word", "condensed_summary", "chain_lines"]

ROOT_CAUSE_ROWS = 2         # rows the root cause's line takes at most
CMDLINE_CHARS = 48          # a process's command line past this is cut
MAX_HOPS = 8                # chain lines at most
_RANK_NUMBER = re.compile(r"\d+$")
_NAMED_PID = re.compile(r"\(pid (\d+)\)")     # how _label names a process


def thread_key(t: ThreadReport) -> Hashable:
    """Threads with one key are alike: what they do (name, call with addresses masked,
    innermost Python frame), not how often they did it in the window nor what a sample caught
    them in: a watchdog that woke 4 times in the window is judged busy-waiting where its
    sibling that woke 3 times is idle, one caught runnable is R where the others are S. STAT's
    rule: one stack, one line; the line says each verdict and state its members got
    (``verdict_mix``, ``states``)."""
    return (t.name, shape(t.current), tuple(t.stack[:1]), bool(t.helper), t.parked)


def verdict_mix(group: Sequence[ThreadReport]) -> List[Tuple[str, str, List[ThreadReport]]]:
    """A folded group's members by (verdict, rule): (verdict, rule, members), the most
    members first, ties in the order of their first member."""
    by: Dict[Tuple[str, str], List[ThreadReport]] = {}
    for t in group:
        by.setdefault((t.verdict, t.rule), []).append(t)
    ranked = sorted(by.items(), key=lambda kv: -len(kv[1]))    # stable: ties keep order
    return [(v, r, members) for (v, r), members in ranked]


def states(group: Sequence[ThreadReport]) -> str:
    """The states a group's members were seen in, the most common first: "S" or "S,R"."""
    seen: Dict[str, int] = {}
    for t in group:
        seen[t.state] = seen.get(t.state, 0) + 1
    return ",".join(sorted(seen, key=lambda s: -seen[s]))


def proof_tids(report: Report) -> Set[int]:
    """The threads on the wait graph's proven path (the chain's hops): never folded."""
    g = report.wait_graph or {}
    path = (g.get("proof") or {}).get("path") or []
    ids = {e[end] for e in path for end in ("src", "dst")}
    return {n["tid"] for n in g.get("nodes", [])
            if n.get("id") in ids and isinstance(n.get("tid"), int)}


def thread_groups(threads: Sequence[ThreadReport], keep: Set[int]) -> List[List[ThreadReport]]:
    """Alike threads grouped (fold_groups), the threads in ``keep`` each on its own."""
    return fold_groups(threads, lambda t: ("keep", t.tid) if t.tid in keep else thread_key(t))


def _base_role(p: ProcessReport) -> str:
    return _RANK_NUMBER.sub("", p.role).rstrip() or p.comm


def process_key(p: ProcessReport) -> Hashable:
    """Processes with one key are alike: one role but for its rank number, one verdict and
    rule, waiting on the same processes for the same reasons (what their threads did beside
    that, a watchdog's tick more or less, does not part them)."""
    waits = tuple(sorted((w["kind"], tuple(sorted(w["pids"]))) for w in p.waits_on))
    return (_base_role(p), p.verdict, p.rule, waits, p.node)


def process_groups(kids: Sequence[ProcessReport], has_children: Set[int],
                   keep: Set[int]) -> List[List[ProcessReport]]:
    """Sibling processes grouped: alike leaves folded (module doc), the others one each."""
    def key(p: ProcessReport) -> Hashable:
        if p.pid in keep or p.pid in has_children:
            return ("keep", p.pid)
        return process_key(p)
    return fold_groups(kids, key)


def process_word(procs: Sequence[ProcessReport]) -> str:
    """How a line names one process ("launcher pid 7") or several ("scheduler TP0-4,6-7")."""
    if len(procs) == 1:
        p = procs[0]
        role = p.role if p.role != "other" else p.comm
        return f"{role} pid {p.node_pid if p.node_pid is not None else p.pid}"
    roles = [p.role if p.role != "other" else p.comm for p in procs]
    if len(set(roles)) == len(roles) and all(_RANK_NUMBER.search(r) for r in roles):
        return label_ranges(roles)
    if len(procs) <= 3:
        return ", ".join(process_word([p]) for p in procs)
    return f"{label_ranges(sorted(set(roles)))} pids {number_ranges([p.pid for p in procs])}"


# --------------------------------------------------------------------------- root cause

def _label(p: ProcessReport) -> str:
    """The label the analysis gives a process in its sentences ("scheduler TP0 (pid 42)")."""
    role = p.role if p.role != "other" else p.comm
    return f"{role} (pid {p.pid})"


def condensed_summary(report: Report) -> str:
    """The root cause's summary with label lists as ranges and alike clauses folded."""
    text = report.root_cause.get("summary") or ""
    named = {int(pid) for pid in _NAMED_PID.findall(text)}   # the alternation below: only
    labels = {_label(p): p for p in report.processes if p.pid in named}    # those it names
    if len(labels) < 2:
        return text
    alt = "|".join(re.escape(x) for x in sorted(labels, key=len, reverse=True))
    runs = re.compile(rf"(?:{alt})(?:, (?:{alt}))+")

    def fold_run(m: "re.Match[str]") -> str:
        procs = [labels[x] for x in re.findall(alt, m.group(0))]
        return process_word(procs)
    text = runs.sub(fold_run, text)
    clause = re.compile(rf"^({alt}) (.+)$")
    out: List[Tuple[List[ProcessReport], str]] = []
    for part in text.split("; "):
        m = clause.match(part)
        if m and out and out[-1][0] and out[-1][1] == m.group(2):
            out[-1][0].append(labels[m.group(1)])
            continue
        out.append(([labels[m.group(1)]], m.group(2)) if m else ([], part))
    parts = []
    for procs, rest in out:
        if not procs:
            parts.append(rest)
        elif len(procs) == 1:
            parts.append(f"{_label(procs[0])} {rest}")
        else:
            plural = re.sub(r"^(waits|spins|is|has) ",
                            lambda w: {"waits": "wait ", "spins": "spin ", "is": "are ",
                                       "has": "have "}[w.group(1)], rest)
            parts.append(f"{process_word(procs)} {plural}")
    return "; ".join(parts)


# --------------------------------------------------------------------------- the chain

def _graph_chain(report: Report) -> List[str]:
    g = report.wait_graph or {}
    proof = g.get("proof") or {}
    path = proof.get("path") or []
    if not path:
        return []
    nodes = {n["id"]: n for n in g.get("nodes", [])}

    def label(nid: str) -> str:
        return str(nodes.get(nid, {}).get("label", nid))
    lines = [f"{label(e['src'])} → {label(e['dst'])} ({e['object']})" for e in path]
    return lines[:MAX_HOPS]


def _depths(report: Report, target: int) -> Dict[int, int]:
    """Each process whose waits reach ``target``: its longest distance to it (target: 0)."""
    by_pid = {p.pid: p for p in report.processes}
    waits = {p.pid: sorted({q for w in p.waits_on for q in w["pids"] if q in by_pid})
             for p in report.processes}
    memo: Dict[int, Optional[int]] = {}
    for pid in by_pid:
        _depth_from(pid, target, waits, memo)
    return {pid: d for pid in by_pid if (d := memo.get(pid)) is not None}


def _depth_from(start: int, target: int, waits: Dict[int, List[int]],
                memo: Dict[int, Optional[int]]) -> None:
    """memo[start]: the longest way from ``start`` to ``target`` along ``waits`` not through a
    process already on the way (None: none reaches it); each process's figure kept once found.
    Depth first with a stack of its own (a chain of waits 10^4 processes long overflowed
    Python's recursion)."""
    if start == target or start in memo:
        memo.setdefault(target, 0)
        return
    memo[target] = 0
    on_way = {start}
    stack: List[Tuple[int, Iterator[int], Optional[int]]] = [(start, iter(waits.get(start, [])),
                                                              None)]
    while stack:
        pid, todo, best = stack[-1]
        q = next((q for q in todo if q not in on_way), None)
        if q is not None and q not in memo:
            on_way.add(q)
            stack.append((q, iter(waits.get(q, [])), None))
            continue
        if q is not None:                     # known already (the target: 0)
            d = memo[q]
            if d is not None and (best is None or d + 1 > best):
                stack[-1] = (pid, todo, d + 1)
            continue
        stack.pop()
        on_way.discard(pid)
        memo[pid] = best
        if stack:
            up, up_todo, up_best = stack[-1]
            if best is not None and (up_best is None or best + 1 > up_best):
                stack[-1] = (up, up_todo, best + 1)


def _thread_words(t: ThreadReport) -> str:
    call = f" in {t.current}" if t.current and t.current != "running" else ""
    return f"{t.verdict} ({t.rule}), {t.state}{call}"


def chain_lines(report: Report) -> List[str]:
    """The chain of waits, one line a hop (module doc); [] when there is none to show."""
    from_graph = _graph_chain(report)
    if from_graph:
        return from_graph
    target = report.root_cause.get("pid")
    by_pid = {p.pid: p for p in report.processes}
    if target not in by_pid:
        return []
    depths = _depths(report, target)
    if len(depths) < 2:
        return []
    lines = []
    at: Dict[int, List[ProcessReport]] = {}
    for p in sorted(depths):                # the processes at each distance, in one pass
        at.setdefault(depths[p], []).append(by_pid[p])
    for d in range(max(depths.values()), 0, -1):
        here = at.get(d, [])
        if not here:
            continue
        targets: Dict[int, None] = {}       # ordered sets: a level may hold thousands
        kinds: Dict[str, None] = {}
        for p in here:
            for w in p.waits_on:
                for q in w["pids"]:
                    if depths.get(q) is not None and depths[q] < d:
                        targets[q] = None
                        kinds[w["kind"]] = None
        lines.append(f"{process_word(here)} → {process_word([by_pid[q] for q in targets])} "
                     f"({', '.join(kinds)})")
    end = by_pid[target]
    tid = report.root_cause.get("tid")
    thread = next((t for t in end.threads if t.tid == tid), None)
    tail = f" thread {tid}: {_thread_words(thread)}" if thread is not None else \
        f": {end.verdict} ({end.rule})"
    lines.append(process_word([end]) + tail)
    return lines[-MAX_HOPS:]

