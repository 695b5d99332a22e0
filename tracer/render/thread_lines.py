"""A thread's lines in the console report: its line and stacks, and the default view's folded
groups of alike threads (compact.py's rules), with the verdict styles every view shares.

Contract: reads only the Report's thread and process models (never /proc); returns rich
markup Text for console.py's tree. ``Ids`` maps a merged report's keys back to the pids and
tids their node knows. ``add_compact_threads`` draws a process's threads folded: alike ones
one line that says each verdict its members got, the odd ones named with their evidence
(STAT); the root cause's thread, D-state threads and threads on the chain's proven path
never folded.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from rich.text import Text
from rich.tree import Tree

from ..report import ProcessReport, Report, ThreadReport
from . import compact as cv
from .fold import number_ranges, pid_runs
from .markup import escape

__all__ = ["STYLE", "STACK_FRAMES", "LOW_FRAMES", "COMPACT_THREAD_EVIDENCE", "Ids",
           "verdict_markup", "counters_text", "thread_line", "add_compact_threads"]

STACK_FRAMES = 6        # Python frames shown per thread (innermost first)
LOW_FRAMES = 4          # kernel and native frames shown per thread (innermost first)
COMPACT_THREAD_EVIDENCE = 2     # evidence rows a thread shows in the default view (a D-state
                                # thread's second: its kernel stack)
STYLE = {"progressing": "bold green", "idle": "green", "busy-waiting": "bold yellow",
         "blocked": "bold magenta", "deadlocked": "bold red", "exited": "bold cyan",
         "unknown": "dim"}


def verdict_markup(v: str, dim: bool = False) -> str:
    """The verdict in its style (``dim``: greyed, as a thread's under a process's)."""
    style = "dim" if dim else STYLE.get(v, "white")
    return f"[{style}]{escape(v)}[/]"


def counters_text(c: Dict[str, float]) -> str:
    """A thread's or process's counters in words: "6 syscalls/s, 5 eventfd writes, CPU 0%"."""
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


class Ids:
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


def thread_line(t: ThreadReport, tid: Optional[int] = None, frames: int = STACK_FRAMES,
                 low_frames: int = LOW_FRAMES, head: str = "", state: str = "",
                 verdicts: str = "") -> Text:
    """A thread's line and its stacks (``frames`` Python frames, ``low_frames`` native and
    kernel ones); a folded group's ``head`` ("x4 ... tids 3-6"), ``state`` ("S,R") and
    ``verdicts`` (markup) replace its tid, state and verdict."""
    name = escape(t.name or "?")
    cur = f" in {escape(t.current)}" if t.current else ""
    who = t.tid if tid is None else tid
    verdicts = verdicts or f"{verdict_markup(t.verdict)} [dim]({escape(t.rule)})[/]"
    line = (head or f"[bold]{who or 'unknown'}[/] {name}") + \
        f" [dim]{escape(state or t.state)}{cur}[/]  {verdicts}"
    counters = counters_text(t.counters)
    if counters:
        line += f"  [dim]{counters}[/]"
    if t.stack and frames:     # Python stack (py-spy), innermost frame first
        shown = t.stack[:frames]
        more = len(t.stack) - len(shown)
        line += "\n  [cyan]py:[/] " + "\n      ".join(f"[cyan]{escape(f)}[/]" for f in shown)
        if more and frames > 1:     # one frame: the innermost only, as a label
            line += f"\n      [dim]… {more} outer frames[/]"
    for label, style, low in (("native", "green", t.native_stack),
                              ("kernel", "magenta", t.kernel_stack)):
        if low and low_frames:      # below Python: the C frames, then the kernel's (issue 24)
            shown = low[:low_frames]
            line += f"\n  [{style}]{label}:[/] " + "\n          ".join(
                f"[{style}]{escape(f)}[/]" for f in shown)
            if len(low) > len(shown) and low_frames > 1:
                line += f"\n          [dim]… {len(low) - len(shown)} outer frames[/]"
    return Text.from_markup(line)


def add_compact_threads(node: Tree, p: ProcessReport, threads: List[ThreadReport],
                         ids: Ids, keep: frozenset, alone: frozenset) -> None:
    """Alike threads folded into one line (compact.thread_groups); the root cause's thread and
    threads in the kernel's uninterruptible sleep (D: rare, and what they wait in is the news)
    whole, the others with their innermost Python, native and kernel frames. Threads in
    ``alone`` (on the chain's proven path) are never folded."""
    keep = keep | {t.tid for t in threads if t.state == "D"}
    for group in cv.thread_groups(threads, set(keep | alone)):
        t = group[0]
        rows = t.evidence if t.tid in keep else t.evidence[:COMPACT_THREAD_EVIDENCE]
        if len(group) > 1:
            tids = number_ranges([ids.tid(p.pid, m.tid) for m in group])
            head = f"[bold]x{len(group)}[/] {escape(t.name or '?')} [dim]tids {tids}[/]"
            verdicts, odd = _group_verdicts(group, p.pid, ids)
            tn = node.add(thread_line(t, frames=1, low_frames=1, head=head,
                                       state=cv.states(group), verdicts=verdicts))
            rows = odd[:COMPACT_THREAD_EVIDENCE] if odd is not None else rows
        elif t.tid in keep:
            tn = node.add(thread_line(t, ids.tid(p.pid, t.tid)))
        else:
            tn = node.add(thread_line(t, ids.tid(p.pid, t.tid), frames=1, low_frames=1))
        for e in rows:
            tn.add(Text.from_markup(f"[dim]{escape(pid_runs(e))}[/]"))


def _group_verdicts(group: List[ThreadReport], pid: int, ids: Ids
                    ) -> Tuple[str, Optional[List[str]]]:
    """A folded group's verdicts: "" and None when its members agree (the line and evidence
    of its first); else the line's (markup: the most members' verdict and rule, "x3", the
    other verdicts) and its evidence rows in plain text, one per other verdict, naming its
    members and their evidence (STAT: the odd one is the news): "tid 17 busy-waiting
    (periodic-wakeups): 4 sleeps in 5.0 s; 5 eventfd writes"."""
    mix = cv.verdict_mix(group)
    if len(mix) == 1:
        return "", None
    (verdict, rule, most), others = mix[0], mix[1:]
    line = f"{verdict_markup(verdict)} [dim]({escape(rule)}) x{len(most)}[/], " + ", ".join(
        f"{verdict_markup(v)} [dim]x{len(members)}[/]" for v, _, members in others)
    rows = []
    for v, r, members in others:
        tids = number_ranges([ids.tid(pid, m.tid) for m in members])
        word = "tid" if len(members) == 1 else "tids"
        said = "; ".join(members[0].evidence)
        rows.append(f"{word} {tids} {v} ({r})" + (f": {said}" if said else ""))
    return line, rows
