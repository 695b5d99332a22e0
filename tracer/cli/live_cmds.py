"""The commands that look at running processes: ``attach``, ``watch``, ``snapshot``, ``demo`` and
``doctor`` (cli/commands.py adds them to ``hangtrace``).

Contract: as cli/commands.py's: bad input raises errors.py's classes; ``--json`` prints exactly
one JSON document (``watch`` without ``--once``: one per line); the exit status is the
verdict's. Targets are pids (positional or ``-p/--pid``, repeatable, comma lists),
``--name`` patterns and ``--cgroup``/``--container``, resolved by
record/session.resolve_targets.
"""
from __future__ import annotations

import json
import os
import sys
from typing import List, Optional, Tuple

import click

from ..errors import OutputError, TargetGone, UsageError
from .examples import epilog
from .options import FILE, DIR, FiniteFloat, PidList, all_pids, allow_quick_exit, complete_scenario, \
    show, color_option, container_options, is_terminal, pid_option, pids_text, report_console, tell

__all__ = ["attach", "watch", "snapshot", "demo", "doctor"]

BACKENDS = click.Choice(["auto", "proc", "strace", "ebpf"])
_PIDS = click.argument("pids", nargs=-1, type=PidList(), metavar="[PID]...")


NATIVE_HELP = ("Also gather native (C/C++) frames and name the CUDA, NCCL and cuBLAS calls "
               "threads are in: py-spy dump --native PAUSES each Python process briefly while "
               "it unwinds; other processes get a scan of their blocked threads' stacks "
               "(read-only, no pause).")


@click.command(epilog=epilog("attach"))
@_PIDS
@pid_option("A process whose tree to record (repeatable; PID,PID... too).")
@click.option("--name", "name", metavar="PATTERN",
              help="Also attach to processes whose title/cmdline/comm matches (substring or glob).")
@container_options("attach to")
@click.option("--duration", "-d", default=5.0, show_default=True, type=FiniteFloat(0.2),
              metavar="SECONDS", help="Seconds to record (Ctrl-C ends early).")
@click.option("--backend", "-b", default="auto", show_default=True, type=BACKENDS,
              help="How to record: eBPF, strace (ptrace), /proc sampling, or the best here.")
@click.option("--rate", default=None, type=FiniteFloat(0.5, 200), metavar="HZ",
              help="/proc samples per second [default: 10; 2 beside eBPF, which sees every "
              "call].")
