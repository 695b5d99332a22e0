"""Benchmark: analysis time against the number of processes (issue 35 item 3: a fork storm of
20,000 processes analyzed in under 2 s on the 2-core VM).

Usage: python bench/process_scale.py [--procs 20000] [--runs 3] [--keep DIR] [--profile N]
                                     [--sizes 2500,5000,10000,20000]

The synthetic trace is what ``attach -b ebpf`` records of a fork storm, written with the
project's own TraceWriter and event classes (``storm_events``): a launcher (pid 1000) blocked
in ``wait4(-1)`` forks ``--procs`` workers in a tree (each worker's parent is an earlier one,
``FANOUT`` children each); every worker is announced by ``ProcessInfo`` and
``ThreadStart(new_process=True)``, makes a few calls, starts and ends a second thread (thread
churn: ``ThreadStart``, ``ThreadExit``), and all but the last ``ALIVE`` exit
(``ThreadExit`` then ``ProcessExit``); the live ones are parked in ``wait4`` on a child that
exited, or in a read. Measured: ``analyze_trace`` (read, accumulate, rules, the wait-for graph,
the report) and the console's rendering, wall and CPU per run, median of ``--runs``; with
``--sizes``, one median per size and the growth ratio between consecutive sizes (2 for linear
work). ``--profile N`` prints cProfile's N most costly functions of one run.

``--blocked threads|procs|chain --sizes 1000,2000,...`` (issue 46 item 8): an strace log
instead (``blocked_log``): a launcher (pid 1000) clones N threads (or forks N processes), each
then blocked in a futex wait without timeout, the launcher in a futex wait (threads) or
``wait4(-1)`` (processes); ``chain``: N processes in one line of descent (a tree N deep);
``import-strace`` then ``analyze`` (which also draws the console report, to /dev/null) are run
as commands, and their wall and CPU seconds and peak RSS, each also per thousand, are printed
per size; ``--verbose-report``: ``analyze -v``. ``--max-rss-mib M`` kills a command whose RSS passes M (a shared machine).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from typing import Iterator, List, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tracer import events as ev  # noqa: E402
from tracer.tracefile.format import TraceWriter, make_header  # noqa: E402

T0 = 1_800_000_000.0
ROOT = 1000
FANOUT = 4            # children per worker: a tree of depth log4(N)
ALIVE = 8             # the last ALIVE workers still run at the end
DURATION = 2.0


def worker_pid(i: int) -> int:
    """The i-th worker's pid (i from 0): pids leave room for each worker's second thread."""
    return ROOT + 2 * (i + 1)


def parent_of(i: int) -> int:
    return ROOT if i < FANOUT else worker_pid(i // FANOUT - 1)


def _worker(i: int, n: int, ts: float, step: float) -> Iterator[ev.Event]:
    """The events of worker ``i`` of ``n`` from its fork at ``ts``."""
    pid, ppid = worker_pid(i), parent_of(i)
    helper = pid + 1
    yield ev.ProcessInfo(ts=ts, pid=pid, ppid=ppid, comm="worker", cmdline=["worker", str(i)],
                         threads={pid: "worker"}, state="R", start_time=ts)
    yield ev.ThreadStart(ts=ts, pid=pid, tid=pid, parent_tid=ppid, new_process=True)
    yield ev.Syscall(ts=ts + step * 0.1, pid=pid, tid=pid, name="getpid", ret=pid, dur=1e-6)
    yield ev.ThreadStart(ts=ts + step * 0.2, pid=pid, tid=helper, parent_tid=pid)
    yield ev.WriteCall(ts=ts + step * 0.3, pid=pid, tid=helper, name="write", fd=1,
                       fd_kind="pipe", fd_target="pipe:[7]", ret=8, nbytes=8, dur=1e-6)
    yield ev.ThreadExit(ts=ts + step * 0.4, pid=pid, tid=helper)
    if i < n - ALIVE:
        yield ev.ThreadExit(ts=ts + step * 0.5, pid=pid, tid=pid)
        yield ev.ProcessExit(ts=ts + step * 0.6, pid=pid, status=0)
    elif i % 2:
        yield ev.WaitChild(ts=ts + step * 0.5, pid=pid, tid=pid, name="wait4",
                           child=worker_pid(FANOUT * (i + 1)), ongoing=True)
    else:
        yield ev.ReadCall(ts=ts + step * 0.5, pid=pid, tid=pid, name="read", fd=0,
                          fd_kind="pipe", fd_target="pipe:[8]", ongoing=True)


def storm_events(n: int) -> Tuple[List[ev.ProcessInfo], List[ev.Event]]:
    """The launcher's ProcessInfo and every event of a fork storm of ``n`` workers, in time
    order."""
    root = ev.ProcessInfo(ts=T0, pid=ROOT, ppid=1, comm="launcher", cmdline=["launcher"],
                          threads={ROOT: "launcher"}, state="S", start_time=T0 - 10)
    events: List[ev.Event] = [ev.WaitChild(ts=T0 + 0.001, pid=ROOT, tid=ROOT, name="wait4",
                                           child=-1, ongoing=True)]
    step = (DURATION - 0.1) / max(n, 1)
    for i in range(n):
        events.extend(_worker(i, n, T0 + 0.01 + i * step, step))
    events.sort(key=lambda e: e.ts)
    return [root], events


def write_storm(path: str, n: int) -> str:
    """A trace of a fork storm of ``n`` workers at ``path`` (gzip when it ends in .gz)."""
    infos, events = storm_events(n)
    header = make_header(backends=["ebpf"], source="attach", targets=[ROOT], start=T0,
                         processes=infos)
    with TraceWriter(path, header) as w:
        for e in events:
            w.write(e)
        w.close(end_ts=T0 + DURATION)
    return path


_THREAD = "CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM"
_PROCESS = "CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD"


def blocked_log(kind: str, n: int) -> str:
    """The strace -f -tt log of a launcher and ``n`` threads (kind "threads") or processes
    ("procs") each blocked in a futex wait without timeout (module doc); kind "chain": ``n``
    processes in one line of descent, each in ``wait4(-1)`` for its only child, the last in
    ``pause()`` (a tree ``n`` deep)."""
    if kind == "chain":
        return chain_log(n)
    lines, flags = [], _THREAD if kind == "threads" else _PROCESS
    for i in range(2 * n + 1):
        lines.append(_clock(i))
    for i in range(n):
        lines[i] = f"{ROOT}  {lines[i]} clone(child_stack=NULL, flags={flags}) = {ROOT + 1 + i}"
    for i in range(n):
        lines[n + i] = (f"{ROOT + 1 + i}  {lines[n + i]} futex(0x{0x7f0000000000 + 8 * i:x}, "
                        "FUTEX_WAIT_PRIVATE, 0, NULL <unfinished ...>")
    last = ("futex(0x7effff000000, FUTEX_WAIT_PRIVATE, 0, NULL" if kind == "threads"
            else "wait4(-1, ")
    lines[2 * n] = f"{ROOT}  {lines[2 * n]} {last} <unfinished ...>"
    return "\n".join(lines) + "\n"


def _clock(i: int) -> str:
    """The -tt time of the log's i-th line (10 us apart from 10:00)."""
    t = 36000 + (i + 1) * 1e-5
    return f"{int(t // 3600):02d}:{int(t % 3600 // 60):02d}:{t % 60:09.6f}"


