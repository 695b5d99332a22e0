"""What each BPF program costs per run, from the kernel's own BPF statistics.

``kernel.bpf_stats_enabled=1`` makes the kernel time every run of every program (run_time_ns,
run_cnt in ``bpftool prog show``): a figure of the program alone, independent of the machine's
load (a preempted run is not possible: programs run with preemption off). The timing itself adds
two clock reads per run to every program, the empty one included, so compare programs against
the floor measured the same way, never against an untraced run. The setting is put back as it
was found at the end (on: every BPF program of the machine pays for it).

Runs bench/sysloop.c (N iterations: N 1-byte writes to /dev/null, an eventfd write + read every
16) under each MODE, alternating, REPS times, and prints per program the median ns per run:
- ``floor``: bpf/floor.bpf.o's empty tp_btf sys_exit program (floor_tp_btf).
- ``followed``: the eBPF backend (libbpf loader, through the backend API, in a process of its
  own that holds it loaded) following the loop:
  ht_sys_exit and ht_sched_switch. The runs include every other syscall of the machine during the
  loop (other processes: "others" = runs - the loop's own calls); "loop ns" takes them out at the
  bystander cost measured in the same rep.
- ``bystander``: the backend following a sleeping process while the loop runs unfollowed: what
  ht_sys_exit costs every other process's syscall.
- ``sleepers``: the same, the followed process two threads that hand a token back and forth
  (each hand-over a futex sleep, tens of thousands a second): what a followed tree that sleeps
  often costs the machine's other syscalls (a followed thread's sleep makes every CPU's cache
  of who is current stale) and costs itself (its own calls are counted in the same rows).

Programs are told by the ids the holding process has open (other tools of the machine may run
programs of the same names).

    sudo .venv/bin/python bench/prog_cost.py [--modes M...] [--iterations N] [--reps R]
                                             [--tree DIR]...

``--tree DIR`` (repeatable): the same modes with another checkout's programs (its .venv's python
and its built CO-RE objects; ``followed@REV``...), alternating run by run with this tree's: today's
main beside this tree in one run (``git worktree add /tmp/ht-main main --detach && (cd
/tmp/ht-main && bash scripts/setup.sh)``).

Results: bench/results/prog-cost-*.txt, quoted in bench/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import overhead  # noqa: E402  (bench/overhead.py: build, _gated, _release_and_wait, FloorBackend)
from overhead import ROOT  # noqa: E402

STATS = "/proc/sys/kernel/bpf_stats_enabled"
MODES = ("floor", "followed", "bystander", "sleepers")
# the followed process of ``sleepers``: two threads, each hand-over a futex wait of the other
SLEEPERS = r"""
import threading
a, b = threading.Semaphore(0), threading.Semaphore(0)
def other():
    while True:
        a.acquire()
        b.release()
threading.Thread(target=other, daemon=True).start()
while True:
    a.release()
    b.acquire()
"""


def prog_stats() -> Dict[int, dict]:
    """Every loaded program: id -> {name, run_time_ns, run_cnt}."""
    r = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                       check=True)
    return {p["id"]: {"name": p.get("name", ""), "ns": p.get("run_time_ns", 0),
                      "cnt": p.get("run_cnt", 0)} for p in json.loads(r.stdout)}


# Run in the checkout whose programs are measured (its own python and tracer package): loads
# the floor or the eBPF backend following PID, says "ready", unloads at end of stdin.
HOLDER = r"""
import os, sys
sys.path.insert(0, os.getcwd())
from tracer.record.backends.base import TargetSet
mode, pid = sys.argv[1], int(sys.argv[2])
if mode == "floor":
    sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
    from overhead import FloorBackend
    b = FloorBackend("libbpf")
else:
    from tracer.record.backends.ebpf.backend import EbpfBackend
    b = EbpfBackend(loader="libbpf")
