"""Recording a job on every node through the cluster's own launcher, then one merged report.

Contract:
- hangtrace brings no agent of its own: each node runs ``hangtrace attach`` (``AttachArgs``)
  through a launcher the cluster already has. ``plan(via, ...)`` returns the ``NodeRun``s:
  one command per node (ssh, kubectl, a template) or one for all (slurm, pdsh); which, and
  where each trace and log goes: its docstring.
- ``run(runs, timeout)`` starts them, waits until each ends or the deadline, then stops what
  is left (no launcher is left behind, on Ctrl-C either) and returns ``NodeResult``s: a node
  whose trace cannot be read failed, and says why (``_last_line``).
- ``dry_run_lines(runs)``: the command lines, shell-quoted, as they would run.
- ``node_name_problem`` refuses the node names a launcher could misread (``plan`` all at once).
"""
from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

from ..errors import OutputError, ToolMissing, UsageError, shown
from ..outputs import open_streamed
from ..tracefile.format import TraceReader

VERDICT_STATUSES = (0, 3, 4, 5, 6, 7)
NODE_MARK = "hangtrace-node: "


@dataclass
class AttachArgs:
    """What each node's ``hangtrace attach`` is given: pids or --name (whose ``{node}`` becomes the
    node's name), duration, backend."""
    remote: List[str]                     # how to run hangtrace on a node
    pids: List[int] = field(default_factory=list)
    name: Optional[str] = None
    duration: float = 5.0
    backend: str = "auto"
    rate: Optional[float] = None

    def argv(self, node: str, output: str) -> List[str]:
        out = self.remote + ["attach"] + [str(p) for p in self.pids]
        if self.name:
            out += ["--name", self.name.replace("{node}", node)]
        out += ["--duration", f"{self.duration:g}", "--backend", self.backend]
        if self.rate is not None:
            out += ["--rate", f"{self.rate:g}"]
        return out + ["--output", output]


@dataclass
class NodeRun:
    """One launcher command: for one node (``node``), or for all (``node`` None: slurm, pdsh)."""
    argv: List[str]
    node: Optional[str]
    trace: Optional[str] = None          # where this node's trace lands (one per node)
    log: str = ""
    shared_dir: Optional[str] = None     # all nodes: each writes shared_dir/HOST.htrace.gz


@dataclass
class NodeResult:
    node: str
    trace: Optional[str]
    error: Optional[str] = None          # set: the node failed (no readable trace)
    status: Optional[int] = None
    warning: str = ""                    # a trace came back, but attach said something wrong


_NOT_IN_NODE_NAME = re.compile(r"[\s/,\x00-\x1f\x7f]")


def node_name_problem(name: str) -> Optional[str]:
    """Why ``name`` cannot be handed to a launcher as a node, or None.
    Refused: those a launcher could read as something else (a leading ``-``: an option; whitespace,
    control characters, ``/`` or ``,``: another word, path or list)."""
    if not name:
        return "an empty name"
    if name.startswith("-"):
        return "starts with '-' (a launcher would read it as an option)"
    bad = _NOT_IN_NODE_NAME.search(name)
    if bad:
        what = {"/": "'/'", ",": "','"}.get(bad.group(), "whitespace or a control character")
        return f"holds {what} (a launcher would read it as another word, path or list)"
    return None


def refused_nodes(nodes: Sequence[str]) -> List[Tuple[str, str]]:
    """(name, why) of every node name ``plan`` would refuse."""
    return [(n, why) for n in nodes if (why := node_name_problem(n))]


def check_nodes(nodes: Sequence[str]) -> None:
    """Raise UsageError naming every node name ``plan`` refuses (``node_name_problem``)."""
    refused = refused_nodes(nodes)
    if refused:
        raise UsageError("refused node names: " + "; ".join(
            f"{shown(n)}: {why}" for n, why in refused))


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._@-]+", "_", name).strip("._") or "node"


def _file_bases(nodes: Sequence[str]) -> Dict[str, str]:
    """A file name of its own for each node name (``gpu.01`` and ``gpu_01.`` would share one)."""
    out: Dict[str, str] = {}
    taken: Set[str] = set()
    for node in nodes:
        base, n = _safe(node), 1
        while base in taken:
            n += 1
            base = f"{_safe(node)}-{n}"
        taken.add(base)
        out[node] = base
    return out


def _shell_attach(att: AttachArgs, outdir: str) -> str:
    """The attach command as a remote shell runs it, naming its trace after the host."""
    parts = att.argv("\x00", '"$ht_out"')
    quoted = []
    for p in parts:
        if p == '"$ht_out"':
            quoted.append(p)
        else:       # a pattern with {node}: the host name, as the shell finds it
            quoted.append('"$ht_host"'.join(shlex.quote(x) for x in p.split("\x00")))
    return (f'ht_host=$(hostname); ht_out={shlex.quote(outdir)}/"$ht_host".htrace.gz; '
            f'echo "{NODE_MARK}$ht_host" >&2; exec ' + " ".join(quoted))


