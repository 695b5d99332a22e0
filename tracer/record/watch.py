"""``hangtrace watch``: watch a tree cheaply, and record it when it goes silent.

Contract:
- ``Watcher(sampler, options, say=...)``; ``run()`` returns the exit status. Every
  ``options.interval`` seconds it takes a look (watch_looks.py; nothing is attached to the
  tree, which is never stopped) and asks analysis.watch_rules whether the tree made progress
  (``Watcher._loop``). After ``options.silent_for`` seconds of no progress and no moving code
  or GPU work, it records the tree as ``attach`` does and writes the trace, the report and
  its JSON (``Watcher._capture``); one capture per silence, then it goes on watching.
- When it ends, and with which exit status: ``Watcher.run``.
- ``on_capture(capture)`` is called after each capture (the CLI prints the report there);
  ``recorder(roots, trace_path) -> session.Recorded`` replaces the recording (tests).
"""
from __future__ import annotations

import collections
import contextlib
import functools
import json
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Deque, List, Optional, Tuple

from ..analysis.watch_rules import (Signal, TreeLook, driver_signals, progress_signals,
                                    stack_signals)
from ..errors import OutputError
from ..outputs import FreshName, create_fresh
from ..report import Report
from .watch_looks import TreeSampler

if TYPE_CHECKING:  # pragma: no cover
    from ..events.evidence import CudaDriverCalls
    from ..events.stacks import StackSamples
    from .session import Recorded

__all__ = ["WatchOptions", "Capture", "Watcher", "clock_text", "EXIT_EXITED"]

EXIT_EXITED = 5
PROGRESS_WINDOW = 1.0       # seconds: progress is judged over at least this long


@dataclass
class WatchOptions:
    silent_for: float
    duration: float = 10.0
    output_dir: str = "."
    max_captures: int = 0           # 0: no limit
    interval: float = 1.0           # seconds between looks
    backend: str = "auto"
    rate: Optional[float] = None    # /proc samples a second while recording (None: default)
    verbose: bool = False


@dataclass
class Capture:
    report: Report
    trace_path: str
    text_path: str
    json_path: str
    reason: str
    errors: List[str] = field(default_factory=list)


def clock_text(ts: float, other: Optional[float] = None) -> str:
    """Local wall-clock time "03:12:07", with the date when ``other`` falls on another day."""
    lt = time.localtime(ts)
    if other is not None and time.localtime(other)[:3] != lt[:3]:
        return time.strftime("%Y-%m-%d %H:%M:%S", lt)
    return time.strftime("%H:%M:%S", lt)


def silence_summary(silent_since: float, recorded_from: float, progress_seen: bool) -> str:
    since = clock_text(silent_since, recorded_from)
    start = clock_text(recorded_from, silent_since)
    if progress_seen:
        return f"the tree went silent at {since}; recorded from {start}"
    return f"the tree showed no progress since watching began at {since}; recorded from {start}"