b.start(TargetSet([pid]), lambda e: None)
print("ready", flush=True)
sys.stdin.read()
b.stop()
"""
NAMES = ("floor_tp_btf", "ht_sys_exit", "ht_sched_switch")


def _hold(tree: str, mode: str, pid: int) -> subprocess.Popen:
    h = subprocess.Popen([overhead._python(tree), "-c", HOLDER, mode, str(pid)], cwd=tree,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if h.stdout.readline().strip() != "ready":
        h.kill()
        raise RuntimeError(f"{tree}: {mode} did not load (exit {h.wait()})")
    return h


def _prog_ids(pid: int) -> set:
    """The ids of the BPF programs process ``pid`` holds (its fds' fdinfo "prog_id"): other
    tools of the machine may load programs of the same names meanwhile."""
    ids = set()
    d = f"/proc/{pid}/fdinfo"
    for fd in os.listdir(d):
        try:
            with open(os.path.join(d, fd)) as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(int(line.split()[1]))
        except (OSError, ValueError):
            pass
    return ids


def run_mode(mode: str, exe: str, n: int, tree: str = ROOT) -> Dict[str, dict]:
    """One loop under ``mode`` (programs of checkout ``tree``): per program name of ours
    (NAMES), its runs and ns during the loop."""
    p, w = overhead._gated(exe, n)
    other = subprocess.Popen(["sleep", "600"]) if mode == "bystander" else \
        subprocess.Popen([sys.executable, "-c", SLEEPERS]) if mode == "sleepers" else None
    h = None
    try:
        h = _hold(tree, "floor" if mode == "floor" else "ebpf", other.pid if other else p.pid)
        time.sleep(0.3)
        ours = _prog_ids(h.pid) & {i for i, s in prog_stats().items() if s["name"] in NAMES}
        s0 = {i: s for i, s in prog_stats().items() if i in ours}
        wall, cpu = overhead._release_and_wait(p, w)
        s1 = {i: s for i, s in prog_stats().items() if i in ours}
    finally:
        os.close(w)
        if h is not None:
            h.stdin.close()
            h.wait()
        for proc in (p, other):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    out: Dict[str, dict] = {"loop": {"wall": wall, "cpu": cpu}}
    for i, s in s1.items():
        d_cnt = s["cnt"] - s0[i]["cnt"]
        if d_cnt:
            out[s["name"]] = {"cnt": d_cnt, "ns": s["ns"] - s0[i]["ns"]}
    return out


def loop_calls(n: int) -> int:
    return n + 2 * (n // 16)


def _loop_ns(rs: List[Dict[str, dict]], bys: List[Dict[str, dict]], n: int) -> List[float]:
    """ht_sys_exit's ns per call of the loop itself: the other processes' calls during the
    loop (runs beyond the loop's own) taken out at the bystander cost of the same rep."""
    vals = []
    for r, b in zip(rs, bys):
        x, y = r.get("ht_sys_exit"), b.get("ht_sys_exit")
        if x and y:
            others = min(max(x["cnt"] - loop_calls(n), 0), x["cnt"] - 1)
            vals.append((x["ns"] - others * y["ns"] / y["cnt"]) / (x["cnt"] - others))
    return vals


def summarize(rows: Dict[str, List[Dict[str, dict]]], n: int) -> List[str]:
    lines = [f"{'mode':<22}{'program':<17}{'runs/loop':>11}{'ns/run':>8}{'min':>7}{'max':>7}"
             f"{'loop ns':>9}{'loop min':>9}{'cpu s':>7}"]
    for mode, rs in rows.items():
        kind, _, where = mode.partition("@")
        bys = rows.get("bystander" + ("@" + where if where else ""), [])
        for name in sorted({k for r in rs for k in r if k != "loop"}):
            per = [r[name]["ns"] / r[name]["cnt"] for r in rs if name in r]
            cnts = [r[name]["cnt"] for r in rs if name in r]
            loop = _loop_ns(rs, bys, n) if kind == "followed" and name == "ht_sys_exit" else []
            cpu = statistics.median(r["loop"]["cpu"] for r in rs)
            lines.append(f"{mode:<22}{name:<17}{statistics.median(cnts):>11,.0f}"
                         f"{statistics.median(per):>8.1f}{min(per):>7.1f}{max(per):>7.1f}"
                         f"{(f'{statistics.median(loop):.1f}' if loop else '-'):>9}"
                         f"{(f'{min(loop):.1f}' if loop else '-'):>9}{cpu:>7.3f}")
    return lines


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", nargs="*", default=list(MODES), choices=MODES)
    ap.add_argument("--iterations", type=int, default=3_000_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", metavar="FILE", help="also write every run's numbers here")
    ap.add_argument("--tree", action="append", default=[], metavar="DIR",
                    help="also followed@REV, bystander@REV...: another checkout's programs "
                         "(its .venv and CO-RE objects), alternating with this tree's")
    a = ap.parse_args(argv)
    runs = [(m, m, ROOT) for m in a.modes]
    for t in a.tree:
        rev = overhead._rev(t)
        runs += [(f"{m}@{rev}", m, os.path.abspath(t)) for m in a.modes if m != "floor"]
    if os.geteuid() != 0:
        print("prog_cost: needs root (bpf_stats_enabled, loading programs)", file=sys.stderr)
        return 1
    with open(STATS) as f:
        was = f.read().strip()
    rows: Dict[str, List[Dict[str, dict]]] = {}
    load0 = os.getloadavg()
    try:
        with open(STATS, "w") as f:
            f.write("1")
        with tempfile.TemporaryDirectory() as d:
            exe = overhead.build(d)
            for _ in range(a.reps):
                for name, mode, tree in runs:
                    rows.setdefault(name, []).append(run_mode(mode, exe, a.iterations, tree))
    finally:
        with open(STATS, "w") as f:
            f.write(was)
    load1 = os.getloadavg()
    head = (f"prog_cost: sysloop {a.iterations:,} iterations ({loop_calls(a.iterations):,} "
            f"calls), {a.reps} reps alternating, bpf_stats on; {os.cpu_count()} CPUs "
            f"{os.uname().release}, load {load0[0]:.2f} before, {load1[0]:.2f} after; "
            f"{time.strftime('%Y-%m-%d %H:%M')}; this tree {overhead._rev(ROOT)}")
    print("\n".join([head] + summarize(rows, a.iterations)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"head": head, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