def chain_log(n: int) -> str:
    """A chain of ``n`` processes: pid ROOT+i forks ROOT+i+1 then waits in wait4(-1) for it;
    the last one (ROOT+n-1) waits in pause()."""
    lines = []
    for i in range(n - 1):
        pid = ROOT + i
        lines.append(f"{pid}  {_clock(2 * i)} clone(child_stack=NULL, flags={_PROCESS}) = "
                     f"{pid + 1}")
        lines.append(f"{pid}  {_clock(2 * i + 1)} wait4(-1,  <unfinished ...>")
    lines.append(f"{ROOT + n - 1}  {_clock(2 * n)} pause( <unfinished ...>")
    return "\n".join(lines) + "\n"


def _timed(argv: List[str], max_rss_mib: float = 0.0) -> Tuple[float, float, float]:
    """Wall and CPU seconds and peak RSS (MiB) of a command (its exit status is not checked:
    analyze exits 4 for a deadlock). With ``max_rss_mib`` its RSS is read every 0.2 s and the
    command killed past it (a shared machine): the figures then say "killed"."""
    import signal
    import subprocess
    t = time.perf_counter()
    pid = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid
    killed = False
    while max_rss_mib:
        done, _, ru = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if _rss_mib(pid) > max_rss_mib:
            os.kill(pid, signal.SIGKILL)
            killed = True
            print(f"  killed past {max_rss_mib:.0f} MiB after {time.perf_counter() - t:.1f} s",
                  flush=True)
            max_rss_mib = 0.0
        time.sleep(0.2)
    else:
        _, _, ru = os.wait4(pid, 0)
    rss = ru.ru_maxrss / 1024
    return time.perf_counter() - t, ru.ru_utime + ru.ru_stime, -rss if killed else rss


