"""Benchmark: how soon after the window ``hangtrace attach LAUNCHER -d D`` gives its report on
a tree the size of an 8-GPU server (fixtures/scenarios/tp8_server.py: a launcher, a
detokenizer, 8 schedulers of 100 threads, TP5's runner spinning), at load 0 and at load 4, with
each backend, for this checkout and others (issue 43 item 2).

Usage: python bench/report_time.py [--tree DIR ...] [--backends ebpf,proc,strace]
                                   [--loads 0,4] [--runs 2] [--duration 5] [--out FILE]

Per run, printed and written to ``--out`` (JSON Lines):
- after: seconds from the window's end (the trace header's start + ``--duration``) to the
  report's first byte on hangtrace's stdout (the text report, to a pipe: its verdict line),
  to its last byte (the whole report) and to the command's exit;
- cpu: hangtrace's user + system CPU seconds, its waited-for children included (py-spy,
  strace): wait4's rusage; rss: its peak resident set (MiB);
- verdict: the headline's verdict, whether the root cause names the spinning runner's thread,
  and whether the trace holds that thread's Python stack (a ``PyStack`` without error: the
  deciding evidence), and the trouble lines of probes cut or not finished;
- load: the 1-minute load average before the run and the machine's busy share of its CPUs
  during it (/proc/stat), hangtrace's own work included: the machine may be shared.
Load N: N processes ``while 1: pass`` beside the tree (two per core on 2 cores: load 4),
started before that level's runs and killed after. Trees (``--tree``: other checkouts, run
with their own ``tracer`` on PYTHONPATH, this interpreter) alternate run by run.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, REPO)
SCENARIO = os.path.join(REPO, "fixtures", "scenarios", "tp8_server.py")
SPIN = "while 1: pass"


def start_tree() -> Tuple[subprocess.Popen, int, Tuple[int, int]]:
    """(the tree, its launcher pid, the spinning runner's (pid, tid)) once READY."""
    p = subprocess.Popen([sys.executable, SCENARIO], stdout=subprocess.PIPE, text=True,
                         start_new_session=True)
    assert p.stdout is not None
    line = p.stdout.readline()
    if not line.startswith("READY"):
        raise SystemExit(f"the tree did not start: {line!r}")
    fields = dict(f.split("=", 1) for f in line.split()[2:] if "=" in f)
    pid, tid = fields["stuck"].split(":")
    return p, int(line.split()[1]), (int(pid), int(tid))


def cpu_busy() -> Tuple[int, int]:
    """(busy jiffies, all jiffies) of the machine, from /proc/stat's first line."""
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:]]
    idle = vals[3] + vals[4]
    return sum(vals) - idle, sum(vals)


def trace_facts(path: str, stuck: Tuple[int, int]) -> Tuple[Optional[float], bool, List[str]]:
    """(the window's start, whether the stuck thread's Python stack is in the trace, the
    trouble lines about cut probes or stacks not taken)."""
    from tracer import events as ev
    from tracer.tracefile.format import TraceReader
    r = TraceReader(path)
    start = r.info.header.get("start")
    found, trouble = False, []
    for e in r.events():
        if isinstance(e, ev.PyStack) and (e.pid, e.tid) == stuck and not e.error and e.frames:
            found = True
        elif isinstance(e, ev.PyStack) and e.error and e.pid == stuck[0]:
            trouble.append(f"pystack {e.pid}: {e.error}")
        elif isinstance(e, ev.ObserveError) and re.search(r"not run|not finish|spent", e.why):
            trouble.append(f"{e.source}: {e.why[:160]}")
    return start, found, trouble