class Watcher:
    """The watch loop (module doc)."""

    def __init__(self, sampler: TreeSampler, options: WatchOptions, *,
                 say: Callable[[str], None] = lambda line: None,
                 on_capture: Optional[Callable[[Capture], None]] = None,
                 recorder: Optional[Callable[[List[int], str], "Recorded"]] = None,
                 stack_sampler: Optional[Callable[[List[int]], List["StackSamples"]]] = None,
                 driver_sampler: Optional[Callable[[List[int]], Tuple[
                     List["CudaDriverCalls"], str]]] = None) -> None:
        self.sampler = sampler
        self.recorder = recorder          # (roots, trace path) -> Recorded; tests replace it
        self.stack_sampler = stack_sampler  # pids -> StackSamples; tests replace it
        self.driver_sampler = driver_sampler  # pids -> (CudaDriverCalls, why); tests replace it
        self.opts = options
        self.say = say
        self.on_capture = on_capture
        self.captures: List[Capture] = []
        self.failed = 0
        self._stop = threading.Event()
        self._notes_said = 0
        self._history: Deque[TreeLook] = collections.deque()

    def stop(self) -> None:
        self._stop.set()

    # ------------------------------------------------------------------ the loop
    def run(self) -> int:
        """Watch until the end; the exit status. It ends after ``options.max_captures`` captures
        (0: never), returning the last verdict's exit status (``--once`` is one capture); with 0 on
        SIGTERM, SIGHUP or Ctrl-C (a recording in progress is ended early, saved and reported
        first); with 5 (exited, ``EXIT_EXITED``) when every watched process is gone and no
        ``--name`` pattern could bring new ones; with 1 when a recording failed, or its report
        could not be written (a full disk), and no capture is left to make."""
        # SIGTERM and SIGHUP (a terminal closed) stop it as Ctrl-C does; a recording in
        # progress has its own handlers (stopflag.StopFlag) and is saved first
        old = {sig: signal.signal(sig, lambda s, f: self._stop.set())
               for sig in (signal.SIGTERM, signal.SIGHUP)} \
            if threading.current_thread() is threading.main_thread() else {}
        try:
            return self._loop()
        except KeyboardInterrupt:
            self.say("watch stopped")
            return 0
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
            self.sampler.close()

    def _look(self) -> TreeLook:
        look = self.sampler.look()
        for note in self.sampler.notes[self._notes_said:]:
            self.say(note)
        self._notes_said = len(self.sampler.notes)
        return look

    def _since(self, cur: TreeLook) -> TreeLook:
        """The latest earlier look at least PROGRESS_WINDOW old (else the oldest kept)."""
        while len(self._history) > 1 and cur.ts - self._history[1].ts >= PROGRESS_WINDOW:
            self._history.popleft()
        return self._history[0]

    def _loop(self) -> int:
        """The looks. Each asks ``analysis.watch_rules.progress_signals`` whether the tree made
        progress since the look ``PROGRESS_WINDOW`` seconds before (the previous one at the default
        interval; rates such as keep-alive chatter need a second at least). The silence begins at
        the last look that showed progress (at the first look when none ever did). When the tree
        has shown no progress for ``options.silent_for`` seconds, it first takes a few Python
        stacks of the threads on a CPU (``stack_sampler``, default the stack-motion probe: about a
        second of py-spy, never stopping the target): when their code moves, the silence starts
        again from now (work that writes nothing: a capture, a compile), as GPU work that completes
        does (``driver_motion``). Else it captures."""
        opts = self.opts
        prev = self._look()
        self._history = collections.deque([prev])
        silent_since, last = prev.ts, []  # type: float, List[Signal]
        armed, quiet_said = True, False
        next_look = time.monotonic()
        while True:
            next_look += opts.interval
            if self._stop.wait(max(0.0, next_look - time.monotonic())):
                self.say("watch stopped")
                return 0
            next_look = max(next_look, time.monotonic() - opts.interval)  # no bursts after a lag
            cur = self._look()
            if not cur.processes:
                if not self.sampler.name:
                    self.say("every watched process is gone")
                    return EXIT_EXITED
                self._history = collections.deque([cur])      # waiting for --name
                silent_since, last, armed = cur.ts, [], True
                continue
            signals = progress_signals(self._since(cur), cur)
            self._history.append(cur)
            if signals:
                if opts.verbose and quiet_said:
                    self.say(f"progress again after {cur.ts - silent_since:.0f} s: "
                             f"{signals[0].text}")
                silent_since, last, armed, quiet_said = cur.ts, signals, True, False
                continue
            if opts.verbose and not quiet_said and last:
                quiet_said = True
                self.say(f"silent since {clock_text(silent_since)} (last progress: "
                         f"{last[0].text})")
            if not armed or cur.ts - silent_since < opts.silent_for:
                continue
            moving = self.stack_motion(sorted(cur.processes)) \
                or self.driver_motion(sorted(cur.processes))
            if self._stop.is_set():         # a signal during the looks: no capture begins
                self.say("watch stopped")
                return 0
            if moving:          # silent, but its code moves or its GPU work completes
                if opts.verbose:
                    self.say(f"silent, but not stuck: {moving[0].text}")
                silent_since, last, quiet_said = cur.ts, moving, False
                continue
            armed = False
            done = self._capture(cur, silent_since, last)
            if done is not None and done.reason == "interrupted":
                self.say("watch stopped")
                return 0
            if opts.max_captures and len(self.captures) + self.failed >= opts.max_captures:
                return self.captures[-1].report.exit_code if self.captures else 1
            self._history = collections.deque([self._look()])   # a fresh baseline

    def stack_motion(self, pids: List[int]) -> List[Signal]:
        """Threads on a CPU whose Python code moves (analysis.watch_rules.stack_signals), from a
        few py-spy samples taken now; none without py-spy or a thread on a CPU."""
        if self.stack_sampler is None:
            from .probes.stack_motion import stack_motion_probe
            self.stack_sampler = stack_motion_probe
        try:
            return stack_signals(self.stack_sampler(pids))
        except Exception as exc:          # a probe failing must not stop the watch
            self.say(f"stack samples failed: {exc}")
            return []

    def driver_motion(self, pids: List[int]) -> List[Signal]:
        """Threads whose GPU work completes (analysis.watch_rules.driver_signals), from libcuda's
        uprobes counting for a moment; none where no process maps libcuda or they cannot load."""
        if self.driver_sampler is None:
            from .probes.driver_motion import driver_motion_probe
            self.driver_sampler = functools.partial(driver_motion_probe, stop=self._stop)
        try:
            calls, _why = self.driver_sampler(pids)
            return driver_signals(calls)
        except Exception as exc:          # a probe failing must not stop the watch
            self.say(f"driver calls not counted: {exc}")
            return []

    # ------------------------------------------------------------------ a capture
    def _record(self, roots: List[int], output: str) -> "Recorded":
        """A recording as ``attach`` makes it: best backends, end-of-recording probes."""
        from .probes import attach_probes
        from .session import choose_backends, record
        backends, why = choose_backends(self.opts.backend, self.opts.rate)
        self.say(f"recording with {why}")
        ends, starts = attach_probes()
        return record(roots, backends, duration=self.opts.duration, output=output,
                      end_probes=ends, start_probes=starts)

    def _capture(self, look: TreeLook, silent_since: float,
                 last: List[Signal]) -> Optional[Capture]:
        """A recording as ``attach`` makes it (``session.record`` with the best backends, the
        end-of-recording probes, for ``options.duration``), written as
        DIR/hangtrace-PIDS-TIME.htrace.gz (the trace), .txt (the report as ``attach`` prints it)
        and .json (``hangtrace.report/1`` with ``watch`` set: when the silence began, when the
        recording began). One capture per silence: the next one waits until the tree has made
        progress again and gone silent again. A report that cannot be written whole (a full
        disk) leaves no cut .json or .txt: both are removed, one line says so and the capture
        counts as failed; the trace, written whole before them, is kept."""
        from ..render.console import render_report, report_console
        from .session import SessionError
        opts = self.opts
        roots = self.sampler.tree_roots(look)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        base = os.path.join(opts.output_dir,
                            f"hangtrace-{'-'.join(map(str, roots[:3])) or 'tree'}-{stamp}")
        self.say(f"no progress since {clock_text(silent_since)} "
                 f"({time.time() - silent_since:.0f} s): recording pid "
                 f"{', '.join(map(str, roots))} for {opts.duration:g} s")
        try:
            os.makedirs(opts.output_dir, exist_ok=True)
            # names others can predict: created fresh (NAME-2... when taken), never replaced
            done = (self.recorder or self._record)(roots, FreshName(base + ".htrace.gz"))
        except (SessionError, OSError) as exc:
            self.failed += 1
            text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self.say(f"recording failed: {text}; watching on")
            return None
        report = done.report
        report.watch = {
            "silent_since": silent_since, "recorded_from": report.window["start"],
            "silent_for": opts.silent_for, "last_progress": [s.text for s in last[:5]],
            "summary": silence_summary(silent_since, report.window["start"], bool(last))}
        base = _trace_base(done.trace_path) or base
        cap = Capture(report, done.trace_path, base + ".txt", base + ".json", done.reason,
                      done.errors)
        written: List[str] = []
        try:
            with create_fresh(cap.json_path, text=True) as f:
                cap.json_path = f.name
                written.append(f.name)
                json.dump(report.to_json(), f, indent=2)
                f.write("\n")
            with create_fresh(cap.text_path, text=True) as f:
                cap.text_path = f.name
                written.append(f.name)
                render_report(report, report_console(file=f))
        except (OutputError, OSError) as exc:      # a full disk: no cut report is left
            for path in written:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            self.failed += 1
            self.say(f"capture failed: cannot write its report: "
                     f"{exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}; "
                     f"the trace is kept ({done.trace_path}); watching on")
            return None
        self.captures.append(cap)
        self.say(f"capture {len(self.captures)}: {report.verdict} ({report.rule}); "
                 f"{cap.trace_path}, {os.path.basename(cap.text_path)}, "
                 f"{os.path.basename(cap.json_path)}")
        if self.on_capture is not None:
            self.on_capture(cap)
        return cap


def _trace_base(trace_path: str) -> str:
    """``DIR/NAME`` of ``DIR/NAME.htrace.gz`` (the name the trace got), "" for another name."""
    suffix = ".htrace.gz"
    return trace_path[:-len(suffix)] if trace_path.endswith(suffix) else ""