def _rss_mib(pid: int) -> float:
    """A live process's resident set (MiB), 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def blocked_bench(kind: str, sizes: List[int], d: str, max_rss_mib: float = 0.0,
                  verbose: bool = False) -> None:
    """import-strace and analyze of ``blocked_log(kind, n)`` for each n (module doc)."""
    exe = [sys.executable, "-m", "tracer"]
    for n in sizes:
        log, trace = os.path.join(d, f"{kind}-{n}.log"), os.path.join(d, f"{kind}-{n}.htrace")
        with open(log, "w") as f:
            f.write(blocked_log(kind, n))
        iw, ic, irss = _timed(exe + ["import-strace", log, "-o", trace], max_rss_mib)
        aw, ac, arss = _timed(exe + ["analyze", trace] + (["-v"] if verbose else []),
                              max_rss_mib)
        k = n / 1000
        print(f"{n} blocked {kind}: import {iw:.2f} s wall {ic:.2f} s CPU ({ic / k:.3f} s CPU "
              f"per 1000) {irss:.0f} MiB ({irss / k:.1f} per 1000); analyze and draw"
              f"{' (-v)' if verbose else ''} "
              f"{aw:.2f} s wall {ac:.2f} s CPU ({ac / k:.3f} s CPU per 1000) {arss:.0f} MiB "
              f"({arss / k:.1f} per 1000){' KILLED' if arss < 0 or irss < 0 else ''}",
              flush=True)


def analyze_once(path: str, render: bool = True) -> Tuple[float, float, float, str]:
    """Wall and CPU seconds of ``analyze_trace(path)``, wall seconds of rendering its console
    report (0 when not ``render``), and the verdict."""
    from tracer.load.trace import analyze_trace
    from tracer.render.console import render_report, report_console
    t, c = time.perf_counter(), time.process_time()
    report = analyze_trace(path)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    t = time.perf_counter()
    if render:
        render_report(report, report_console(file=io.StringIO()))
    return wall, cpu, time.perf_counter() - t if render else 0.0, report.verdict


def measure(path: str, runs: int, render: bool) -> Tuple[float, float, float, str]:
    """Medians over ``runs`` of analyze_once's figures."""
    walls, cpus, renders, verdict = [], [], [], ""
    for _ in range(runs):
        w, c, r, verdict = analyze_once(path, render)
        walls.append(w)
        cpus.append(c)
        renders.append(r)
    return statistics.median(walls), statistics.median(cpus), statistics.median(renders), \
        verdict


def profile(path: str, top: int, render: bool) -> None:
    prof = cProfile.Profile()
    prof.runcall(analyze_once, path, render)
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(top)
    print(out.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=20000)
    ap.add_argument("--sizes", help="comma-separated process counts: one median per size")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", help="keep the traces in this directory")
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    ap.add_argument("--no-render", action="store_true", help="time the analysis alone")
    ap.add_argument("--blocked", choices=["threads", "procs", "chain"],
                    help="an strace log of N blocked threads or processes (module doc)")
    ap.add_argument("--verbose-report", action="store_true",
                    help="--blocked: analyze -v (every process and thread drawn)")
    ap.add_argument("--max-rss-mib", type=float, default=0.0,
                    help="kill a command whose RSS passes this (--blocked; a shared machine)")
    ns = ap.parse_args()
    d = ns.keep or tempfile.mkdtemp(prefix="hangtrace-procs-bench-")
    os.makedirs(d, exist_ok=True)
    if ns.blocked:
        blocked_bench(ns.blocked, [int(s) for s in (ns.sizes or "1000,2000,4000").split(",")], d,
                      ns.max_rss_mib, ns.verbose_report)
        return
    sizes = [int(s) for s in ns.sizes.split(",")] if ns.sizes else [ns.procs]
    last = None
    for n in sizes:
        path = write_storm(os.path.join(d, f"storm-{n}.htrace.gz"), n)
        if ns.profile:
            profile(path, ns.profile, not ns.no_render)
            continue
        wall, cpu, render, verdict = measure(path, ns.runs, not ns.no_render)
        growth = f", x{wall / last:.2f} the previous size" if last else ""
        drawn = "" if ns.no_render else f"; console report {render:.2f} s"
        print(f"{n} processes: analysis median {wall:.2f} s wall, {cpu:.2f} s CPU over "
              f"{ns.runs} runs{growth}{drawn}; verdict {verdict}", flush=True)
        last = wall


if __name__ == "__main__":
    main()
