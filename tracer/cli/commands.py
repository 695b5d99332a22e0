"""The ``hangtrace`` command line.

Contract: every command prints one clear line on stderr and exits non-zero on bad input (a
missing pid, no permission, a tool that is not installed, a corrupt trace), never a traceback.
``--json`` prints exactly one JSON document on stdout. Exit status (README): 0 progressing or
idle, 1 error, 2 usage, 3 busy-waiting, 4 deadlocked, 5 exited, 6 blocked on the GPU,
7 unknown (not everything could be observed or judged), 130 interrupted before a recording
began. Commands raise errors.py's classes; ``_main`` is the one place that turns an error into
its line and exit status (errors.exit_code), for the console script and for tests alike.
"""
from __future__ import annotations

import json
import math
import os
import stat
import sys
from typing import List, NoReturn, Optional, Tuple

import click
from rich.console import Console

from .. import __version__
from ..errors import (EXIT_USAGE, HangtraceError, NotATrace, OutputError, TargetGone, UsageError,
                      exit_code, shown)


class FiniteFloat(click.ParamType):
    """A float in [lo, hi]; NaN and infinity are refused (click's FloatRange lets NaN by)."""
    name = "float"

    def __init__(self, lo: float, hi: float = math.inf) -> None:
        self.lo, self.hi = lo, hi

    def convert(self, value, param, ctx):  # type: ignore[no-untyped-def]
        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{shown(value)} is not a number", param, ctx)
        if not math.isfinite(x):
            self.fail(f"{shown(value)} is not a finite number", param, ctx)
        if not self.lo <= x <= self.hi:
            bound = f"between {self.lo:g} and {self.hi:g}" if math.isfinite(self.hi) else \
                f"at least {self.lo:g}"
            self.fail(f"{value} is not {bound}", param, ctx)
        return x


NATIVE_HELP = ("Also gather native (C/C++) frames and name the CUDA, NCCL and cuBLAS calls "
               "threads are in: py-spy dump --native PAUSES each Python process briefly while "
               "it unwinds; other processes get a scan of their blocked threads' stacks "
               "(read-only, no pause).")