@click.option("--output", "-o", type=FILE, metavar="FILE", help="Trace file (default: hangtrace-PID-TIME"
              ".htrace.gz); '-': gzip to standard output, the report to stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@click.option("--verbose", "-v", is_flag=True, help="Show helper and parked threads too.")
@click.option("--force", is_flag=True,
              help="Record pid 1 or a kernel thread too (hangtrace and its ancestors never).")
@click.option("--native", is_flag=True, help=NATIVE_HELP)
@color_option
def attach(pids: Tuple[List[int], ...], pid_lists: Tuple[List[int], ...], name: Optional[str],
           cgroup: Optional[str], container: Optional[str], duration: float, backend: str,
           rate: Optional[float], output: Optional[str], as_json: bool,
           verbose: bool, force: bool, native: bool) -> int:
    """Record the process trees under PIDS, save the trace and print the verdict."""
    from ..record.session import choose_backends, refuse_untraceable, resolve_targets
    from ..tracefile.format import default_trace_path
    roots = resolve_targets(all_pids(pids, pid_lists), name, force=force, cgroup=cgroup,
                            container=container)
    backends, why = choose_backends(backend, rate)
    refuse_untraceable(roots, backends)
    out = output or default_trace_path(roots)
    piped = out == "-"
    if piped and is_terminal(sys.stdout):
        raise UsageError("--output -: standard output is a terminal; send it to a file or a "
                         "pipe (the trace is gzip)")
    done = record_with_view(roots, backends, duration, out, as_json or piped,
                            f"attaching to {pids_text(roots)} for {duration:g} s with {why}",
                            native=native)
    tell("trace written to standard output" if piped else f"trace saved to {done.trace_path}")
    allow_quick_exit()                    # the trace is closed: no teardown after the report
    return show(done.report, as_json, verbose, err=piped)


def record_with_view(roots: List[int], backends: list, duration: float, out: str,
                     as_json: bool, announce: str,
                     native: bool = False):  # type: ignore[no-untyped-def]
    """One recording as ``attach`` makes it: end-of-recording probes, and the live view when
    the report goes to a terminal. ``announce`` is said once the targets and the output path
    were found good, just before attaching: above the live view when there is one (never
    inside it), else on stderr."""
    from ..record.probes import attach_probes
    from ..record.session import record
    probes, starts = attach_probes(native=native)
    try:
        if not as_json and is_terminal(sys.stdout):
            from ..render.colour import console_options   # not before a plain recording's first byte
            from ..render.markup import SafeConsole
            from ..render.live import LiveView
            with LiveView(SafeConsole(**console_options(True)), duration, roots) as view:
                return record(roots, backends, duration=duration, output=out,
                              on_tick=view.on_tick, end_probes=probes,
                              on_attach=lambda: view.say(f"hangtrace: {announce}"),
                              start_probes=starts, keep_priority=True)
        return record(roots, backends, duration=duration, output=out, end_probes=probes,
                      on_attach=lambda: tell(announce),
                      start_probes=starts, keep_priority=True)
    except OSError as exc:      # the trace could not be written on (disk full, ...)
        raise OutputError(f"recording failed: {exc.strerror or exc} "
                          f"({getattr(exc, 'filename', '') or out})") from None


@click.command(epilog=epilog("watch"))
@_PIDS
@pid_option("A process whose tree to watch (repeatable; PID,PID... too).")
@click.option("--name", "name", metavar="PATTERN",
              help="Also watch processes whose title/cmdline/comm matches (looked for again "
              "every 5 s: the watcher may start first).")
@container_options("watch")
@click.option("--silent-for", "silent_for", required=True, metavar="SECONDS",
              type=FiniteFloat(0.5), help="Record when the tree made no progress for this long.")
@click.option("--duration", "-d", default=10.0, show_default=True, type=FiniteFloat(0.2),
              metavar="SECONDS", help="Seconds to record at each capture.")
@click.option("--output-dir", "-o", "output_dir", default=".", show_default=True,
              metavar="DIR", shell_complete=DIR.shell_complete, help="Where the traces and reports (.txt, .json) go.")
@click.option("--once", is_flag=True, help="Exit after the first capture, with its verdict's "
              "exit status.")
@click.option("--max-captures", default=0, show_default=True, type=click.IntRange(0),
              metavar="N", help="Exit after this many captures (0: never).")
@click.option("--interval", default=1.0, show_default=True, type=FiniteFloat(0.1, 60),
              metavar="SECONDS", help="Seconds between two looks at the tree.")
@click.option("--backend", "-b", default="auto", show_default=True, type=BACKENDS,
              help="Backends of the recordings (nothing is attached while watching).")
@click.option("--json", "as_json", is_flag=True,
              help="Print each capture's report as JSON Lines (one document per line).")
@click.option("--verbose", "-v", is_flag=True, help="Say when the tree goes silent and when "
              "it makes progress again.")
@color_option
def watch(pids: Tuple[List[int], ...], pid_lists: Tuple[List[int], ...], name: Optional[str],
          cgroup: Optional[str], container: Optional[str], silent_for: float, duration: float,
          output_dir: str, once: bool, max_captures: int,
          interval: float, backend: str, as_json: bool, verbose: bool) -> int:
    """Watch the process trees under PIDS cheaply (/proc, socket and GPU counters; nothing is
    attached, nothing is stopped) and record them when they make no progress for
    --silent-for seconds: the trace and its report go into --output-dir."""
    from ..outputs import output_directory
    from ..record.session import choose_backends, refuse_own_ancestors, resolve_targets
    from ..record.watch import WatchOptions, Watcher
    from ..record.watch_looks import TreeSampler
    given = all_pids(pids, pid_lists)
    try:
        roots = resolve_targets(given, name, cgroup=cgroup, container=container)
    except TargetGone:
        if not name or given or cgroup or container:    # only --name may wait for a match
            raise
        roots = []
    choose_backends(backend)                       # fail now, not at the first capture
    output_directory(output_dir)
    refuse_own_ancestors(roots)
    opts = WatchOptions(silent_for=silent_for, duration=duration, output_dir=output_dir,
                        max_captures=1 if once else max_captures, interval=interval,
                        backend=backend, verbose=verbose)

    def print_capture(cap) -> None:  # type: ignore[no-untyped-def]
        if as_json:     # JSON Lines: one compact document per line, --once included
            click.echo(json.dumps(cap.report.to_json(), separators=(",", ":")))
        else:
            from ..render.console import render_report
            render_report(cap.report, report_console(), verbose=verbose)

    who = (f"pid {pids_text(roots)} and descendants" if roots else
           f"nothing yet: waiting for a process matching {name!r}")
    tell(f"watching {who}" + (f" (and new matches of {name!r})" if roots and name else "")
        + f"; a {duration:g} s recording after {silent_for:g} s without progress, into "
        f"{output_dir}; a look every {interval:g} s")
    sampler = TreeSampler(roots, name, cgroup=cgroup, container=container)
    return Watcher(sampler, opts, say=tell, on_capture=print_capture).run()


@click.command(epilog=epilog("snapshot"))
@_PIDS
@pid_option("A process whose tree to look at (repeatable; PID,PID... too).")
@click.option("--name", "name", metavar="PATTERN", help="Processes whose title/cmdline matches.")
@container_options("look at")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option("--stacks", is_flag=True,
              help="Also take each Python process's stacks with py-spy (never pauses it) and "
              "the kernel stacks of threads stuck in the kernel (root).")
@click.option("--native", is_flag=True, help=NATIVE_HELP)
@color_option
def snapshot(pids: Tuple[List[int], ...], pid_lists: Tuple[List[int], ...],
             name: Optional[str], cgroup: Optional[str], container: Optional[str],
             as_json: bool, stacks: bool, native: bool) -> None:
    """One instant look: threads, current syscalls, wchan, fds and listening sockets."""
    from ..render.snapshot import render_snapshot
    from ..record.session import resolve_targets
    from ..record.snapshot import take_snapshot
    roots = resolve_targets(all_pids(pids, pid_lists), name, force=True,  # reading never harms
                            cgroup=cgroup, container=container)
    snap = take_snapshot(roots, stacks=stacks or native, native=native)
    if as_json:
        click.echo(json.dumps(snap.to_json(), indent=2))
    else:
        render_snapshot(snap, report_console())


def _list_scenarios() -> None:
    """``demo --list``: each scenario, what it shows and the verdict to expect (record/demo.py's
    scenario_summaries); on a terminal each line is cut to its width, with an ellipsis."""
    import shutil
    import sys
    from ..record.demo import scenario_summaries
    from ..render.fold import cut
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else 1 << 30
    for s in scenario_summaries():
        lang = " (C)" if s.language == "C" else ""
        click.echo(cut(f"{s.name}{lang}: {s.shows}", width))
        click.echo(cut(f"    expect: {s.expected}", width))


@click.command(epilog=epilog("demo"))
@click.argument("scenario", default="sglang_like", shell_complete=complete_scenario)
@click.option("--duration", "-d", default=5.0, show_default=True, type=FiniteFloat(0.2),
              metavar="SECONDS", help="Seconds to record the scenario.")
@click.option("--backend", "-b", default="auto", show_default=True, type=BACKENDS,
              help="How to record it (as attach's --backend).")
@click.option("--output", "-o", type=FILE, metavar="FILE",
              help="Trace file (default: hangtrace-demo-SCENARIO.htrace.gz in $TMPDIR, or /tmp).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@click.option("--list", "list_them", is_flag=True, help="List the bundled scenarios, what each shows and the verdict to expect, and exit.")
@color_option
def demo(scenario: str, duration: float, backend: str, output: Optional[str], as_json: bool,
         list_them: bool) -> int:
    """Start a bundled hanging scenario (default: an SGLang-like tree that went silent),
    attach to it and print the verdict; the scenario is killed afterwards."""
    import tempfile
    from ..record.demo import RunningScenario
    from ..record.session import choose_backends
    if list_them:
        _list_scenarios()
        return 0
    if output == "-":
        raise UsageError("demo -o -: the report goes to standard output; give a file")
    backends, why = choose_backends(backend)
    sc = RunningScenario(scenario)
    try:
        from ..outputs import FreshName       # /tmp: a name others can predict
        out = output or FreshName(os.path.join(tempfile.gettempdir(),
                                               f"hangtrace-demo-{scenario}.htrace.gz"))
        done = record_with_view([sc.pid], backends, duration, out, as_json,  # type: ignore[list-item]
                                f"scenario {scenario} running as pid {sc.pid}; attaching for "
                                f"{duration:g} s with {why}")
    finally:
        sc.kill()
    tell(f"trace saved to {done.trace_path}")
    return show(done.report, as_json)


@click.command(epilog=epilog("doctor"))
@click.option("--json", "as_json", is_flag=True, help="Print the facts as one JSON document.")
@color_option
def doctor(as_json: bool) -> int:
    """What this machine allows (BPF, BTF, tracepoints, kprobes, uprobes, ptrace, strace, BCC,
    headers, the compiled helpers) and what to install where something is missing."""
    from ..record.doctor import doctor_facts, run_doctor
    if as_json:
        click.echo(json.dumps(doctor_facts(), indent=2))
        return 0
    return run_doctor(report_console())