def plan(via: str, nodes: Sequence[str], att: AttachArgs, outdir: str, *,
         jobid: Optional[str] = None, namespace: Optional[str] = None,
         container: Optional[str] = None) -> List[NodeRun]:
    """The commands for ``via``. Raises UsageError when they cannot be made.
    The commands:

    - one command per node, the trace coming back on the launcher's stdout (``attach -o -``) into
    OUTDIR/NODE.htrace.gz, the node's own report and errors on its stderr into OUTDIR/NODE.log:
    ``ssh`` (ssh -o BatchMode=yes -- HOST 'hangtrace attach ...'), ``kubectl`` (kubectl exec POD --
    hangtrace attach ..., the pods named or listed by a label selector) and a template such as
    ``'ip netns exec {node}'`` (``{node}`` replaced, the attach command appended);

    - one command for all nodes, each writing OUTDIR/HOST.htrace.gz itself (OUTDIR must be a
    directory every node sees: a shared file system): ``slurm`` (srun --overlap --jobid J
    --ntasks-per-node=1 --label) and ``pdsh`` (pdsh -S -w HOSTS); each task first says which host
    it is on stderr, so its errors are told apart.

    Node names reach launchers as arguments: ``plan`` refuses all those ``node_name_problem``
    refuses at once, ssh gets ``--`` before the host, and each node name has a trace file of its
    own."""
    outdir = os.path.abspath(outdir)
    nodes = list(dict.fromkeys(nodes))
    check_nodes(nodes)
    if via == "slurm":
        if not jobid:
            raise UsageError("--via slurm needs --jobid (the job whose nodes to record)")
        argv = ["srun", "--overlap", f"--jobid={jobid}", "--ntasks-per-node=1", "--label"]
        if nodes:
            argv += [f"--nodelist={','.join(nodes)}", f"--nodes={len(nodes)}"]
        return [NodeRun(argv + ["sh", "-c", _shell_attach(att, outdir)], None,
                        log=os.path.join(outdir, "srun.log"), shared_dir=outdir)]
    if via == "pdsh":
        if not nodes:
            raise UsageError("--via pdsh needs the hosts to record")
        return [NodeRun(["pdsh", "-S", "-w", ",".join(nodes), _shell_attach(att, outdir)],
                        None, log=os.path.join(outdir, "pdsh.log"), shared_dir=outdir)]
    if not nodes:
        raise UsageError(f"--via {via} needs the nodes to record"
                         + (" (pod names or --selector)" if via == "kubectl" else ""))
    runs = []
    bases = _file_bases(nodes)
    for node in nodes:
        attach = att.argv(node, "-")
        if via == "ssh":
            argv = ["ssh", "-o", "BatchMode=yes", "--", node, shlex.join(attach)]
        elif via == "kubectl":
            argv = ["kubectl", "exec"] + (["-n", namespace] if namespace else []) + [node] \
                + (["-c", container] if container else []) + ["--"] + attach
        else:
            if "{node}" not in via:
                raise UsageError(f"unknown launcher {shown(via)}: slurm, kubectl, ssh, pdsh, or a "
                                 "command template with {node} (e.g. 'ip netns exec {node}')")
            argv = [tok.replace("{node}", node) for tok in shlex.split(via)] + attach
        base = os.path.join(outdir, bases[node])
        runs.append(NodeRun(argv, node, trace=base + ".htrace.gz", log=base + ".log"))
    return runs


def kubectl_pods(selector: str, namespace: Optional[str]) -> List[str]:
    """The pods a label selector names (``kubectl get pods -l``)."""
    argv = ["kubectl", "get", "pods", "-l", selector, "-o", "name"] + \
        (["-n", namespace] if namespace else [])
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise ToolMissing("kubectl is not installed") from None
    except subprocess.TimeoutExpired:
        raise ToolMissing(f"{shlex.join(argv)} did not answer in 60 s") from None
    if p.returncode != 0:
        raise ToolMissing(f"{shlex.join(argv)}: {(p.stderr.strip().splitlines() or ['failed'])[-1]}")
    pods = [line.split("/", 1)[-1] for line in p.stdout.split() if line.strip()]
    if not pods:
        raise UsageError(f"no pod matches the selector {shown(selector)}")
    return pods


def dry_run_lines(runs: Sequence[NodeRun]) -> List[str]:
    out = []
    for r in runs:
        where = r.trace or f"{r.shared_dir}/HOST.htrace.gz"
        out.append(f"{shlex.join(r.argv)}    # trace: {where}")
    return out


# --------------------------------------------------------------------------- running
def _stop(procs: Dict[int, subprocess.Popen]) -> None:
    """SIGTERM each launcher's session, SIGKILL what is left 3 s later, reap all."""
    for p in procs.values():
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
    deadline = time.monotonic() + 3.0
    for p in procs.values():
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            p.wait()


