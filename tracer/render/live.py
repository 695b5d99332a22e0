"""The live view of ``hangtrace attach`` in a terminal: a top-like table redrawn while recording.

Contract:
- ``LiveView(console, duration, roots)`` is a context manager around a rich ``Live`` display;
  its ``on_tick(elapsed_s, analyzer)`` is session.record's on_tick (recording thread, about 4
  times a second). What it shows comes from ``analyzer.report()`` (never /proc, the trace or the
  analyzer's internals), a target's strings through markup.py's ``visible``/``escape`` (issue
  46). What it shows, in 80 columns: ``LiveView``.
- Cost: redrawn at most every ``refresh_s``, ``report()`` throttled to about a tenth of the
  recording thread (``LiveView.on_tick``); ``stats`` says what it cost.
- Ctrl-C is not handled here: the KeyboardInterrupt raised in the recording thread ends the
  recording (session.py) and the caller prints the final report after the view is closed.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from ..analysis.accumulate.stats import syscall_backends
from ..report import ProcessReport, Report
from .markup import escape, visible
from .fold import cut
from .thread_lines import verdict_markup

__all__ = ["LiveView", "LiveStats", "RATE_KEYS"]

# Counters turned into per-second rates between two refreshes, and their column titles.
RATE_KEYS: Tuple[Tuple[str, str], ...] = (
    ("syscalls", "sys/s"), ("eventfd_writes", "efd/s"), ("futex_waits", "ftx/s"),
    ("gpu_ioctls", "gpu/s"), ("output_bytes", "outB/s"))
LEGEND = ("efd: eventfd writes, ftx: futex waits, gpu: GPU ioctls, outB: bytes of output, "
          "quiet: since the last output; Ctrl-C ends the recording early")

RATE_WINDOW_S = 2.0     # rates are over about the last 2 s


@dataclass
class LiveStats:
    """What the view cost: report() and draw times, in seconds (for tests and --verbose)."""
    reports: int = 0
    report_s: float = 0.0
    max_report_s: float = 0.0
    draws: int = 0
    draw_s: float = 0.0


Key = Tuple[int, int]     # (pid, tid)


class LiveView:
    """Shown: the provisional tree verdict and root cause, a progress bar of the recording window,
    and the process tree with each process's and each deciding thread's state and verdict, the
    rates over about the last 2 s (syscalls/s, eventfd writes/s, futex waits/s, GPU ioctls/s, bytes
    written/s), CPU% over the window, and the time since it last wrote output. It fits 80 columns
    with every column title whole (short titles, explained in the view's last line; the name column
    takes what is left and is cut with an ellipsis). Rows: at most ``max_threads`` threads per
    process are listed (those that decide its verdict first); the others (library helpers, parked
    pool threads) are folded into one row."""
    def __init__(self, console: Console, duration: float, roots: Sequence[int], *,
                 refresh_s: float = 0.5, max_threads: int = 8) -> None:
        self.console = console
        self.duration = duration
        self.roots = list(roots)
        self.refresh_s = refresh_s
        self.max_threads = max_threads
        self.stats = LiveStats()
        self._live = Live(console=console, auto_refresh=False, transient=True,
                          redirect_stdout=True, redirect_stderr=True)
        self._report: Optional[Report] = None
        self._rates: Dict[Key, Dict[str, float]] = {}
        self._hist: Deque[Tuple[float, Dict[Key, Dict[str, float]]]] = deque(maxlen=8)
        self._last_output: Dict[Key, float] = {}
        self._has_syscalls = False
        self._next_report = 0.0
        self._next_draw = 0.0
        self._elapsed = 0.0

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "LiveView":
        self._live.start()
        self._live.update(self._render(), refresh=True)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._live.stop()

    def say(self, line: str) -> None:
        """A line for the user while the view is up: printed above it, never inside it."""
        self._live.console.print(Text(visible(line)), soft_wrap=True)

    # ------------------------------------------------------------------ ticking
    def on_tick(self, elapsed: float, analyzer: Any) -> None:
        """session.record's on_tick: refresh the report (throttled) and redraw (throttled).
        The display is redrawn at most every ``refresh_s`` (0.5 s); ``report()`` runs at most every
        max(refresh_s, 10 x its last cost), so that the view takes at most about a tenth of the
        recording thread even when a report is slow (many threads)."""
        now = time.monotonic()
        self._elapsed = elapsed
        if now < self._next_draw:
            return
        if now >= self._next_report:
            t0 = time.perf_counter()
            self._take_report(analyzer)
            cost = time.perf_counter() - t0
            self.stats.reports += 1
            self.stats.report_s += cost
            self.stats.max_report_s = max(self.stats.max_report_s, cost)
            self._next_report = now + max(self.refresh_s, 10 * cost)
        t0 = time.perf_counter()
        self._live.update(self._render(), refresh=True)
        self.stats.draws += 1
        self.stats.draw_s += time.perf_counter() - t0
        self._next_draw = now + self.refresh_s

    def _take_report(self, analyzer: Any) -> None:
        wall = time.time()
        report: Report = analyzer.report(end=wall)
        self._has_syscalls = syscall_backends(report.backends)
        counts: Dict[Key, Dict[str, float]] = {}
        for p in report.processes:
            for t in p.threads:
                counts[(p.pid, t.tid)] = {k: float(t.counters.get(k, 0.0)) for k, _ in RATE_KEYS}
        # Rates over the last RATE_WINDOW_S (a loop that wakes once a second must not read 0
        # in every other refresh); before that, over the window so far.
        base = next((h for h in self._hist if wall - h[0] <= RATE_WINDOW_S + 0.1), None)
        span = max(report.window["duration"], 0.05)
        self._rates = {}
        for key, now_c in counts.items():
            before = base[1].get(key) if base is not None else None
            if before is not None and wall - base[0] > 0.05:   # type: ignore[index]
                dt = wall - base[0]                              # type: ignore[index]
                self._rates[key] = {k: max(0.0, (v - before[k]) / dt) for k, v in now_c.items()}
            else:
                self._rates[key] = {k: v / span for k, v in now_c.items()}
        self._hist.append((wall, counts))
        for p in report.processes:
            for t in p.threads:
                if t.last_output_ts:
                    self._last_output[(p.pid, t.tid)] = t.last_output_ts
        self._report = report

    # ------------------------------------------------------------------ drawing
    def _render(self) -> RenderableType:
        head = Table.grid(padding=(0, 1))
        head.add_column()
        head.add_column()
        head.add_column()
        done = min(self._elapsed, self.duration)
        bar = max(10, min(40, self.console.width - 44))
        head.add_row(Text("hangtrace live", style="bold"),
                     ProgressBar(total=self.duration, completed=done, width=bar),
                     Text(f"{done:4.1f}/{self.duration:g} s  "
                          f"pids {', '.join(map(str, self.roots))}", no_wrap=True,
                          overflow="ellipsis"))
        parts: List[RenderableType] = [head]
        r = self._report
        if r is None:
            parts.append(Text("waiting for the first events…", style="dim"))
        else:
            line = Text.from_markup(f"[bold]provisional verdict:[/] {verdict_markup(r.verdict)} "
                                    f"[dim]({escape(r.rule)})[/]")
            parts.append(line)
            if r.root_cause.get("summary"):
                parts.append(Text(f"root cause: {visible(r.root_cause['summary'])}", style="italic",
                                  overflow="ellipsis", no_wrap=True))
            parts.append(self._table(r))
        parts.append(Text(LEGEND, style="dim"))
        return Group(*parts)

    def _table(self, r: Report) -> Table:
        now = time.time()
        by_pid = {p.pid: p for p in r.processes}
        order: List[Tuple[int, ProcessReport]] = []

        def walk(p: ProcessReport, depth: int) -> None:
            order.append((depth, p))
            for c in r.processes:
                if c.ppid == p.pid and c.pid != p.pid:
                    walk(c, depth + 1)

        for p in r.processes:
            if p.ppid not in by_pid:
                walk(p, 0)
        ids = max((2 * d + 2 + len(str(max([p.pid] + [th.tid for th in p.threads]))))
                  for d, p in order) if order else 7
        t = Table(box=None, pad_edge=False, header_style="bold dim", expand=False,
                  padding=(0, 1, 0, 0))
        t.add_column("pid/tid", no_wrap=True, min_width=max(7, ids))
        t.add_column("name", max_width=34, min_width=6, overflow="ellipsis")   # the one that gives
        t.add_column("st", no_wrap=True, min_width=2)
        t.add_column("verdict", no_wrap=True, min_width=12)
        for _, title in RATE_KEYS + (("", "cpu%"), ("", "quiet")):
            t.add_column(title, justify="right", no_wrap=True, min_width=max(len(title), 5))
        for depth, p in order:
            self._process_rows(t, p, depth, now)
        return t

    def _process_rows(self, table: Table, p: ProcessReport, depth: int, now: float) -> None:
        keys = [(p.pid, th.tid) for th in p.threads]
        rates = _sum_rates(self._rates.get(k) for k in keys)
        cpu = sum(th.counters.get("cpu_pct", 0.0) for th in p.threads)
        has_cpu = any("cpu_pct" in th.counters for th in p.threads)
        last = max((self._last_output.get(k, 0.0) for k in keys), default=0.0)
        indent = "  " * depth
        label = p.role if p.role != "other" else (cut(" ".join(p.cmdline), 40) or p.comm)
        table.add_row(Text(f"{indent}{p.pid}", style="bold"), _name(label, "bold"),
                      Text(f"{len(p.threads)}t", style="dim"),
                      Text.from_markup(verdict_markup(p.verdict)),
                      *self._rate_cells(rates), _cpu(cpu if has_cpu else None),
                      self._ago(last, now))
        deciding = [th for th in p.threads if not (th.helper or th.parked)]
        others = [th for th in p.threads if th.helper or th.parked]
        shown = (deciding + others)[:self.max_threads]
        for th in shown:
            key = (p.pid, th.tid)
            table.add_row(Text(f"{indent}  {th.tid}"), _name(th.name or "?"),
                          Text(visible(th.state)),
                          Text.from_markup(verdict_markup(th.verdict,
                                                          dim=bool(th.helper or th.parked))),
                          *self._rate_cells(self._rates.get(key)),
                          _cpu(th.counters.get("cpu_pct")),
                          self._ago(self._last_output.get(key, 0.0), now))
        hidden = len(p.threads) - len(shown)
        if hidden > 0:
            table.add_row(Text(f"{indent}  +{hidden}", style="dim"),
                          _name("more threads (helpers / parked)", "dim"))

    def _rate_cells(self, rates: Optional[Dict[str, float]]) -> List[Text]:
        if not self._has_syscalls or rates is None:
            return [Text("–", style="dim") for _ in RATE_KEYS]
        return [Text(_num(rates.get(k, 0.0)), style="" if rates.get(k) else "dim")
                for k, _ in RATE_KEYS]

    def _ago(self, ts: float, now: float) -> Text:
        if not self._has_syscalls:
            return Text("–", style="dim")
        if not ts:
            return Text("never", style="dim")
        ago = max(0.0, now - ts)
        return Text(f"{ago:.1f}s" if ago < 100 else f"{ago:.0f}s")


def _name(text: str, style: str = "") -> Text:
    """A name the target controls (argv, comm, a thread's name), made visible (markup.py)."""
    return Text(visible(text), style=style, no_wrap=True, overflow="ellipsis")


def _sum_rates(items: Any) -> Optional[Dict[str, float]]:
    out: Optional[Dict[str, float]] = None
    for r in items:
        if r is None:
            continue
        out = out or {k: 0.0 for k, _ in RATE_KEYS}
        for k in out:
            out[k] += r.get(k, 0.0)
    return out


def _num(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.1f}M"
    if x >= 1e4:
        return f"{x / 1e3:.0f}k"
    if x >= 10 or x == 0:
        return f"{x:.0f}"
    return f"{x:.1f}"


def _cpu(v: Optional[float]) -> Text:
    return Text("–", style="dim") if v is None else Text(f"{v:.0f}")
