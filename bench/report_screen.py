"""Benchmark (issue 43 item 1): how many lines the report of an 8-GPU-server-sized tree takes on
an 80-column terminal, and in a pipe, for checkouts side by side (today's main and this branch).

Usage: python bench/report_screen.py [--tree DIR ...] [--backends proc,strace,ebpf]
                                     [--duration 2] [--cols 80]

The tree: fixtures/scenarios/tp8_server.py (a launcher, a detokenizer, 8 schedulers of 100
threads: 802 threads; TP5's runner spins), started once and killed (its process group) at the
end. Per backend, one recording (``attach -d D -o T``, this checkout), then each checkout's
``analyze T`` of that same trace: under a pseudo-terminal of ``--cols`` columns (rich wraps to
it; the lines are counted after the last frame, escape sequences stripped), and in a pipe (lines
never wrapped), with the exit status; and whether the verdict, the root cause's pid and tid and
the chain are in the last 8 lines on the terminal. Each checkout runs on PYTHONPATH with this
interpreter. The default ``--tree``: this checkout only.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Tuple

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(REPO, "tests"))
from terminal import run_on_pty  # noqa: E402  (tests/terminal.py)
SCENARIO = os.path.join(REPO, "fixtures", "scenarios", "tp8_server.py")


def start_tree() -> Tuple[subprocess.Popen, Dict[str, str]]:
    p = subprocess.Popen([sys.executable, SCENARIO], stdout=subprocess.PIPE, text=True,
                         start_new_session=True, cwd=os.path.dirname(SCENARIO))
    assert p.stdout is not None
    line = p.stdout.readline().split()
    if not line or line[0] != "READY":
        os.killpg(p.pid, signal.SIGKILL)
        sys.exit("tp8_server did not become ready")
    facts = dict(f.split("=", 1) for f in line[2:])
    facts["pid"] = line[1]
    return p, facts


def report_lines(text: str) -> List[str]:
    lines = text.split("\n")
    start = max((i for i, l in enumerate(lines) if l.startswith("hangtrace verdict:")),
                default=0)
    out = lines[start:]
    while out and not out[-1].strip():
        out.pop()
    return out


def measure(tree: str, trace: str, cols: int, facts: Dict[str, str]) -> Dict[str, object]:
    env = dict(os.environ, PYTHONPATH=tree, COLUMNS=str(cols), LINES="500")
    argv = [sys.executable, "-m", "tracer", "analyze", trace]
    # python -m: the cwd's tracer first
    run = run_on_pty(argv, cols=cols, rows=500, timeout=600, stderr="devnull", cwd=tree,
                     env={"PYTHONPATH": tree, "COLUMNS": str(cols), "LINES": "500"})
    rc, lines = run.returncode, report_lines(run.text)
    piped = subprocess.run(argv, env=env, cwd=tree, capture_output=True, text=True)
    pid, tid = facts["stuck"].split(":")
    tail = "\n".join(lines[-8:])
    return {"tty_lines": len(lines), "pipe_lines": len(piped.stdout.splitlines()),
            "exit": rc, "widest": max((len(l) for l in lines), default=0),
            "verdict_at_end": "busy-waiting" in tail,
            "root_cause_at_end": f"pid {pid} tid {tid}" in tail,
            "chain_at_end": "chain:" in tail}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", help="checkouts to compare (default: this one)")
    ap.add_argument("--backends", default="proc,strace,ebpf")
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--cols", type=int, default=80)
    ap.add_argument("--keep", help="keep the traces in this directory")
    ns = ap.parse_args()
    trees = ns.tree or [REPO]
    p, facts = start_tree()
    print(f"# tp8_server: {facts['threads']} threads; stuck {facts['stuck']}; "
          f"load {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M')}")
    try:
        with tempfile.TemporaryDirectory() as scratch:
            tmp = ns.keep or scratch
            for backend in ns.backends.split(","):
                trace = os.path.join(tmp, f"tree-{backend}.htrace.gz")
                rec = subprocess.run([sys.executable, "-m", "tracer", "attach", facts["pid"],
                                      "-b", backend, "-d", str(ns.duration), "-o", trace,
                                      "--json"], cwd=REPO, capture_output=True, text=True,
                                     env=dict(os.environ, PYTHONPATH=REPO))
                if not os.path.exists(trace):
                    print(f"{backend}: no trace ({rec.stderr.strip()[-200:]})")
                    continue
                verdict = json.loads(rec.stdout)["verdict"] if rec.stdout.strip() else "?"
                for tree in trees:
                    m = measure(tree, trace, ns.cols, facts)
                    print(f"{backend:6} {verdict:12} {os.path.basename(os.path.normpath(tree)):10}"
                          f" {ns.cols} columns: {m['tty_lines']:4} lines (widest {m['widest']}),"
                          f" pipe: {m['pipe_lines']:4} lines, exit {m['exit']}; at the end:"
                          f" verdict {m['verdict_at_end']}, root cause"
                          f" {m['root_cause_at_end']}, chain {m['chain_at_end']}", flush=True)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


if __name__ == "__main__":
    main()
