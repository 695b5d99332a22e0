"""Benchmark (issue 43 item 2): how soon after the window ``hangtrace attach LAUNCHER -d D``
gives its report on a tree the size of an 8-GPU server (fixtures/scenarios/tp8_server.py: a
launcher, a detokenizer, 8 schedulers of 100 threads, TP5's runner spinning), at load 0 and at
load 4, with each backend, for this checkout and a base revision side by side, in one run.

Usage: python bench/report_time.py [--base REV] [--base-dir DIR] [--tree DIR ...]
           [--backends ebpf,proc,strace] [--loads 0,4] [--runs 2] [--duration 5]
           [--without-priority] [--results DIR]

- The base: ``--base`` (default 5e78431, main before this work) checked out as a detached
  worktree in ``--base-dir`` (default ../hangtrace-REV beside this checkout) with its own
  ``scripts/setup.sh``, made on first use; ``--tree`` adds other checkouts. Each runs with its
  own .venv's python. ``--without-priority``: this checkout once more with
  ``HANGTRACE_END_NICE=0`` (the end at the priority it was started with).
- Per run (the trees alternate run by run), from the trace and ``wait4``: ``report``, seconds
  from the window's end (the trace header's start + D) to the report's first byte on stdout (a
  pipe), ``exit`` to the command's exit; ``cpu``, hangtrace's user + system seconds, its
  children included (py-spy, strace); ``rss`` its peak (MiB); ``lines``, the report's lines at
  80 columns (``analyze`` of the run's trace, with that tree's code, on an 80-column
  pseudo-terminal); whether the root cause names the spinning runner and the trace holds its
  Python stack (the deciding evidence); ``spin``: the share of a CPU the target's spinning
  runner got from 2.5 s before the window's end to hangtrace's exit (what hangtrace's end
  took from the target); ``load1``: the 1-minute load average before the run.
- Load N: N processes ``while 1: pass`` beside the tree (two a core on 2 cores: 4), started
  before that level's runs, killed after.
Printed: one JSON line per run, then the table of medians; written to ``--results`` (default
bench/results) as report-time-<UTC time>.txt (the table) and .jsonl (the runs).
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
import threading
import time
from typing import Dict, List, Optional, Tuple

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "bench"))
SCENARIO = os.path.join(REPO, "fixtures", "scenarios", "tp8_server.py")
SPIN = "while 1: pass"
BASE = "5e78431"
SPIN_LEAD_S = 2.5       # the target's share is measured from this long before the window's end


class Tree:
    """A checkout to run: its directory, its python, its label, extra environment."""

    def __init__(self, path: str, label: str, env: Optional[Dict[str, str]] = None) -> None:
        self.path, self.label, self.env = path, label, env or {}
        venv = os.path.join(path, ".venv", "bin", "python")
        self.python = venv if os.path.exists(venv) else sys.executable


def base_tree(rev: str, where: str) -> str:
    """``where`` as a detached worktree of ``rev`` with its own setup (made when missing)."""
    if not os.path.exists(os.path.join(where, ".venv", "bin", "python")):
        if not os.path.isdir(where):
            subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", where, rev],
                           check=True, stdout=subprocess.DEVNULL)
        print(f"# setting up {where} ({rev}): scripts/setup.sh", flush=True)
        subprocess.run(["nice", "-n", "10", "bash", "scripts/setup.sh"], cwd=where, check=True,
                       stdout=subprocess.DEVNULL)
    return where


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


class CpuSampler:
    """The spinning runner's CPU seconds (/proc/PID/task/TID/schedstat) every 50 ms."""

    def __init__(self, pid: int, tid: int) -> None:
        self.path = f"/proc/{pid}/task/{tid}/schedstat"
        self.samples: List[Tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with open(self.path) as f:
                    self.samples.append((time.time(), int(f.read().split()[0]) / 1e9))
            except (OSError, ValueError, IndexError):
                return
            self._stop.wait(0.05)

    def share(self, t0: float, t1: float) -> Optional[float]:
        self._stop.set()
        self._thread.join()
        inside = [s for s in self.samples if t0 <= s[0] <= t1]
        if len(inside) < 2 or inside[-1][0] - inside[0][0] < 0.2:
            return None
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


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


def lines_at_80(tree: Tree, trace: str) -> int:
    """The report's lines on an 80-column terminal (``analyze``, that tree's code)."""
    from report_screen import report_lines, run_on_pty      # (tests/terminal.py's runner)
    run = run_on_pty([tree.python, "-m", "tracer", "analyze", trace], cols=80, rows=500,
                     timeout=600, stderr="devnull", cwd=tree.path,
                     env={"PYTHONPATH": tree.path, "COLUMNS": "80", "LINES": "500",
                          **tree.env})
    return len(report_lines(run.text))


def one_run(tree: Tree, backend: str, launcher: int, stuck: Tuple[int, int], duration: float,
            tmp: str) -> Dict[str, object]:
    out = os.path.join(tmp, f"{tree.label}-{backend}.htrace")
    env = dict(os.environ, PYTHONPATH=tree.path, **tree.env)
    load = os.getloadavg()[0]
    spin = CpuSampler(*stuck)
    t0 = time.time()
    p = subprocess.Popen([tree.python, "-m", "tracer", "attach", str(launcher), "-b", backend,
                          "-d", f"{duration:g}", "-o", out], cwd=tree.path, env=env,
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
    start, found, trouble = trace_facts(out, stuck)
    end = (start or t0) + duration
    share = spin.share(end - SPIN_LEAD_S, t_exit)
    head = text.splitlines()[:2] if text else []
    verdict = re.search(r"verdict: (\S+)", head[0]).group(1) if head and "verdict:" in head[0] \
        else "?"
    cause = next((ln for ln in text.splitlines() if ln.startswith("root cause")), "")
    return {
        "tree": tree.label, "backend": backend, "after_report": round(t_first - end, 3),
        "after_last_line": round(t_last - end, 3), "after_exit": round(t_exit - end, 3),
        "whole": round(t_exit - t0, 2), "cpu": round(ru.ru_utime + ru.ru_stime, 2),
        "rss_mib": round(ru.ru_maxrss / 1024, 1), "lines80": lines_at_80(tree, out),
        "exit": os.waitstatus_to_exitcode(status), "verdict": verdict,
        "names_spinner": f"tid {stuck[1]}" in cause, "spinner_pystack": found,
        "spinner_share": None if share is None else round(share, 3),
        "trouble": trouble, "load1_before": round(load, 2)}


def med(rows: List[Dict[str, object]], key: str) -> float:
    vals = [float(r[key]) for r in rows if r.get(key) is not None]  # type: ignore[arg-type]
    return statistics.median(vals) if vals else float("nan")


def table(rows: List[Dict[str, object]], trees: List[Tree]) -> List[str]:
    out = ["load backend tree          report  exit   cpu  rss lines spin pystack cause "
           "verdicts      load1",
           "                           (s after the window) (s) (MiB) (80 col) (CPU share)"]
    for load, backend in sorted({(r["load"], r["backend"]) for r in rows}):  # type: ignore
        for t in trees:
            mine = [r for r in rows if (r["load"], r["backend"], r["tree"]) == (load, backend,
                                                                                t.label)]
            if not mine:
                continue
            loads = [float(r["load1_before"]) for r in mine]  # type: ignore[arg-type]
            out.append(
                f"{load:4} {backend:7} {t.label[:13]:13} {med(mine, 'after_report'):6.2f} "
                f"{med(mine, 'after_exit'):5.2f} {med(mine, 'cpu'):5.2f} "
                f"{med(mine, 'rss_mib'):4.0f} {med(mine, 'lines80'):5.0f} "
                f"{med(mine, 'spinner_share'):4.2f} "
                f"{sum(bool(r['spinner_pystack']) for r in mine)}/{len(mine):<5} "
                f"{sum(bool(r['names_spinner']) for r in mine)}/{len(mine):<3} "
                f"{','.join(sorted({str(r['verdict']) for r in mine})):13} "
                f"{min(loads):.1f}-{max(loads):.1f}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default=BASE)
    ap.add_argument("--base-dir", default="")
    ap.add_argument("--tree", action="append", default=[])
    ap.add_argument("--backends", default="ebpf,proc,strace")
    ap.add_argument("--loads", default="0,4")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--without-priority", action="store_true")
    ap.add_argument("--results", default=os.path.join(REPO, "bench", "results"))
    args = ap.parse_args()
    base_dir = args.base_dir or os.path.join(os.path.dirname(REPO), f"hangtrace-{args.base}")
    trees = [Tree(base_tree(args.base, base_dir), f"base {args.base[:7]}"),
             Tree(REPO, "this")]
    if args.without_priority:
        trees.append(Tree(REPO, "this, nice 0", {"HANGTRACE_END_NICE": "0"}))
    trees += [Tree(os.path.abspath(t), os.path.basename(os.path.abspath(t))) for t in args.tree]
    head = subprocess.run(["git", "-C", REPO, "log", "-1", "--format=%h"], capture_output=True,
                          text=True).stdout.strip()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    os.makedirs(args.results, exist_ok=True)
    path = os.path.join(args.results, f"report-time-{stamp}")
    tree, launcher, stuck = start_tree()
    rows: List[Dict[str, object]] = []
    began_load = os.getloadavg()
    try:
        with tempfile.TemporaryDirectory() as tmp, open(path + ".jsonl", "w") as sink:
            for load in [int(x) for x in args.loads.split(",")]:
                spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(load)]
                time.sleep(2.0 if load else 0.0)
                try:
                    for k in range(args.runs):
                        for backend in args.backends.split(","):
                            for t in (trees if k % 2 == 0 else trees[::-1]):
                                row = one_run(t, backend, launcher, stuck, args.duration, tmp)
                                row["load"] = load
                                rows.append(row)
                                print(json.dumps(row), flush=True)
                                sink.write(json.dumps(row) + "\n")
                                sink.flush()
                finally:
                    for s in spinners:
                        s.kill()
                        s.wait()
    finally:
        os.killpg(tree.pid, signal.SIGKILL)
        tree.wait()
    lines = [f"# python bench/report_time.py (this: {head}; base: {args.base}), "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
             f"runs {args.runs}, -d {args.duration:g}; load average at the start "
             f"{began_load[0]:.1f} {began_load[1]:.1f} {began_load[2]:.1f}, at the end "
             f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}",
             "# medians; report/exit: s from the window's end to the report's first byte / the "
             "exit; cpu: hangtrace's, children included;",
             "# spin: CPU share the target's spinning runner got from 2.5 s before the window's "
             "end to the exit; pystack: runs whose trace",
             "# holds that runner's Python stack; cause: runs whose root cause names it; "
             "load1: the 1-min load average before each run"] + table(rows, trees)
    print("\n".join(lines))
    with open(path + ".txt", "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"# written: {path}.txt, {path}.jsonl")


if __name__ == "__main__":
    main()