def _emit(report, as_json: bool, verbose: bool = False, err: bool = False) -> NoReturn:
    from ..render.console import render_report
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2), err=err)
    else:
        render_report(report, Console(stderr=err), verbose=verbose)
    sys.exit(report.exit_code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hangtrace")
def main() -> None:
    """Tell whether a silent process tree is progressing, busy-waiting or deadlocked, and why.

    Exit status: 0 progressing or idle, 1 error, 2 usage, 3 busy-waiting, 4 deadlocked,
    5 exited, 6 blocked on the GPU, 7 unknown (part of the tree could not be observed or
    judged), 130 interrupted before the recording began.
    """


@main.command()
@click.argument("pids", nargs=-1, type=int)
@click.option("--name", "name", metavar="PATTERN",
              help="Also attach to processes whose title/cmdline/comm matches (substring or glob).")
@click.option("--duration", "-d", default=5.0, show_default=True, type=FiniteFloat(0.2),
              help="Seconds to record (Ctrl-C ends early).")
@click.option("--backend", "-b", default="auto", show_default=True,
              type=click.Choice(["auto", "proc", "strace", "ebpf"]))
@click.option("--rate", default=10.0, show_default=True, type=FiniteFloat(0.5, 200),
              help="/proc samples per second.")
@click.option("--output", "-o", metavar="FILE", help="Trace file (default: hangtrace-PID-TIME"
              ".htrace.gz); '-': gzip to standard output, the report to stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@click.option("--verbose", "-v", is_flag=True, help="Show helper and parked threads too.")
@click.option("--force", is_flag=True,
              help="Record pid 1 or a kernel thread too (hangtrace and its ancestors never).")
@click.option("--native", is_flag=True, help=NATIVE_HELP)
def attach(pids: Tuple[int, ...], name: Optional[str], duration: float, backend: str,
           rate: float, output: Optional[str], as_json: bool, verbose: bool,
           force: bool, native: bool) -> None:
    """Record the process trees under PIDS, save the trace and print the verdict."""
    from ..record.session import choose_backends, resolve_targets
    from ..tracefile.format import default_trace_path
    roots = resolve_targets(list(pids), name, force=force)
    backends, why = choose_backends(backend, rate)
    out = output or default_trace_path(roots)
    piped = out == "-"
    if piped and sys.stdout.isatty():
        raise UsageError("--output -: standard output is a terminal; send it to a file or a "
                         "pipe (the trace is gzip)")
    done = _record(roots, backends, duration, out, as_json or piped,
                   f"attaching to {', '.join(map(str, roots))} for {duration:g} s with {why}",
                   native=native)
    click.echo("hangtrace: trace written to standard output" if piped else
               f"hangtrace: trace saved to {done.trace_path}", err=True)
    _emit(done.report, as_json, verbose, err=piped)


def _record(roots: List[int], backends: list, duration: float, out: str, as_json: bool,
            announce: str, native: bool = False):
    """One recording as ``attach`` makes it: end-of-recording probes, and the live view when
    the report goes to a terminal. ``announce`` goes to stderr once the targets and the
    output path were found good, just before attaching."""
    from ..record.probes import attach_probes
    from ..record.session import record
    probes, starts = attach_probes(native=native)

    def on_attach() -> None:
        click.echo(f"hangtrace: {announce}", err=True)
    try:
        if not as_json and sys.stdout.isatty():
            from ..render.live import LiveView
            with LiveView(Console(), duration, roots) as view:
                return record(roots, backends, duration=duration, output=out,
                              on_tick=view.on_tick, end_probes=probes, on_attach=on_attach,
                              start_probes=starts)
        return record(roots, backends, duration=duration, output=out, end_probes=probes,
                      on_attach=on_attach, start_probes=starts)
    except OSError as exc:      # the trace could not be written on (disk full, ...)
        raise OutputError(f"recording failed: {exc.strerror or exc} "
                          f"({getattr(exc, 'filename', '') or out})") from None


@main.command()
@click.argument("pids", nargs=-1, type=int)
@click.option("--name", "name", metavar="PATTERN",
              help="Also watch processes whose title/cmdline/comm matches (looked for again "
              "every 5 s: the watcher may start first).")
@click.option("--silent-for", "silent_for", required=True, metavar="SECONDS",
              type=FiniteFloat(0.5), help="Record when the tree made no progress for this long.")
@click.option("--duration", "-d", default=10.0, show_default=True, type=FiniteFloat(0.2),
              help="Seconds to record at each capture.")
@click.option("--output-dir", "-o", "output_dir", default=".", show_default=True,
              metavar="DIR", help="Where the traces and reports (.txt, .json) go.")
@click.option("--once", is_flag=True, help="Exit after the first capture, with its verdict's "
              "exit status.")
@click.option("--max-captures", default=0, show_default=True, type=click.IntRange(0),
              help="Exit after this many captures (0: never).")
@click.option("--interval", default=1.0, show_default=True, type=FiniteFloat(0.1, 60),
              help="Seconds between two looks at the tree.")
@click.option("--backend", "-b", default="auto", show_default=True,
              type=click.Choice(["auto", "proc", "strace", "ebpf"]),
              help="Backends of the recordings (nothing is attached while watching).")
@click.option("--json", "as_json", is_flag=True,
              help="Print each capture's report as JSON (--once: one document).")
@click.option("--verbose", "-v", is_flag=True, help="Say when the tree goes silent and when "
              "it makes progress again.")
def watch(pids: Tuple[int, ...], name: Optional[str], silent_for: float, duration: float,
          output_dir: str, once: bool, max_captures: int, interval: float, backend: str,
          as_json: bool, verbose: bool) -> None:
    """Watch the process trees under PIDS cheaply (/proc, socket and GPU counters; nothing is
    attached, nothing is stopped) and record them when they make no progress for
    --silent-for seconds: the trace and its report go into --output-dir."""
    from ..record.session import choose_backends, resolve_targets
    from ..record.watch import WatchOptions, Watcher
    from ..record.watch_looks import TreeSampler
    try:
        roots = resolve_targets(list(pids), name)
    except TargetGone:
        if not name or pids:             # only "no match yet" for --name may wait for one
            raise
        roots = []
    choose_backends(backend)                       # fail now, not at the first capture
    try:
        os.makedirs(output_dir, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{output_dir}: {exc.strerror or exc}") from None
    if not os.access(output_dir, os.W_OK | os.X_OK):
        raise OutputError(f"{output_dir}: not writable")
    opts = WatchOptions(silent_for=silent_for, duration=duration, output_dir=output_dir,
                        max_captures=1 if once else max_captures, interval=interval,
                        backend=backend, verbose=verbose)

    def say(line: str) -> None:
        click.echo(f"hangtrace: {line}", err=True)

    def show(cap) -> None:  # type: ignore[no-untyped-def]
        if as_json:
            doc = cap.report.to_json()
            click.echo(json.dumps(doc, indent=2) if once else json.dumps(doc))
        else:
            from ..render.console import render_report
            render_report(cap.report, Console(), verbose=verbose)

    who = (f"pid {', '.join(map(str, roots))} and descendants" if roots else
           f"nothing yet: waiting for a process matching {name!r}")
    say(f"watching {who}" + (f" (and new matches of {name!r})" if roots and name else "")
        + f"; a {duration:g} s recording after {silent_for:g} s without progress, into "
        f"{output_dir}; a look every {interval:g} s")
    sampler = TreeSampler(roots, name)
    sys.exit(Watcher(sampler, opts, say=say, on_capture=show).run())


@main.command()
@click.argument("trace", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@click.option("--verbose", "-v", is_flag=True, help="Show helper and parked threads too.")
@click.option("--flight-recorder", "--fr", "fr", multiple=True, metavar="PATH",
              help="PyTorch Flight Recorder dumps to read with the trace (a directory, a file "
              "prefix such as /tmp/nccl_trace_rank_, or a file).")
def analyze(trace: str, as_json: bool, verbose: bool, fr: Tuple[str, ...]) -> None:
    """Analyze a saved trace (or a raw strace log, or the files of strace -ff -o PREFIX: the
    directory or PREFIX, or a directory of PyTorch Flight Recorder dumps) and print the
    verdict."""
    from ..analysis.analyzer import analyze_dumps, analyze_trace
    from ..render.progress import FileProgress
    from ..tracefile.fr_dump import find_dumps, read_dumps
    if os.path.isdir(trace) and find_dumps(trace) and not fr:
        _emit(analyze_dumps(read_dumps(trace), trace), as_json, verbose)
    dumps = [d for path in fr for d in read_dumps(path)]
    if fr and not dumps:
        raise UsageError(f"--flight-recorder {', '.join(fr)}: no dump found there")
    if _maybe_ff_set(trace):
        _emit(_analyze_strace_log(trace, None), as_json, verbose)
        return
    try:
        with FileProgress(trace, "analyzing"):
            report = analyze_trace(trace, dumps)
    except NotATrace as exc:
        report = _analyze_strace_log(trace, exc)
    _emit(report, as_json, verbose)


def _maybe_ff_set(path: str) -> bool:
    """A directory, or a name no file has (strace -ff -o PREFIX writes PREFIX.TID files):
    the importer's -ff reader decides. Another stat error (permission denied) is the reader's
    to report."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _analyze_strace_log(path: str, why: Optional[NotATrace]):
    """``analyze`` on a raw strace log: import it to a temporary trace first."""
    import tempfile
    from ..analysis.analyzer import analyze_trace
    from ..render.progress import FileProgress
    from ..strace.importer import ImportError_, import_strace
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "log.htrace")
        try:
            with FileProgress(path, "importing", passes=2):
                result = import_strace(path, out)
        except ImportError_:
            if why is None:          # not a trace either way: the importer's reason
                raise
            raise why from None
        if result.events == 0:
            raise why or ImportError_(f"{path}: no strace events in it")
        click.echo(f"hangtrace: {path} is an strace log; imported {result.events} events",
                   err=True)
        with FileProgress(out, "analyzing"):
            report = analyze_trace(out)
        report.trace_path = None
        return report


@main.command()
@click.argument("trace")
@click.option("--format", "-f", "fmt", required=True, metavar="FORMAT",
              help="Output format (see --help of the formats available: perfetto, json, dot).")
@click.option("--output", "-o", metavar="FILE", help="Write here instead of stdout.")
def export(trace: str, fmt: str, output: Optional[str]) -> None:
    """Write a saved trace in another tool's format (timelines, graphs, JSON lines)."""
    from ..render.export import FORMATS, exporter
    from ..render.progress import FileProgress
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {shown(fmt)} (available: "
                         f"{', '.join(sorted(FORMATS)) or 'none'})")
    try:
        if output:               # renamed into place once whole: a bad input leaves it as it was
            from ..outputs import replacing
            with replacing(output) as out, FileProgress(trace, "exporting"):
                exporter(fmt)(trace, out)
            click.echo(f"hangtrace: wrote {output}", err=True)
        else:
            with FileProgress(trace, "exporting"):
                exporter(fmt)(trace, sys.stdout)
    except OSError as exc:
        raise OutputError(f"{output or 'stdout'}: {exc.strerror or exc}") from None


@main.command("import-strace")
@click.argument("log", type=click.Path())
@click.option("--output", "-o", metavar="FILE", help="Trace file to write (default: LOG.htrace.gz).")
@click.option("--analyze", "then_analyze", is_flag=True, help="Print the verdict too.")
@click.option("--json", "as_json", is_flag=True, help="With --analyze: the report as JSON.")
def import_strace_cmd(log: str, output: Optional[str], then_analyze: bool, as_json: bool) -> None:
    """Convert an existing strace log (any of -f/-t/-tt/-ttt/-T/-y/-yy, plain or gzip; or the
    files of strace -ff -o PREFIX, as their directory or PREFIX) to a trace."""
    from ..render.progress import FileProgress
    from ..strace.importer import import_strace
    out = output or _default_import_path(log)
    with FileProgress(log, "importing", passes=2):
        result = import_strace(log, out)
    click.echo(f"hangtrace: imported {result.events} events from {log} into {out}"
               + (f" ({result.unparsed} lines not understood)" if result.unparsed else "")
               + (" (log was cut short)" if result.truncated else ""), err=True)
    if then_analyze:
        from ..analysis.analyzer import analyze_trace
        with FileProgress(out, "analyzing"):
            report = analyze_trace(out)
        _emit(report, as_json)


def _default_import_path(log: str) -> str:
    log = log.rstrip("/") or log               # an -ff directory: DIR.htrace.gz next to it
    base = log[:-3] if log.endswith(".gz") else log
    return base + ".htrace.gz"


@main.command()
@click.argument("pids", nargs=-1, type=int)
@click.option("--name", "name", metavar="PATTERN", help="Processes whose title/cmdline matches.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option("--stacks", is_flag=True,
              help="Also take each Python process's stacks with py-spy (never pauses it) and "
              "the kernel stacks of threads stuck in the kernel (root).")
@click.option("--native", is_flag=True, help=NATIVE_HELP)
def snapshot(pids: Tuple[int, ...], name: Optional[str], as_json: bool, stacks: bool,
             native: bool) -> None:
    """One instant look: threads, current syscalls, wchan, fds and listening sockets."""
    from ..render.snapshot import render_snapshot
    from ..record.session import resolve_targets
    from ..record.snapshot import take_snapshot
    roots = resolve_targets(list(pids), name, force=True)   # reading /proc never harms
    snap = take_snapshot(roots, stacks=stacks or native, native=native)
    if as_json:
        click.echo(json.dumps(snap.to_json(), indent=2))
    else:
        render_snapshot(snap, Console())


@main.command()
@click.argument("scenario", default="sglang_like")
@click.option("--duration", "-d", default=5.0, show_default=True, type=FiniteFloat(0.2))
@click.option("--backend", "-b", default="auto", show_default=True,
              type=click.Choice(["auto", "proc", "strace", "ebpf"]))
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
def demo(scenario: str, duration: float, backend: str, as_json: bool) -> None:
    """Start a bundled hanging scenario (default: an SGLang-like tree that went silent),
    attach to it and print the verdict; the scenario is killed afterwards."""
    import tempfile
    from ..record.demo import RunningScenario
    from ..record.session import choose_backends
    backends, why = choose_backends(backend)
    sc = RunningScenario(scenario)
    try:
        from ..outputs import FreshName       # /tmp: a name others can predict
        out = FreshName(os.path.join(tempfile.gettempdir(),
                                     f"hangtrace-demo-{scenario}.htrace.gz"))
        done = _record([sc.pid], backends, duration, out, as_json,
                       f"scenario {scenario} running as pid {sc.pid}; attaching for "
                       f"{duration:g} s with {why}")
    finally:
        sc.kill()
    _emit(done.report, as_json)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the facts as one JSON document.")
def doctor(as_json: bool) -> None:
    """What this machine allows (BPF, BTF, tracepoints, kprobes, uprobes, ptrace, strace, BCC,
    headers) and what to install where something is missing."""
    from ..record.doctor import doctor_facts, run_doctor
    if as_json:
        click.echo(json.dumps(doctor_facts(), indent=2))
        sys.exit(0)
    sys.exit(run_doctor(Console()))


def _main(argv: Optional[List[str]]) -> int:
    """Run one command; every way it can end becomes an exit status here (module doc)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        # make_context + invoke rather than main.main(): click's main turns Ctrl-C into an
        # Abort after printing a blank line, and prints four-line usage errors.
        with main.make_context("hangtrace", args) as ctx:
            main.invoke(ctx)
    except click.exceptions.Exit as exc:           # --help, --version
        return exc.exit_code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except HangtraceError as exc:
        click.echo(f"hangtrace: {exc}", err=True)
        return exit_code(exc)
    except click.UsageError as exc:    # bad options or arguments: one line, not click's four
        click.echo(f"hangtrace: {exc.format_message()}", err=True)
        return EXIT_USAGE
    except click.ClickException as exc:
        click.echo(f"hangtrace: {exc.format_message()}", err=True)
        return exc.exit_code
    except (click.Abort, KeyboardInterrupt) as exc:   # Ctrl-C before a recording began
        click.echo("hangtrace: interrupted", err=True)
        return exit_code(KeyboardInterrupt() if isinstance(exc, click.Abort) else exc)
    return 0


def run(argv: Optional[List[str]] = None) -> int:
    """Entry for tests: run the CLI in-process and return its exit code."""
    return _main(argv)


def entry() -> None:
    """Console-script entry: no traceback ever reaches the user."""
    try:
        code = _main(None)
    except Exception as exc:  # the last line of defence: one line, exit 1
        click.echo(f"hangtrace: internal error: {type(exc).__name__}: {exc}", err=True)
        code = 1
    sys.exit(code)


from .nodes import cluster, merge  # noqa: E402  (the commands for several nodes)

main.add_command(merge)
main.add_command(cluster)