def _start(r: NodeRun) -> subprocess.Popen:
    """The launcher, its stderr into NODE.log and its stdout (the trace) into NODE.htrace.gz:
    new files at their names from the start (outputs.open_streamed)."""
    err = open_streamed(r.log)
    try:
        out = open_streamed(r.trace) if r.trace else subprocess.DEVNULL
    except OutputError:
        err.close()
        raise
    try:
        return subprocess.Popen(r.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True, close_fds=True)
    finally:
        err.close()
        if r.trace:
            out.close()  # type: ignore[union-attr]


def run(runs: Sequence[NodeRun], timeout: float, fanout: int = 32) -> List[NodeResult]:
    """Run the launchers (module doc) and collect what each node left.
    At most ``fanout`` run at once, each in its own session; what is left at the deadline is
    stopped with SIGTERM, then SIGKILL (``_stop``). Attach's exit status is its verdict (0, 3-7);
    1, 2, 130 or a launcher's own status (ssh 255) with no readable trace is a failure."""
    procs: Dict[int, subprocess.Popen] = {}
    started_error: Dict[int, str] = {}
    waiting = list(range(len(runs)))
    deadline = time.monotonic() + timeout
    try:
        while waiting or any(p.poll() is None for p in procs.values()):
            while waiting and sum(p.poll() is None for p in procs.values()) < fanout:
                i = waiting.pop(0)
                try:
                    procs[i] = _start(runs[i])
                except OSError as exc:            # the launcher is not installed, ...
                    started_error[i] = f"{runs[i].argv[0]}: {exc.strerror or exc}"
                except OutputError as exc:        # a link planted at NODE.log, ...
                    started_error[i] = str(exc)
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        _stop(procs)
    timed_out = time.monotonic() > deadline
    out: List[NodeResult] = []
    for i, r in enumerate(runs):
        p = procs.get(i)
        status = p.returncode if p is not None else None
        why = started_error.get(i) or (f"still running after {timeout:g} s" if timed_out and
                                       status not in VERDICT_STATUSES else None)
        if r.shared_dir is None:
            out.append(_result(r.node or "?", r.trace, r.log, status, why))
        else:
            out += _shared_results(r, status, why)
    return out


def _last_line(log: str) -> str:
    """The last thing the node's attach or its launcher said (attach says an error last)."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, os.path.getsize(log) - 65536))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    lines = [ln.strip() for ln in lines if ln.strip() and not ln.startswith(NODE_MARK)
             and "trace written to standard output" not in ln]
    return (lines or [""])[-1]


def _readable(path: Optional[str]) -> Optional[str]:
    """None when ``path`` holds a readable trace (header), else why not."""
    if not path or not os.path.exists(path) or os.path.getsize(path) == 0:
        return "no trace came back"
    try:
        TraceReader(path).close()
    except Exception as exc:       # BadInput and its kin: the message says what is wrong
        return str(exc)
    return None


def _result(node: str, trace: Optional[str], log: str, status: Optional[int],
            why: Optional[str], said: str = "") -> NodeResult:
    said = said or _last_line(log)
    bad = _readable(trace)
    if bad is not None:
        reason = why or said or bad
        if status not in (None, 0) and f"status {status}" not in reason:
            reason += f" (exit status {status})"
        return NodeResult(node, None, reason, status)
    warn = ""
    if why or (status is not None and status not in VERDICT_STATUSES):
        warn = (why or said or "") + (f" (exit status {status})" if status is not None else "")
    return NodeResult(node, trace, None, status, warn.strip())


_LABEL = re.compile(r"^(\S+?): (.*)$")


def _shared_results(r: NodeRun, status: Optional[int], why: Optional[str]) -> List[NodeResult]:
    """slurm/pdsh: the hosts that said who they are (a label, srun's task number or pdsh's
    host, prefixes every line), their errors, and the traces in the shared directory."""
    hosts: Dict[str, str] = {}
    said: Dict[str, List[str]] = {}
    try:
        with open(r.log, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = _LABEL.match(line.rstrip("\n"))
                if not m:
                    continue
                label, text = m.group(1), m.group(2).strip()
                if text.startswith(NODE_MARK):
                    hosts[label] = text[len(NODE_MARK):].strip()
                else:
                    said.setdefault(label, []).append(text)
    except OSError:
        pass
    out = []
    for label, host in sorted(hosts.items(), key=lambda kv: kv[1]):
        lines = [x for x in said.get(label, []) if "trace written" not in x]
        trace = os.path.join(r.shared_dir or ".", f"{host}.htrace.gz")
        out.append(_result(host, trace, "", None, None, lines[-1] if lines else ""))
    if not out:
        out.append(NodeResult(r.argv[0], None, why or _last_line(r.log) or
                              f"{r.argv[0]} started no node (exit status {status})", status))
    return out
