"""The commands for a job that runs on several nodes: ``merge`` and ``cluster`` (cli.py adds them
to ``hangtrace``).

Contract: as cli.py's: bad input raises errors.py's classes, which cli._main turns into one
line on stderr and an exit status; ``--json`` prints exactly one JSON document; the exit status
is the merged report's (0 progressing or idle, 3 busy-waiting, 4 deadlocked, ...). ``-o FILE``
writes the report (JSON with --json, else text) to FILE instead of stdout.
"""
from __future__ import annotations

import json
import sys
from typing import NoReturn, Optional, Tuple

import click

from .errors import OutputError, UsageError


def emit(report, as_json: bool, verbose: bool, output: Optional[str]) -> NoReturn:
    from rich.console import Console
    from .render.console import render_report
    try:
        out = open(output, "w") if output else None
    except OSError as exc:
        raise OutputError(f"{output}: {exc.strerror or exc}") from None
    try:
        if as_json:
            click.echo(json.dumps(report.to_json(), indent=2), file=out)
        else:
            render_report(report, Console(file=out, width=120) if out else Console(),
                          verbose=verbose)
    finally:
        if out is not None:
            out.close()
    if output:
        click.echo(f"hangtrace: report written to {output}", err=True)
    sys.exit(report.exit_code)


@click.command()
@click.argument("traces", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@click.option("--output", "-o", metavar="FILE", help="Write the report here instead of stdout.")
@click.option("--verbose", "-v", is_flag=True, help="Show helper and parked threads too.")
def merge(traces: Tuple[str, ...], as_json: bool, output: Optional[str], verbose: bool) -> None:
    """Merge the traces of one job's nodes (one trace per node, recorded by attach) into one
    report: processes are told apart by node, waits between nodes are followed over TCP, clocks
    are aligned from send/receive pairs, and the verdict names the node, rank and pid."""
    if not traces:
        raise UsageError("give at least one trace (one per node)")
    from .analysis.merged import analyze_merged
    emit(analyze_merged(list(traces)), as_json, verbose, output)
