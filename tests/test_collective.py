"""NCCL stragglers (tracer/analysis/collective.py): the rank whose GPU is idle while a connected
rank spins on a busy GPU in the collective is the root cause; with one shared busy GPU (the gloo
picture, fixtures/expected/gpu-ranks.json) nothing is concluded. The real two-GPU recording is
replayed by test_replay.py (fixtures/expected/gpu-nccl.json)."""
from __future__ import annotations

from tracer import events as ev
from tracer.analysis.analyzer import Analyzer

T0 = 1000.0
RM_CONTROL = (3 << 30) | (0x20 << 16) | (0x46 << 8) | 0x2A


def _rank(pid, rank, local, remote):
    return ev.ProcessInfo(ts=T0, pid=pid, ppid=1, comm="python3", cmdline=["python3", "w.py"],
                          threads={pid: "python3", pid + 100: "pt_nccl_watchdg"},
                          environ_rank=f"RANK={rank}",
                          fds=[ev.FdInfo(9, "tcp", f"TCP:[{local}->{remote}]", "rw"),
                               ev.FdInfo(8, "nvidiactl", "/dev/nvidiactl", "rw")])


def _events(gpu_of_rank1: int, util_rank1: int):
    evs = [ev.IoctlCall(ts=T0 + 0.5 + i, pid=10, tid=10, name="ioctl", fd=8,
                        fd_kind="nvidiactl", fd_target="/dev/nvidiactl", ret=0, dur=0.0003,
                        request=RM_CONTROL, request_name="RM_CONTROL") for i in range(5)]
    evs += [ev.ThreadSample(ts=T0 + i, pid=10, tid=10, comm="python3", state="R",
                            utime=100 * i, stime=0, syscall="running") for i in range(6)]
    evs.append(ev.FutexCall(ts=T0 + 0.01, pid=11, tid=11, name="futex", op="WAIT_BITSET",
                            addr=0x1234, ongoing=True, dur=5.0))
    # PyTorch's NCCL watchdog of each rank wakes every 100 ms (a helper: it decides nothing)
    evs += [ev.FutexCall(ts=T0 + i * 0.1, pid=pid, tid=pid + 100, name="futex", op="WAIT_BITSET",
                         addr=0x999, timeout=-1.0, ret=-1, err="ETIMEDOUT", dur=0.1)
            for pid in (10, 11) for i in range(50)]
    for i in range(10):
        ts = T0 + i * 0.5
        if gpu_of_rank1 == 0:       # one GPU shared by both ranks, busy
            evs.append(ev.GpuSample(ts, 0, "GPU-a", 100, 1 << 30, 2 << 30, [10, 11]))
        else:
            evs.append(ev.GpuSample(ts, 0, "GPU-a", 100, 1 << 30, 2 << 30, [10]))
            evs.append(ev.GpuSample(ts, 1, "GPU-b", util_rank1, 1 << 30, 2 << 30, [11]))
    return sorted(evs, key=lambda e: e.ts)


def _report(gpu_of_rank1: int, util_rank1: int = 0):
    infos = [_rank(10, 0, "10.0.0.1:5000", "10.0.0.1:6000"),
             _rank(11, 1, "10.0.0.1:6000", "10.0.0.1:5000")]
    an = Analyzer(start=T0, backends=["strace", "proc", "nvml"], processes=infos, roots=[10, 11])
    an.feed_all(_events(gpu_of_rank1, util_rank1))
    return an.report(end=T0 + 5.0)


def test_rank_with_an_idle_gpu_is_the_straggler():
    r = _report(gpu_of_rank1=1, util_rank1=0)
    assert r.verdict == "busy-waiting" and r.rule == "collective-straggler"
    assert r.root_cause["pid"] == 11
    assert "stopped joining the collective" in r.root_cause["summary"]
    assert r.process(10).waits_on[-1]["kind"] == "collective"
    assert r.process(10).waits_on[-1]["pids"] == [11]
    assert r.process(11).rule == "stopped-joining-collective"
    assert all(w["kind"] != "collective" for w in r.process(11).waits_on)


def test_busy_peer_gpu_means_no_straggler_conclusion():
    r = _report(gpu_of_rank1=1, util_rank1=100)
    assert r.rule != "collective-straggler"


def test_one_shared_busy_gpu_is_the_gloo_picture():
    r = _report(gpu_of_rank1=0)
    assert r.rule != "collective-straggler"
    assert r.root_cause["pid"] == 10      # the rank spinning on the GPU, as in gpu-ranks
