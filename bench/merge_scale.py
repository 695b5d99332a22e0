"""Benchmark: merge and analyze the traces of a large job (issue 15: at most 10 s for 16 nodes x
8 ranks x 150 threads on the 2-core VM).

Usage: python bench/merge_scale.py [--nodes 16] [--ranks 8] [--threads 150] [--rate 10]
                                   [--duration 5] [--runs 5] [--keep DIR]

The synthetic set is one trace per node (gzip, as attach writes them), each recorded over
``--duration`` s with the strace and proc backends, the node's clock off by 13 ms per node:
- every rank (the same pids on every node) has 150 threads, each sampled from /proc ``--rate``
  times a second (state, wchan, syscall line; 10, attach's default, makes 960,000 samples): a main thread blocked in a futex (a collective),
  a helper thread exchanging a 30-byte keep-alive every 0.5 s with the same rank of the next
  node (a TCP connection seen at both ends: what the clock offsets are estimated from), and
  148 pool threads parked in futexes; each process has ~40 fds (files, pipes, eventfds, the
  TCP connections of the ring);
- one rank (node 11, local rank 5) stopped: its main thread reads a pipe nobody writes;
- node 0's trace holds an NCCL RAS answer naming all ranks by host and pid, that rank one
  AllReduce behind.
Measured: ``analyze_merged`` (reading every trace twice: once for the clocks, once for the
events; naming; rewriting; the analysis; the report), wall time per run, median of ``--runs``
(the machine is shared: the spread is printed too). Generation is not timed. The report is
checked: the straggler must be the root cause and the clock offsets recovered within 1 ms.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import List

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tracer import events as ev  # noqa: E402
from tracer.load.merged import analyze_merged  # noqa: E402
from tracer.tracefile.format import TraceWriter, make_header  # noqa: E402
from tracer.tracefile.nodes.merge import ID_STRIDE  # noqa: E402

T0 = 1_800_000_000.0
SKEW = 0.013                   # node n's clock is n * SKEW ahead of node 0's
LATE = (11, 5)                 # (node, local rank) that stopped
KEEPALIVE = 30


def addr(n: int) -> str:
    return f"10.0.{n}.1"


def ring(n: int, r: int, nodes: int) -> tuple:
    """Rank r's keep-alive connections: to node n+1 (it sends), from node n-1 (it answers)."""
    nxt, prv = (n + 1) % nodes, (n - 1) % nodes
    out = f"TCP:[{addr(n)}:{40000 + r}->{addr(nxt)}:{29600 + r}]"
    back = f"TCP:[{addr(n)}:{29600 + r}->{addr(prv)}:{40000 + r}]"
    return out, back


def node_events(n: int, nodes: int, ranks: int, threads: int, rate: float,
                duration: float) -> tuple:
    skew = n * SKEW
    start, end = T0 + skew, T0 + skew + duration
    infos: List[ev.ProcessInfo] = []
    evs: List[ev.Event] = []
    for r in range(ranks):
        pid = 1000 + 200 * r
        tids = list(range(pid, pid + threads))
        out, back = ring(n, r, nodes)
        fds = [ev.FdInfo(0, "null", "/dev/null", "r"), ev.FdInfo(1, "pipe", f"pipe:[{9000+r}]", "w"),
               ev.FdInfo(2, "pipe", f"pipe:[{9100+r}]", "w"),
               ev.FdInfo(3, "pipe", f"pipe:[{9200+r}]", "r"),
               ev.FdInfo(5, "tcp", out, "rw"), ev.FdInfo(6, "tcp", back, "rw")]
        fds += [ev.FdInfo(10 + i, "file", f"/data/shard-{r}-{i}.bin", "r", 0) for i in range(30)]
        fds += [ev.FdInfo(50 + i, "eventfd", f"eventfd:[{r * 10 + i}]", "rw") for i in range(4)]
        infos.append(ev.ProcessInfo(ts=start, pid=pid, ppid=1, comm="python3",
                                    cmdline=["python3", "train.py", f"--local-rank={r}"],
                                    threads={t: ("python3" if t == pid else f"pt_thr{t - pid}")
                                             for t in tids}, fds=fds, state="S",
                                    environ_rank=f"RANK={n * ranks + r} LOCAL_RANK={r}"))
        late = (n, r) == LATE
        main = ev.ReadCall(ts=start + 0.01, pid=pid, tid=pid, name="read", fd=3, fd_kind="pipe",
                           fd_target=f"pipe:[{9200+r}]", ongoing=True, dur=duration) if late \
            else ev.FutexCall(ts=start + 0.01, pid=pid, tid=pid, name="futex",
                              op="WAIT_BITSET", addr=0x7f0000001000 + r, ongoing=True,
                              dur=duration)
        evs.append(main)
        for t in tids[2:]:
            evs.append(ev.FutexCall(ts=start + 0.02, pid=pid, tid=t, name="futex", op="WAIT",
                                    addr=0x7f0000100000 + t, ongoing=True, dur=duration))
        helper = pid + 1
        k = 0.0
        while k < duration - 0.3:     # keep-alives: send to next node, answer the previous one
            t = T0 + k + 0.05                                       # true time
            evs.append(ev.WriteCall(ts=t + skew, pid=pid, tid=helper, name="sendto", fd=5,
                                    fd_kind="tcp", fd_target=out, ret=KEEPALIVE,
                                    nbytes=KEEPALIVE, dur=1e-5))
            evs.append(ev.ReadCall(ts=t + skew + 4e-4, pid=pid, tid=helper, name="recvfrom",
                                   fd=5, fd_kind="tcp", fd_target=out, ret=KEEPALIVE, dur=1e-5))
            # the previous node's keep-alive arrives 0.2 ms after it was sent, answered at once
            evs.append(ev.ReadCall(ts=t + skew + 1e-4, pid=pid, tid=helper, name="recvfrom",
                                   fd=6, fd_kind="tcp", fd_target=back, ret=KEEPALIVE,
                                   dur=1e-4))
            evs.append(ev.WriteCall(ts=t + skew + 2.1e-4, pid=pid, tid=helper, name="sendto",
                                    fd=6, fd_kind="tcp", fd_target=back, ret=KEEPALIVE,
                                    nbytes=KEEPALIVE, dur=1e-5))
            evs.append(ev.PollCall(ts=t + skew + 5e-4, pid=pid, tid=helper, name="poll",
                                   timeout=0.5, nfds=2, fd_kinds=("tcp", "tcp"), ret=0,
                                   timed_out=True, dur=0.45))
            k += 0.5
        i = 0
        while i / rate < duration:
            ts = start + i / rate
            for t in tids:
                what = "0 0x3" if late and t == pid else "202 0x7f0000100000 0x80 0x0"
                evs.append(ev.ThreadSample(ts=ts, pid=pid, tid=t, comm="python3", state="S",
                                           utime=100, stime=20, wchan="futex_wait_queue",
                                           syscall=f"{what} 0x0 0x0 0x0 0x0 0x7ffd 0x7f"))
            i += 1
    if n == 0:
        evs.append(ev.NcclRasStatus(ts=end - 0.05, pid=1000, host=addr(0), port=28028,
                                    text=json.dumps(ras(nodes, ranks))))
    return start, end, infos, evs