def one_run(tree: str, backend: str, launcher: int, stuck: Tuple[int, int], duration: float,
            tmp: str) -> Dict[str, object]:
    out = os.path.join(tmp, f"{os.path.basename(tree)}-{backend}.htrace")
    env = dict(os.environ, PYTHONPATH=tree)
    load = os.getloadavg()[0]
    busy0 = cpu_busy()
    t0 = time.time()
    p = subprocess.Popen([sys.executable, "-m", "tracer", "attach", str(launcher), "-b", backend,
                          "-d", f"{duration:g}", "-o", out], cwd=tree, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert p.stdout is not None
    chunks: List[bytes] = []
    t_first = t_last = 0.0
    while True:
        chunk = os.read(p.stdout.fileno(), 1 << 16)
        if not chunk:
            break
        t_last = time.time()
        t_first = t_first or t_last
        chunks.append(chunk)
    text = b"".join(chunks).decode("utf-8", "replace")
    _, status, ru = os.wait4(p.pid, 0)
    t_exit = time.time()
    busy1 = cpu_busy()
    start, found, trouble = trace_facts(out, stuck)
    end = (start or t0) + duration
    head = text.splitlines()[:2] if text else []
    verdict = re.search(r"verdict: (\S+)", head[0]).group(1) if head and "verdict:" in head[0] \
        else "?"
    cause = next((ln for ln in text.splitlines() if ln.startswith("root cause")), "")
    return {
        "tree": tree, "backend": backend, "after_report": round(t_first - end, 3),
        "after_last_line": round(t_last - end, 3),
        "after_exit": round(t_exit - end, 3), "whole": round(t_exit - t0, 2),
        "cpu": round(ru.ru_utime + ru.ru_stime, 2), "rss_mib": round(ru.ru_maxrss / 1024, 1),
        "exit": os.waitstatus_to_exitcode(status), "verdict": verdict,
        "names_spinner": f"tid {stuck[1]}" in cause, "spinner_pystack": found,
        "trouble": trouble, "load1_before": round(load, 2),
        "machine_busy": round((busy1[0] - busy0[0]) / max(busy1[1] - busy0[1], 1), 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", action="append", default=[])
    ap.add_argument("--backends", default="ebpf,proc,strace")
    ap.add_argument("--loads", default="0,4")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    trees = [os.path.abspath(t) for t in args.tree] or [REPO]
    tree, launcher, stuck = start_tree()
    rows: List[Dict[str, object]] = []
    sink = open(args.out, "w") if args.out else None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for load in [int(x) for x in args.loads.split(",")]:
                spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(load)]
                time.sleep(2.0 if load else 0.0)
                try:
                    for k in range(args.runs):
                        for backend in args.backends.split(","):
                            order = trees if k % 2 == 0 else trees[::-1]
                            for t in order:
                                row = one_run(t, backend, launcher, stuck, args.duration, tmp)
                                row["load"] = load
                                rows.append(row)
                                print(json.dumps(row), flush=True)
                                if sink:
                                    sink.write(json.dumps(row) + "\n")
                                    sink.flush()
                finally:
                    for s in spinners:
                        s.kill()
                        s.wait()
    finally:
        os.killpg(tree.pid, signal.SIGKILL)
        tree.wait()
        if sink:
            sink.close()
    summary(rows, trees)


def summary(rows: List[Dict[str, object]], trees: List[str]) -> None:
    print(f"\nmedians (report: s from the window's end to the report's first byte; exit: to "
          f"the command's exit; cpu s; rss MiB; pystack: runs whose trace holds the spinning "
          f"runner's Python stack)")
    keys = sorted({(r["load"], r["backend"]) for r in rows})
    for load, backend in keys:
        for t in trees:
            mine = [r for r in rows if (r["load"], r["backend"], r["tree"]) == (load, backend, t)]
            if not mine:
                continue
            med = lambda k: statistics.median(float(r[k]) for r in mine)  # noqa: E731
            print(f"load {load} {backend:6} {os.path.basename(t):12} report {med('after_report'):5.2f}"
                  f"  last line {med('after_last_line'):5.2f}  exit {med('after_exit'):5.2f}  cpu {med('cpu'):5.2f}  rss {med('rss_mib'):5.0f}"
                  f"  pystack {sum(bool(r['spinner_pystack']) for r in mine)}/{len(mine)}"
                  f"  verdicts {','.join(sorted({str(r['verdict']) for r in mine}))}"
                  f"  bg load {min(float(r['load1_before']) for r in mine):.1f}-"
                  f"{max(float(r['load1_before']) for r in mine):.1f}")


if __name__ == "__main__":
    main()
