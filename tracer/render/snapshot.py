"""Draw a Snapshot (snapshot.py) as a rich tree: process -> threads, fds, listening sockets.

Contract: reads nothing but the Snapshot object (never /proc); all text taken from processes
(comm, cmdline, paths) is escaped, since a comm like "[red]" must not become markup.

Layout: the tree's listening sockets first (or "no listening sockets in this tree"), then one
node per process. Threads doing the same thing (same comm, state, call, wchan: the idle worker
pools of PyTorch) are folded into one "x16" line; threads on CPU are always listed one by one.
fds are summarised by kind, with the interesting ones (sockets, pipes, files, ttys) listed.
"""
from __future__ import annotations

from collections import Counter
from typing import Dict, Tuple

from rich.console import Console
from .markup import escape
from rich.tree import Tree

from ..snapshot_model import STATE_NAMES, ProcessSnapshot, Snapshot, ThreadSnapshot
from .fold import fold_groups, number_ranges, shape

__all__ = ["render_snapshot"]

# fd kinds worth listing one by one; the rest (nvidia, eventfd, anon, null...) are only counted.
_LISTED_KINDS = ("tcp", "udp", "unix", "socket", "pipe", "fifo", "file", "tty")
_MAX_FDS_LISTED = 25
_MAX_CMDLINE = 160
_MAX_FRAMES = 6     # Python frames shown per thread (snapshot --stacks), innermost first
_STATE_STYLE = {"R": "bold red", "D": "bold magenta", "Z": "bold yellow", "T": "yellow",
                "t": "yellow"}


def _clean(text: str) -> str:
    """Escaped for markup, with control characters (a newline in a comm) made visible."""
    return escape(text)


def _state(letter: str) -> str:
    style = _STATE_STYLE.get(letter, "")
    text = f"{letter} {STATE_NAMES.get(letter, '?')}"
    return f"[{style}]{text}[/]" if style else text


def _thread_doing(t: ThreadSnapshot) -> str:
    if t.state in ("Z", "X"):
        return "exited"
    if t.syscall == "running" or t.state == "R":
        return "[bold red]on CPU[/]"
    if t.blocking:
        style = "bold" if t.has_timeout is False else ""
        text = escape(t.blocking)
        return f"[{style}]{text}[/]" if style else text
    if t.syscall_raw.startswith("-1"):
        return "blocked outside a syscall"
    return "[dim]syscall unreadable[/]" if not t.syscall_raw else escape(t.syscall_raw)


def _thread_line(t: ThreadSnapshot, count: int = 1, tids: str = "") -> str:
    head = f"[cyan]{t.tid}[/]" if count == 1 else f"[cyan]x{count}[/]"
    wchan = f" [dim]wchan={escape(t.wchan)}[/]" if t.wchan else ""
    cpu = f" [dim]cpu {t.utime + t.stime:.2f}s[/]" if count == 1 else ""
    tail = f" [dim]tids {tids}[/]" if tids else ""
    if t.owns_gil:
        tail += " [bold yellow]holds the GIL[/]"
    stack = "".join(f"\n    [cyan]{'py: ' if i == 0 else '    '}{_clean(f)}[/]"
                    for i, f in enumerate(t.stack[:_MAX_FRAMES]))
    for label, style, frames in (("native: ", "green", t.native_stack),
                                 ("kernel: ", "magenta", t.kernel_stack)):
        stack += "".join(f"\n    [{style}]{label if i == 0 else ' ' * len(label)}{_clean(f)}[/]"
                         for i, f in enumerate(frames[:_MAX_FRAMES]))
    return f"{head} {_clean(t.comm)} {_state(t.state)} {_thread_doing(t)}{wchan}{cpu}{tail}{stack}"


def _fold_key(t: ThreadSnapshot) -> Tuple[str, str, str, str]:
    # Addresses differ per thread (each waits on its own futex); the shape is what matters.
    # Threads with different Python stacks are different threads.
    return (t.comm, t.state, shape(t.blocking),
            t.wchan + "|".join(t.stack + t.kernel_stack + t.native_stack))


def _add_threads(node: Tree, p: ProcessSnapshot) -> None:
    on_cpu = sum(1 for t in p.threads if t.state == "R")
    tnode = node.add(f"threads ({len(p.threads)}, {on_cpu} on CPU)")
    def key(t: ThreadSnapshot) -> Tuple[str, str, str, str]:
        return _fold_key(t) if t.state != "R" and t.tid != p.pid else ("", "", "", str(t.tid))

    for members in fold_groups(p.threads, key):
        if len(members) > 1:
            tnode.add(_thread_line(members[0], len(members),
                                   number_ranges([m.tid for m in members])))
        else:
            tnode.add(_thread_line(members[0]))


def _add_fds(node: Tree, p: ProcessSnapshot) -> None:
    if not p.fds_readable:
        node.add("[yellow]fds not readable (another user's process)[/]")
        return
    kinds = Counter(f.kind or "?" for f in p.fds)
    summary = ", ".join(f"{n} {k}" for k, n in kinds.most_common())
    fnode = node.add(f"fds ({len(p.fds)}): {escape(summary)}")
    listed = [f for f in p.fds if f.kind in _LISTED_KINDS]
    for f in listed[:_MAX_FDS_LISTED]:
        mode = f" {f.mode}" if f.mode else ""
        fnode.add(f"{f.fd}{mode} [dim]{f.kind}[/] {_clean(f.target)}")
    if len(listed) > _MAX_FDS_LISTED:
        fnode.add(f"… and {len(listed) - _MAX_FDS_LISTED} more")


def _process_label(p: ProcessSnapshot) -> str:
    cmd = " ".join(p.cmdline) or f"[{p.comm}]"
    if len(cmd) > _MAX_CMDLINE:
        cmd = cmd[:_MAX_CMDLINE] + "…"
    rank = f" [magenta]{escape(p.environ_rank)}[/]" if p.environ_rank else ""
    exit_ = f" exit_code={p.exit_code}" if p.exit_code is not None else ""
    return (f"[bold]{p.pid}[/] {_clean(p.comm)} {_state(p.state)}{exit_} ppid {p.ppid}{rank}"
            f"  [dim]{_clean(cmd)}[/]")


def render_snapshot(snapshot: Snapshot, console: Console) -> None:
    """Print ``snapshot`` on ``console`` as a tree per process (children under their parent)."""
    roots = ", ".join(str(p) for p in snapshot.roots)
    top = Tree(f"[bold]snapshot[/] of {roots} on {escape(snapshot.host)}")
    listening = snapshot.listening()
    if listening:
        lnode = top.add("[bold green]listening sockets[/]")
        for pid, sock in listening:
            lnode.add(f"[green]{escape(sock)}[/] [dim](pid {pid})[/]")
    else:
        top.add("[bold yellow]no listening sockets in this tree[/]")
    nodes: Dict[int, Tree] = {}
    for p in snapshot.processes:  # parents come before children (roots, then by pid)
        parent = nodes.get(p.ppid, top)
        node = parent.add(_process_label(p))
        nodes[p.pid] = node
        if p.listening:
            node.add("[bold green]listening:[/] " + escape(", ".join(p.listening)))
        _add_threads(node, p)
        _add_fds(node, p)
    for err in snapshot.errors:
        top.add(f"[red]{escape(err)}[/]")
    console.print(top)
    from .evidence import render_evidence
    render_evidence(snapshot.evidence, console)
