"""The EXAMPLES of every command, in one place: each command's ``--help`` epilog and the man
page's EXAMPLES section are made from this table (``epilog(name)``, cli/manpage.py).

Contract: ``EXAMPLES[command]`` is a list of (command line, what it does); every command of
``hangtrace`` has at least one (tests/unit/test_cli_surface.py checks it). ``epilog(name)`` is
the text click prints after the options, its lines kept as they are (click's ``\\b`` marker).
"""
from __future__ import annotations

from typing import Dict, List, Tuple

__all__ = ["EXAMPLES", "epilog"]

Example = Tuple[str, str]
LINE = 79                 # the widest line an example takes in --help

EXAMPLES: Dict[str, List[Example]] = {
    "hangtrace": [
        ("hangtrace attach -p 4242", "is the tree under pid 4242 progressing, spinning or stuck?"),
        ("hangtrace attach --name sglang::scheduler -d 10", "every TP scheduler, for 10 s"),
        ("hangtrace demo", "a bundled SGLang-like tree that went silent, attached"),
        ("hangtrace doctor", "what this machine allows (eBPF, ptrace, strace, BCC)"),
    ],
    "attach": [
        ("hangtrace attach -p 4242", "record the tree under pid 4242 for 5 s, print the verdict"),
        ("hangtrace attach -p 4242,4243 -p 5000", "several trees (repeat -p or give a comma list)"),
        ("hangtrace attach --name 'sglang::scheduler*' -d 10 -b ebpf",
         "every process whose title matches, with the eBPF backend"),
        ("hangtrace attach --container 3f2a1b9c -d 10",
         "every process of a container (an id prefix, as docker ps shows)"),
        ("hangtrace attach --cgroup /kubepods.slice/kubepods-besteffort.slice",
         "every process of a cgroup and the cgroups below it"),
        ("hangtrace attach -p 4242 --json | jq .verdict", "the report as JSON for a script"),
        ("hangtrace attach -p 4242 -o /var/tmp/hang.htrace.gz", "keep the trace at a given path"),
        ("hangtrace attach -p 4242 -o - | ssh host 'cat > t.htrace.gz'",
         "the trace to stdout (gzip), the report to stderr"),
    ],
    "analyze": [
        ("hangtrace analyze hangtrace-4242-20261201-031207.htrace.gz", "the report of a saved trace"),
        ("hangtrace analyze server.strace.log", "a raw strace log (imported on the fly)"),
        ("hangtrace analyze strace-out/", "the files of strace -ff -o strace-out/trace"),
        ("hangtrace analyze t.htrace.gz --json > report.json", "the report as JSON"),
    ],
    "import-strace": [
        ("hangtrace import-strace server.strace.log", "convert to server.strace.htrace.gz"),
        ("hangtrace import-strace log.gz -o t.htrace.gz --analyze", "convert and print the verdict"),
        ("strace -f -ttt -T -yy -o log -p 4242; hangtrace import-strace log --analyze",
         "the richest log strace can give"),
        ("strace -o log -p 4242; hangtrace import-strace log --pid 4242 --analyze",
         "a log without a pid column: name its process"),
    ],
    "snapshot": [
        ("hangtrace snapshot -p 4242", "threads, syscalls, wchan, fds and ports, right now"),
        ("hangtrace snapshot --name vllm --stacks", "with every Python thread's stack (py-spy)"),
        ("hangtrace snapshot -p 4242 --json > snap.json", "as JSON (its schema: hangtrace schema snapshot)"),
    ],
    "export": [
        ("hangtrace export t.htrace.gz -f perfetto -o t.json", "a timeline for ui.perfetto.dev"),
        ("hangtrace export t.htrace.gz -f perfetto-proto -o t.pftrace",
         "the same as Perfetto's protobuf, for large traces"),
        ("hangtrace export t.htrace.gz -f dot | dot -Tsvg > waits.svg", "the wait-for graph"),
        ("hangtrace export t.htrace.gz -f json | head -1", "the trace as JSON lines"),
    ],
    "watch": [
        ("hangtrace watch --name launch_server --silent-for 300 -o /var/lib/hangtrace",
         "record the server when it has made no progress for 5 min"),
        ("hangtrace watch -p 4242 --silent-for 60 --once", "one capture, exit with its verdict"),
    ],
    "doctor": [
        ("hangtrace doctor", "which backends can run here, and what to install"),
        ("hangtrace doctor --json | jq .backends", "as JSON (its schema: hangtrace schema doctor)"),
    ],
    "schema": [
        ("hangtrace schema report > report.schema.json", "the schema of every --json report"),
        ("hangtrace schema snapshot | jq '.properties | keys'", "what a snapshot holds"),
    ],
    "demo": [
        ("hangtrace demo", "the SGLang-like scenario, attached for 5 s"),
        ("hangtrace demo py_deadlock -b strace", "an ABBA lock deadlock, with strace"),
        ("hangtrace demo --list", "the bundled scenarios"),
    ],
    "merge": [
        ("hangtrace merge node-a.htrace.gz node-b.htrace.gz", "one report for a 2-node job"),
        ("hangtrace merge traces/*.htrace.gz --json | jq .root_cause.node",
         "the node the root cause is on"),
    ],
    "cluster": [
        ("hangtrace cluster --via slurm --jobid 4242 --name train.py -d 10",
         "every node of a Slurm job (srun --overlap)"),
        ("hangtrace cluster --via ssh gpu01 gpu02 --name 'sglang::scheduler'", "over ssh"),
        ("hangtrace cluster --via kubectl -l app=trainer -n ml --name python",
         "kubectl exec in every pod of a label"),
        ("hangtrace cluster --via slurm --jobid 4242 --name train.py --dry-run",
         "print the launchers' command lines only"),
    ],
    "completion": [
        ("eval \"$(hangtrace completion bash)\"", "completion in this bash"),
        ("hangtrace completion zsh > \"${fpath[1]}/_hangtrace\"", "install it for zsh"),
        ("hangtrace completion fish > ~/.config/fish/completions/hangtrace.fish", "for fish"),
    ],
}


def epilog(name: str) -> str:
    """The EXAMPLES block of ``--help`` for command ``name`` (module doc): ``command  # what``
    aligned, one line each, when they all fit in ``LINE`` columns; else each command on its
    line and what it does indented under it."""
    rows = EXAMPLES[name]
    width = max(len(cmd) for cmd, _ in rows)
    one_line = [f"  {cmd:{width}}  # {what}" for cmd, what in rows]
    lines = ["\b", "Examples:"]
    if max(map(len, one_line)) + 2 <= LINE:        # click indents the epilog by 2
        lines += one_line
    else:
        for cmd, what in rows:
            lines += [f"  {cmd}", f"      # {what}"]
    return "\n".join(lines)
