"""Benchmark: import a realistic 1,000,000-line ``strace -f -ttt -T -yy`` log.

Usage: python bench/import_speed.py [--lines N] [--keep DIR] [--gz] [--workers N] [--sequential]

The generated log mimics an LLM server worker: a main thread writing logs and issuing
NVIDIA ioctls, a CUDA event-handler thread polling /dev/nvidia0 fds with a 100 ms timeout,
an asyncio thread in epoll_wait on TCP sockets, worker threads in futex waits (many as
unfinished/resumed pairs), socket reads, and a few threads parked forever. Prints lines/s,
wall time, CPU time of this process and of the import workers (wall is noisy on a shared
machine) and the peak RSS of this process and of the largest worker (ru_maxrss).
``--workers 1`` (or ``--sequential``) is the single-process import; the default shards a log
this large over min(2, cpus) workers (tracer/tracefile/strace_parallel.py); ``--sequential`` with the
default also runs the sharded import after the sequential one, on the same log.
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import tempfile
import time
from typing import Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tracer.tracefile.strace_import import import_strace  # noqa: E402

POLL_FDS = ", ".join(
    ["{fd=16<anon_inode:[eventfd]>, events=POLLIN}"]
    + [f"{{fd={n}</dev/nvidia0<char 195:0>>, events=POLLIN}}" for n in (18, 20, 22, 24)]
    + ["{fd=34<pipe:[7964]>, events=POLLIN}"])


def generate(path: str, n_lines: int, seed: int = 1) -> None:
    rnd = random.Random(seed)
    ts = 1795950000.0
    main, evt, aio = 1000, 1017, 1020
    workers = list(range(1001, 1017))
    parked = workers[8:]
    pending: dict = {}
    out = []
    with open(path, "w") as f:
        # threads parked in futex for the whole recording
        for t in parked:
            f.write(f"{t:<5} {ts:.6f} futex(0x7f19275f{t:04x}, FUTEX_WAIT_BITSET_PRIVATE|"
                    f"FUTEX_CLOCK_REALTIME, 0, NULL, FUTEX_BITSET_MATCH_ANY <unfinished ...>\n")
        written = len(parked)
        while written < n_lines:
            ts += rnd.random() * 0.0002
            r = rnd.random()
            d = rnd.random() * 0.0001
            if r < 0.25:
                out.append(f"{main:<5} {ts:.6f} write(1</srv/out/server.log>, \"step 3900 loss "
                           f"0.25\\n\", 21) = 21 <{d:.6f}>")
            elif r < 0.40:
                out.append(f"{main:<5} {ts:.6f} ioctl(8</dev/nvidiactl<char 195:255>>, _IOC("
                           f"_IOC_READ|_IOC_WRITE, 0x46, 0x2a, 0x20), 0x7ffed3135b90) = 0 <{d:.6f}>")
            elif r < 0.55:
                if evt in pending:
                    del pending[evt]
                    out.append(f"{evt:<5} {ts:.6f} <... poll resumed>) = 0 (Timeout) <0.100{rnd.randint(100, 999)}>")
                elif rnd.random() < 0.5:
                    pending[evt] = True
                    out.append(f"{evt:<5} {ts:.6f} poll([{POLL_FDS}], 6, 100 <unfinished ...>")
                else:
                    out.append(f"{evt:<5} {ts:.6f} poll([{POLL_FDS}], 6, 100) = 0 (Timeout) <0.100{rnd.randint(100, 999)}>")
            elif r < 0.68:
                t = rnd.choice(workers[:8])
                if t in pending:
                    del pending[t]
                    out.append(f"{t:<5} {ts:.6f} <... futex resumed>) = 0 <{d * 50:.6f}>")
                else:
                    pending[t] = True
                    out.append(f"{t:<5} {ts:.6f} futex(0x55d0c0a{t:04x}, FUTEX_WAIT_PRIVATE, 2, "
                               f"NULL <unfinished ...>")
            elif r < 0.76:
                t = rnd.choice(workers[:8])
                out.append(f"{t:<5} {ts:.6f} futex(0x55d0c0a{t:04x}, FUTEX_WAKE_PRIVATE, 1) = 1 <{d:.6f}>")
            elif r < 0.86:
                if aio in pending:
                    del pending[aio]
                    out.append(f"{aio:<5} {ts:.6f} <... epoll_wait resumed>[{{events=EPOLLIN, "
                               f"data={{u32=12, u64=12}}}}], 1024, 50) = 1 <{d * 10:.6f}>")
                else:
                    pending[aio] = True
                    out.append(f"{aio:<5} {ts:.6f} epoll_wait(6<anon_inode:[eventpoll]>,  <unfinished ...>")
            elif r < 0.95:
                out.append(f"{aio:<5} {ts:.6f} recvfrom(12<TCP:[127.0.0.1:8000->127.0.0.1:47550]>, "
                           f"\"GET /health HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n\", 65536, 0, NULL, NULL) = 38 <{d:.6f}>")
            else:
                out.append(f"{aio:<5} {ts:.6f} sendto(12<TCP:[127.0.0.1:8000->127.0.0.1:47550]>, "
                           f"\"HTTP/1.1 200 OK\\r\\n\"..., 120, 0, NULL, 0) = 120 <{d:.6f}>")
            written += 1
            if len(out) >= 10000:
                f.write("\n".join(out) + "\n")
                out.clear()
        if out:
            f.write("\n".join(out) + "\n")


def _import(log: str, out: str, workers: Optional[int]) -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t1 = time.perf_counter()
    c1 = time.process_time()
    res = import_strace(log, out, workers=workers)
    wall = time.perf_counter() - t1
    cpu = time.process_time() - c1
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    how = "sequential" if workers == 1 else f"workers={workers or 'auto'}"
    print(f"{how}: imported {res.lines:,} lines -> {res.events:,} events in {wall:.2f} s wall "
          f"({res.lines / wall:,.0f} lines/s); CPU {cpu:.2f} s here + {child_cpu:.2f} s in "
          f"workers = {cpu + child_cpu:.2f} s; unparsed {res.unparsed}; "
          f"trace {os.path.getsize(out) / 1e6:.0f} MB; peak RSS {rss:.0f} MB here, "
          f"{after.ru_maxrss / 1024:.0f} MB largest worker")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--keep", help="directory to keep the log and trace in")
    ap.add_argument("--gz", action="store_true", help="write a gzip trace (.htrace.gz)")
    ap.add_argument("--workers", type=int, default=None,
                    help="import workers (default: automatic; 1: sequential)")
    ap.add_argument("--sequential", action="store_true",
                    help="also time the sequential import first (before/after)")
    a = ap.parse_args()
    d = a.keep or tempfile.mkdtemp(prefix="hangtrace-bench-")
    os.makedirs(d, exist_ok=True)
    log = os.path.join(d, "bench.strace")
    out = os.path.join(d, "bench.htrace" + (".gz" if a.gz else ""))
    t0 = time.perf_counter()
    generate(log, a.lines)
    t1 = time.perf_counter()
    print(f"generated {a.lines:,} lines ({os.path.getsize(log) / 1e6:.0f} MB) in {t1 - t0:.1f} s")
    if a.sequential and a.workers != 1:
        _import(log, out, 1)
    _import(log, out, a.workers)
    if not a.keep:
        os.unlink(log)
        os.unlink(out)
        os.rmdir(d)


if __name__ == "__main__":
    main()
