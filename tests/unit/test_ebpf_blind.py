"""ebpf/final.py's blind_line: a tree /proc shows running of which the kernel programs saw
nothing (no call, no switch, no exit) is said, never reported as idle in silence (issue 42:
eBPF in a pid namespace counted 0 syscalls/s of a process that sent on TCP 20 times a
second)."""
from __future__ import annotations

from tracer import events as ev
from tracer.record.backends.ebpf import layout as L
from tracer.record.backends.ebpf.final import BLIND_RUNS, blind_line


def _s(tid: int, runs: int, run_ns: int = 0) -> ev.ThreadSample:
    return ev.ThreadSample(ts=0.0, pid=10, tid=tid, comm="w", state="S", utime=0, stime=0,
                          run_ns=run_ns, run_count=runs)


FIRST = {10: _s(10, 100, 5_000_000), 11: _s(11, 7)}


def test_a_tree_that_ran_and_was_not_seen_is_said():
    last = {10: _s(10, 120, 45_000_000), 11: _s(11, 7)}
    threads = {10: L.HtThread(tgid=10), 11: L.HtThread(tgid=10)}   # filled at attach, no switch
    line = blind_line(FIRST, last, threads, counted=False)
    assert line is not None and line.startswith("eBPF saw no call, switch or exit")
    assert "(20 times on a CPU, 0.04 s of CPU)" in line and "-b proc" in line


def test_what_ebpf_saw_or_a_tree_that_did_not_run_is_not_blindness():
    ran = {10: _s(10, 120), 11: _s(11, 7)}
    switched = {10: L.HtThread(tgid=10, switches=20)}
    assert blind_line(FIRST, ran, switched, counted=False) is None      # switches counted
    assert blind_line(FIRST, ran, {}, counted=True) is None              # calls counted
    idle = {10: _s(10, 100 + BLIND_RUNS - 1), 11: _s(11, 7)}
    assert blind_line(FIRST, idle, {}, counted=False) is None            # hardly ran
    born = {12: _s(12, 50)}                                              # no first look
    assert blind_line(FIRST, born, {}, counted=False) is None
