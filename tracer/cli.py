"""The ``hangtrace`` command line.

Contract: every command prints one clear line on stderr and exits non-zero on bad input (a
missing pid, no permission, a tool that is not installed, a corrupt trace), never a traceback.
``--json`` prints exactly one JSON document on stdout. Exit status (README): 0 progressing or
idle, 1 error, 2 usage, 3 busy-waiting, 4 deadlocked, 5 exited, 6 blocked on the GPU.
"""
from __future__ import annotations

import json
import os
import sys
from typing import List, NoReturn, Optional, Tuple

import click
from rich.console import Console

from . import __version__


def _fail(msg: str, code: int = 1) -> NoReturn:
    click.echo(f"hangtrace: {msg}", err=True)
    sys.exit(code)


def _emit(report, as_json: bool, verbose: bool = False) -> NoReturn:
    from .render.console import render_report
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        render_report(report, Console(), verbose=verbose)
    sys.exit(report.exit_code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hangtrace")
def main() -> None:
    """Tell whether a silent process tree is progressing, busy-waiting or deadlocked, and why.

    Exit status: 0 progressing or idle, 1 error, 2 usage, 3 busy-waiting, 4 deadlocked,
    5 exited, 6 blocked on the GPU.
    """


@main.command()
@click.argument("pids", nargs=-1, type=int)
@click.option("--name", "name", metavar="PATTERN",
              help="Also attach to processes whose title/cmdline/comm matches (substring or glob).")
@click.option("--duration", "-d", default=5.0, show_default=True, type=click.FloatRange(0.2),
              help="Seconds to record (Ctrl-C ends early).")
@click.option("--backend", "-b", default="auto", show_default=True,
              type=click.Choice(["auto", "proc", "strace", "ebpf"]))
@click.option("--rate", default=10.0, show_default=True, type=click.FloatRange(0.5, 200),
              help="/proc samples per second.")
@click.option("--output", "-o", metavar="FILE", help="Trace file (default: hangtrace-PID-TIME.htrace.gz).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@click.option("--verbose", "-v", is_flag=True, help="Show helper and parked threads too.")
def attach(pids: Tuple[int, ...], name: Optional[str], duration: float, backend: str,
           rate: float, output: Optional[str], as_json: bool, verbose: bool) -> None:
    """Record the process trees under PIDS, save the trace and print the verdict."""
    from .record.session import SessionError, choose_backends, resolve_targets
    from .tracefile.format import default_trace_path
    try:
        roots = resolve_targets(list(pids), name)
        backends, why = choose_backends(backend, rate)
    except SessionError as exc:
        _fail(str(exc), 2 if "give at least one" in str(exc) else 1)
    out = output or default_trace_path(roots)
    click.echo(f"hangtrace: attaching to {', '.join(map(str, roots))} for {duration:g} s "
               f"with {why}", err=True)
    done = _record(roots, backends, duration, out, as_json)
    click.echo(f"hangtrace: trace saved to {done.trace_path}", err=True)
    _emit(done.report, as_json, verbose)


def _record(roots: List[int], backends: list, duration: float, out: str, as_json: bool):
    """One recording as ``attach`` makes it: end-of-recording probes, and the live view when
    the report goes to a terminal."""
    from .record.probes import DEFAULT_PROBES   # futex owners, unix socket peers (wait graph)
    from .record.pystacks import py_stacks_probe
    from .record.session import record
    probes = list(DEFAULT_PROBES) + [py_stacks_probe]   # before py-spy, which stops threads
    try:
        if not as_json and sys.stdout.isatty():
            from .render.live import LiveView
            with LiveView(Console(), duration, roots) as view:
                return record(roots, backends, duration=duration, output=out,
                              on_tick=view.on_tick, end_probes=probes)
        return record(roots, backends, duration=duration, output=out, end_probes=probes)
    except OSError as exc:
        _fail(f"recording failed: {exc.strerror or exc} ({getattr(exc, 'filename', '') or ''})")


@main.command()
@click.argument("trace", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@click.option("--verbose", "-v", is_flag=True, help="Show helper and parked threads too.")
def analyze(trace: str, as_json: bool, verbose: bool) -> None:
    """Analyze a saved trace (or a raw strace log, or the files of strace -ff -o PREFIX: the
    directory or PREFIX) and print the verdict."""
    from .analysis.analyzer import analyze_trace
    from .tracefile.format import TraceError
    if os.path.isdir(trace) or not os.path.exists(trace):   # an strace -ff set, or nothing
        _emit(_analyze_strace_log(trace, None), as_json, verbose)
        return
    try:
        report = analyze_trace(trace)
    except TraceError as exc:
        if "not a hangtrace trace" not in str(exc):
            _fail(str(exc))
        report = _analyze_strace_log(trace, str(exc))
    _emit(report, as_json, verbose)


def _analyze_strace_log(path: str, why: Optional[str]):
    """``analyze`` on a raw strace log: import it to a temporary trace first."""
    import tempfile
    from .analysis.analyzer import analyze_trace
    from .tracefile.strace_import import ImportError_, import_strace
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "log.htrace")
        try:
            result = import_strace(path, out)
        except ImportError_ as exc:
            _fail(why or str(exc))
        if result.events == 0:
            _fail(why or f"{path}: no strace events in it")
        click.echo(f"hangtrace: {path} is an strace log; imported {result.events} events",
                   err=True)
        report = analyze_trace(out)
        report.trace_path = None
        return report


@main.command()
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option("--format", "-f", "fmt", required=True, metavar="FORMAT",
              help="Output format (see --help of the formats available: perfetto, json, dot).")
@click.option("--output", "-o", metavar="FILE", help="Write here instead of stdout.")
def export(trace: str, fmt: str, output: Optional[str]) -> None:
    """Write a saved trace in another tool's format (timelines, graphs, JSON lines)."""
    from .render.export import FORMATS, exporter
    from .tracefile.format import TraceError
    if fmt not in FORMATS:
        _fail(f"unknown format {fmt!r} (available: {', '.join(sorted(FORMATS)) or 'none'})", 2)
    try:
        if output:
            with open(output, "w") as out:
                exporter(fmt)(trace, out)
            click.echo(f"hangtrace: wrote {output}", err=True)
        else:
            exporter(fmt)(trace, sys.stdout)
    except TraceError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"{output or 'stdout'}: {exc.strerror or exc}")


@main.command("import-strace")
@click.argument("log", type=click.Path())
@click.option("--output", "-o", metavar="FILE", help="Trace file to write (default: LOG.htrace.gz).")
@click.option("--analyze", "then_analyze", is_flag=True, help="Print the verdict too.")
@click.option("--json", "as_json", is_flag=True, help="With --analyze: the report as JSON.")
def import_strace_cmd(log: str, output: Optional[str], then_analyze: bool, as_json: bool) -> None:
    """Convert an existing strace log (any of -f/-t/-tt/-ttt/-T/-y/-yy, plain or gzip; or the
    files of strace -ff -o PREFIX, as their directory or PREFIX) to a trace."""
    from .tracefile.strace_import import ImportError_ as ImportFailed, import_strace
    out = output or _default_import_path(log)
    try:
        result = import_strace(log, out)
    except ImportFailed as exc:
        _fail(str(exc))
    click.echo(f"hangtrace: imported {result.events} events from {log} into {out}"
               + (f" ({result.unparsed} lines not understood)" if result.unparsed else "")
               + (" (log was cut short)" if result.truncated else ""), err=True)
    if then_analyze:
        from .analysis.analyzer import analyze_trace
        _emit(analyze_trace(out), as_json)


def _default_import_path(log: str) -> str:
    log = log.rstrip("/") or log               # an -ff directory: DIR.htrace.gz next to it
    base = log[:-3] if log.endswith(".gz") else log
    return base + ".htrace.gz"


@main.command()
@click.argument("pids", nargs=-1, type=int)
@click.option("--name", "name", metavar="PATTERN", help="Processes whose title/cmdline matches.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option("--stacks", is_flag=True,
              help="Also take each Python process's stacks with py-spy (never pauses it).")
def snapshot(pids: Tuple[int, ...], name: Optional[str], as_json: bool, stacks: bool) -> None:
    """One instant look: threads, current syscalls, wchan, fds and listening sockets."""
    from .render.snapshot import render_snapshot
    from .record.session import SessionError, resolve_targets
    from .record.snapshot import take_snapshot
    try:
        roots = resolve_targets(list(pids), name)
    except SessionError as exc:
        _fail(str(exc), 2 if "give at least one" in str(exc) else 1)
    snap = take_snapshot(roots, stacks=stacks)
    if as_json:
        click.echo(json.dumps(snap.to_json(), indent=2))
    else:
        render_snapshot(snap, Console())


@main.command()
@click.argument("scenario", default="sglang_like")
@click.option("--duration", "-d", default=5.0, show_default=True, type=click.FloatRange(0.2))
@click.option("--backend", "-b", default="auto", show_default=True,
              type=click.Choice(["auto", "proc", "strace", "ebpf"]))
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
def demo(scenario: str, duration: float, backend: str, as_json: bool) -> None:
    """Start a bundled hanging scenario (default: an SGLang-like tree that went silent),
    attach to it and print the verdict; the scenario is killed afterwards."""
    import tempfile
    from .record.demo import DemoError, RunningScenario
    from .record.session import SessionError, choose_backends
    try:
        backends, why = choose_backends(backend)
        sc = RunningScenario(scenario)
    except (DemoError, SessionError) as exc:
        _fail(str(exc))
    try:
        out = os.path.join(tempfile.gettempdir(), f"hangtrace-demo-{scenario}.htrace.gz")
        click.echo(f"hangtrace: scenario {scenario} running as pid {sc.pid}; attaching for "
                   f"{duration:g} s with {why}", err=True)
        done = _record([sc.pid], backends, duration, out, as_json)
    finally:
        sc.kill()
    _emit(done.report, as_json)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the facts as one JSON document.")
def doctor(as_json: bool) -> None:
    """What this machine allows (BPF, BTF, tracepoints, kprobes, uprobes, ptrace, strace, BCC,
    headers) and what to install where something is missing."""
    from .record.doctor import doctor_facts, run_doctor
    if as_json:
        click.echo(json.dumps(doctor_facts(), indent=2))
        sys.exit(0)
    sys.exit(run_doctor(Console()))


def run(argv: Optional[List[str]] = None) -> int:
    """Entry for tests: run the CLI in-process and return its exit code."""
    try:
        main.main(args=argv, prog_name="hangtrace", standalone_mode=False)
    except SystemExit as exc:
        return int(exc.code or 0)
    except click.UsageError as exc:
        click.echo(f"hangtrace: {exc.format_message()}", err=True)
        return 2
    except click.Abort:
        return 1
    return 0


def entry() -> None:
    """Console-script entry: no traceback ever reaches the user."""
    try:
        main(prog_name="hangtrace")
    except KeyboardInterrupt:
        click.echo("hangtrace: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # the last line of defence: one line, exit 1
        click.echo(f"hangtrace: internal error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(1)
