"""The commands that read files: ``analyze``, ``import-strace`` and ``export`` (cli/commands.py
adds them to ``hangtrace``).

Contract: as cli/commands.py's. Long reads show a progress bar on stderr when it is a
terminal (render/progress.py, fed by the reader's and the importer's own callbacks). An output
file is opened only once its input was found good.
"""
from __future__ import annotations

import os
import stat
import sys
from typing import TYPE_CHECKING, Optional, Tuple

import click

from ..errors import OutputError, UsageError, shown
from .examples import epilog
from ..render.export import FORMATS
from .options import FILE, complete_from, is_terminal, show

if TYPE_CHECKING:  # pragma: no cover
    from ..load.inputs import Input
    from ..report import Report

__all__ = ["analyze", "export", "import_strace_cmd"]


@click.command(epilog=epilog("analyze"))
@click.argument("trace", type=FILE)
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@click.option("--verbose", "-v", is_flag=True, help="Show helper and parked threads too.")
@click.option("--flight-recorder", "--fr", "fr", multiple=True, metavar="PATH", type=FILE,
              help="PyTorch Flight Recorder dumps to read with the trace (a directory, a file "
              "prefix such as /tmp/nccl_trace_rank_, or a file).")
def analyze(trace: str, as_json: bool, verbose: bool, fr: Tuple[str, ...]) -> int:
    """Analyze a saved trace (or a raw strace log, or the files of strace -ff -o PREFIX: the
    directory or PREFIX, or a directory of PyTorch Flight Recorder dumps) and print the
    verdict."""
    from ..analysis.analyzer import analyze_dumps
    from ..load.inputs import InputKind, open_input
    from ..load.trace import analyze_trace
    from ..render.progress import FileProgress
    from ..tracefile.fr_dump import read_dumps
    dumps = [d for path in fr for d in read_dumps(path)]
    if fr and not dumps:
        raise UsageError(f"--flight-recorder {', '.join(fr)}: no dump found there")
    given = open_input(trace, dumps=not fr)
    if given.kind is InputKind.FR_DUMPS:
        report = analyze_dumps(read_dumps(trace), trace)
    elif given.kind is InputKind.TRACE:
        with FileProgress(trace, "analyzing") as bar:
            report = analyze_trace(trace, dumps, progress=bar.update)
    else:
        report = _analyze_strace_log(given)
    return show(report, as_json, verbose)


def _analyze_strace_log(given: "Input") -> "Report":
    """``analyze`` on a raw strace log or -ff files: its events streamed into the analyzer
    (load/log.py), with the importer's bar and line first, then the analysis's bar."""
    from ..load.log import analyze_log, open_log
    from ..render.progress import LATER_PASS_COST, FileProgress
    with FileProgress(given.path, "importing", passes=2, later_cost=LATER_PASS_COST) as bar:
        log = open_log(given, progress=bar.update)
    click.echo(f"hangtrace: {given.path} is an strace log; imported {log.events} events",
               err=True)
    with FileProgress(given.path, "analyzing") as bar:
        return analyze_log(log, progress=bar.update)


@click.command(epilog=epilog("export"))
@click.argument("trace", type=FILE)
@click.option("--format", "-f", "fmt", required=True, metavar="|".join(FORMATS),
              shell_complete=complete_from(FORMATS),
              help="Output format: perfetto (Chrome trace event JSON), perfetto-proto "
              "(Perfetto's protobuf, for large traces), json (JSON lines), dot (the wait-for "
              "graph for Graphviz).")
@click.option("--output", "-o", type=FILE, metavar="FILE", help="Write here instead of stdout.")
def export(trace: str, fmt: str, output: Optional[str]) -> int:
    """Write a saved trace in another tool's format (timelines, graphs, JSON lines)."""
    from ..render.export import export_to, is_binary
    from ..render.progress import FileProgress
    from ..tracefile.format import TraceReader
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {shown(fmt)} (available: "
                         f"{', '.join(sorted(FORMATS)) or 'none'})")
    binary = is_binary(fmt)
    if binary and not output and is_terminal(sys.stdout):
        raise UsageError(f"--format {fmt} is binary: give -o FILE or send stdout to a file "
                         "or a pipe")
    if not _is_fifo(trace):           # a FIFO is read once: the exporter's reader checks it
        TraceReader(trace)            # a bad input is refused before any output is opened
    try:
        if output:               # renamed into place once whole: a bad input leaves it as it was
            from ..outputs import replacing
            with replacing(output, text=not binary) as out, \
                    FileProgress(trace, "exporting") as bar:
                export_to(fmt, trace, out, progress=bar.update)
            click.echo(f"hangtrace: wrote {output}", err=True)
        else:
            with FileProgress(trace, "exporting") as bar:
                export_to(fmt, trace, sys.stdout.buffer if binary else sys.stdout,
                          progress=bar.update)
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError(f"{output or 'stdout'}: {exc.strerror or exc}") from None
    return 0


def _is_fifo(path: str) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


@click.command("import-strace", epilog=epilog("import-strace"))
@click.argument("log", type=FILE)
@click.option("--output", "-o", type=FILE, metavar="FILE", help="Trace file to write (default: LOG.htrace.gz).")
@click.option("--analyze", "then_analyze", is_flag=True, help="Print the verdict too.")
@click.option("--json", "as_json", is_flag=True, help="With --analyze: the report as JSON.")
@click.option("--pid", "pid", type=click.IntRange(1, 4194304), metavar="N",
              help="The N of strace -p N: whose lines those without a pid column are, when the "
              "log does not name it (else they are one thread of unknown process).")
def import_strace_cmd(log: str, output: Optional[str], then_analyze: bool, as_json: bool,
                      pid: Optional[int]) -> int:
    """Convert an existing strace log (any of -f/-t/-tt/-ttt/-T/-y/-yy, plain or gzip; or the
    files of strace -ff -o PREFIX, as their directory or PREFIX) to a trace."""
    from ..render.progress import LATER_PASS_COST, FileProgress
    from ..strace.importer import import_strace
    out = output or _default_import_path(log)
    with FileProgress(log, "importing", passes=2, later_cost=LATER_PASS_COST) as bar:
        result = import_strace(log, out, progress=bar.update, pid=pid)
    click.echo(f"hangtrace: imported {result.events} events from {log} into {out}"
               + (f" ({result.unparsed} lines not understood)" if result.unparsed else "")
               + (" (log was cut short)" if result.truncated else ""), err=True)
    if then_analyze:
        from ..load.trace import analyze_trace
        with FileProgress(out, "analyzing") as bar:
            report = analyze_trace(out, progress=bar.update)
        return show(report, as_json)
    return 0


def _default_import_path(log: str) -> str:
    log = log.rstrip("/") or log               # an -ff directory: DIR.htrace.gz next to it
    base = log[:-3] if log.endswith(".gz") else log
    return base + ".htrace.gz"