def ras(nodes: int, ranks: int) -> dict:
    out = []
    for n in range(nodes):
        for r in range(ranks):
            out.append({"rank": n * ranks + r, "host": addr(n), "pid": 1000 + 200 * r,
                        "cuda_dev": r, "collective_counts": {
                            "AllReduce": 6 if (n, r) == LATE else 7}})
    return {"nccl_version": "2.28.9", "communicators": [
        {"hash": "0xbench", "size": nodes * ranks, "ranks": out, "missing_ranks": []}]}


def generate(d: str, nodes: int, ranks: int, threads: int, rate: float,
             duration: float) -> List[str]:
    paths = []
    for n in range(nodes):
        start, end, infos, evs = node_events(n, nodes, ranks, threads, rate, duration)
        h = make_header(backends=["strace", "proc"], source="attach",
                        targets=[i.pid for i in infos], start=start, processes=infos,
                        node={"hostname": f"node{n:02d}", "netns": 4026531840,
                              "netns_name": "", "addrs": [addr(n)]})
        path = os.path.join(d, f"node{n:02d}.htrace.gz")
        with TraceWriter(path, h) as w:
            for e in sorted(evs, key=lambda e: e.ts):
                w.write(e)
            w.close(end_ts=end)
        paths.append(path)
    return paths


def check(report, nodes: int, ranks: int) -> List[str]:
    bad = []
    late = LATE[0] * ID_STRIDE + 1000 + 200 * LATE[1]
    if nodes > LATE[0] and ranks > LATE[1] and report.root_cause.get("pid") != late:
        bad.append(f"root cause {report.root_cause} is not the late rank {late}")
    for i, n in enumerate(report.nodes or []):
        if abs(n["clock_offset"] - i * SKEW) > 1e-3:
            bad.append(f"node {n['name']} clock offset {n['clock_offset']}, not {i * SKEW}")
    return bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--threads", type=int, default=150)
    ap.add_argument("--rate", type=float, default=10.0,
                    help="/proc samples per s per thread (attach's default: 10)")
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", help="keep the traces in this directory")
    ns = ap.parse_args()
    d = ns.keep or tempfile.mkdtemp(prefix="hangtrace-merge-bench-")
    os.makedirs(d, exist_ok=True)
    try:
        t = time.perf_counter()
        paths = generate(d, ns.nodes, ns.ranks, ns.threads, ns.rate, ns.duration)
        size = sum(os.path.getsize(p) for p in paths)
        print(f"generated {ns.nodes} nodes x {ns.ranks} ranks x {ns.threads} threads, "
              f"{ns.rate:g} samples/s over {ns.duration:g} s: {size / 2**20:.1f} MiB gzip "
              f"in {time.perf_counter() - t:.1f} s", flush=True)
        walls, cpus = [], []
        for i in range(ns.runs):
            t, c = time.perf_counter(), time.process_time()
            report = analyze_merged(paths)
            walls.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
            bad = check(report, ns.nodes, ns.ranks)
            print(f"run {i + 1}: {walls[-1]:.2f} s wall, {cpus[-1]:.2f} s CPU; verdict "
                  f"{report.verdict} ({report.rule}); {len(report.processes)} processes, "
                  f"{sum(len(p.threads) for p in report.processes)} threads"
                  + ("; CHECK FAILED: " + "; ".join(bad) if bad else ""), flush=True)
        print(f"median {statistics.median(walls):.2f} s wall (min {min(walls):.2f}, max "
              f"{max(walls):.2f}), median {statistics.median(cpus):.2f} s CPU")
        print("root cause:", report.root_cause["summary"][:300])
    finally:
        if not ns.keep:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
