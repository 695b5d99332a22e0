"""The commands for a job that runs on several nodes: ``merge`` and ``cluster`` (cli/commands.py
adds them to ``hangtrace``).

Contract: as cli/commands.py's: bad input raises errors.py's classes, which cli._main turns into one
line on stderr and an exit status; ``--json`` prints exactly one JSON document; the exit status
is the merged report's (0 progressing or idle, 3 busy-waiting, 4 deadlocked, ...). ``-o FILE``
writes the report (JSON with --json, else text) to FILE instead of stdout.
"""
from __future__ import annotations

import contextlib
import json
from typing import Optional, Tuple

import click

from ..errors import UsageError
from .examples import epilog
from ..render.visible import visible
from .options import DIR, FILE, color_option, PidList, all_pids, report_console, tell


def _show(report, as_json: bool, verbose: bool, output: Optional[str]) -> int:
    from ..outputs import replacing
    from ..render.console import render_report
    with (replacing(output) if output else contextlib.nullcontext()) as out:
        if as_json:
            click.echo(json.dumps(report.to_json(), indent=2), file=out)
        else:
            render_report(report, report_console(file=out), verbose=verbose)
    if output:
        tell(f"report written to {output}")
    return int(report.exit_code)


@click.command(epilog=epilog("merge"))
@click.argument("traces", nargs=-1, metavar="TRACE...", type=FILE)
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@click.option("--output", "-o", type=FILE, metavar="FILE", help="Write the report here instead of stdout.")
@click.option("--verbose", "-v", is_flag=True, help="Show helper and parked threads too.")
@color_option
def merge(traces: Tuple[str, ...], as_json: bool, output: Optional[str], verbose: bool) -> int:
    """Merge the traces of one job's nodes (one trace per node, recorded by attach) into one
    report: processes are told apart by node, waits between nodes are followed over TCP, clocks
    are aligned from send/receive pairs, and the verdict names the node, rank and pid."""
    if not traces:
        raise UsageError("give at least one trace (one per node)")
    from ..load.merged import analyze_merged
    return _show(analyze_merged(list(traces)), as_json, verbose, output)


@click.command(epilog=epilog("cluster"))
@click.argument("nodes", nargs=-1, metavar="[NODE]...")
@click.option("--via", required=True, metavar="LAUNCHER",
              help="slurm, kubectl, ssh, pdsh, or a command template with {node} "
              "(e.g. 'ip netns exec {node}') that runs what follows it on that node.")
@click.option("--pid", "-p", "pid_lists", type=PidList(), multiple=True,
              metavar="PID[,PID...]", help="Record this pid on every node (repeatable).")
@click.option("--name", metavar="PATTERN", help="Record the processes matching it on each "
              "node ({node} is replaced by the node's name; by the host name with slurm, "
              "pdsh).")
@click.option("--duration", "-d", default=5.0, show_default=True,
              type=click.FloatRange(0.2, 86400), metavar="SECONDS", help="Seconds to record.")
@click.option("--backend", "-b", default="auto", show_default=True,
              type=click.Choice(["auto", "proc", "strace", "ebpf"]),
              help="The backend each node records with (as attach's --backend).")
@click.option("--rate", type=click.FloatRange(0.5, 200), metavar="HZ",
              help="/proc samples per second.")
@click.option("--jobid", metavar="ID", help="slurm: the job whose nodes to record.")
@click.option("--selector", "-l", metavar="LABELS", help="kubectl: the pods of this label "
              "selector (instead of naming them).")
@click.option("--namespace", "-n", metavar="NS", help="kubectl: the pods' namespace.")
@click.option("--container", "-c", metavar="NAME", help="kubectl: the container to exec in.")
@click.option("--remote-cmd", default="hangtrace", show_default=True, metavar="CMD",
              help="How hangtrace is run on the nodes (e.g. '/opt/venv/bin/hangtrace').")
@click.option("--output-dir", metavar="DIR", shell_complete=DIR.shell_complete, help="Where the traces and each node's log go "
              "(default: ./hangtrace-cluster-TIME; slurm and pdsh: a directory every node "
              "sees).")
@click.option("--timeout", type=click.FloatRange(1), metavar="SECONDS", help="Seconds to wait for the nodes "
              "(default: the duration plus 120).")
@click.option("--fanout", default=32, show_default=True, type=click.IntRange(1), metavar="N",
              help="Launchers running at once.")
@click.option("--dry-run", is_flag=True, help="Print the command line each launcher runs, and "
              "each node name a run would refuse (then exit 2).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@click.option("--output", "-o", type=FILE, metavar="FILE", help="Write the report here instead of stdout.")
@click.option("--verbose", "-v", is_flag=True, help="Show helper and parked threads too.")
@color_option
def cluster(nodes: Tuple[str, ...], via: str, pid_lists: Tuple[list, ...], name: Optional[str],
            duration: float, backend: str, rate: Optional[float], jobid: Optional[str],
            selector: Optional[str], namespace: Optional[str], container: Optional[str],
            remote_cmd: str, output_dir: Optional[str], timeout: Optional[float],
            fanout: int, dry_run: bool, as_json: bool, output: Optional[str],
            verbose: bool) -> int:
    """Record a job on all its NODES at once through the cluster's own launcher (each node
    runs hangtrace attach), collect the traces and print one merged report. A node that
    fails is reported as such; the others are merged."""
    import shlex
    import time
    from ..record import cluster as cl
    pids = all_pids([], pid_lists)
    if not pids and not name:
        raise UsageError("give --pid or --name: what to record on each node")
    outdir = output_dir or f"hangtrace-cluster-{time.strftime('%Y%m%d-%H%M%S')}"
    att = cl.AttachArgs(shlex.split(remote_cmd), list(pids), name, duration, backend, rate)
    node_list = list(nodes)
    if via == "kubectl" and selector:
        if dry_run:
            click.echo(visible(shlex.join(["kubectl", "get", "pods", "-l", selector, "-o",
                                           "name"] + (["-n", namespace] if namespace else [])))
                       + "    # the pods; then for each POD:")
            node_list = node_list or ["POD"]
        else:
            node_list += cl.kubectl_pods(selector, namespace)
    refused = cl.refused_nodes(node_list)
    if dry_run and refused:     # say what a run would refuse, and plan the rest
        for node, why in refused:
            click.echo(visible(f"# refused: {shlex.quote(node)}: {why}"))
        node_list = [n for n in node_list if not cl.node_name_problem(n)]
    runs = cl.plan(via, node_list, att, outdir, jobid=jobid, namespace=namespace,
                   container=container) if node_list or not refused else []
    if not dry_run and not output_dir:    # planned first: a refusal leaves no directory
        from ..outputs import fresh_directory
        outdir = fresh_directory(outdir)     # a name others can predict: a new directory
        runs = cl.plan(via, node_list, att, outdir, jobid=jobid, namespace=namespace,
                       container=container)
    if dry_run:
        for line in cl.dry_run_lines(runs):
            click.echo(visible(line))
        return 2 if refused else 0
    from ..outputs import output_directory
    output_directory(outdir)             # a link there is refused, as for watch
    tell(f"recording {len(node_list) or 'the'} nodes through {via} for {duration:g} s into "
         f"{outdir}")
    results = cl.run(runs, timeout if timeout is not None else duration + 120, fanout)
    for r in results:
        if r.error or r.warning:
            tell(f"node {r.node}: {r.error or r.warning}")
    good = [r for r in results if r.trace]
    if not good:
        from ..errors import BackendFailed
        raise BackendFailed("no node could be recorded: " + "; ".join(
            f"{r.node}: {r.error}" for r in results))
    from ..load.merged import analyze_merged
    report = analyze_merged([r.trace for r in good],  # type: ignore[misc]
                            failed=[(r.node, r.error or "") for r in results if not r.trace])
    report.notes += [f"node {r.node}: {r.warning}" for r in good if r.warning]
    return _show(report, as_json, verbose, output)
