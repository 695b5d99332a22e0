"""NCCL stragglers (tracer/analysis/job/collective.py): the rank whose GPU is idle while a connected
rank spins on a busy GPU in the collective is the root cause; with one shared busy GPU (the gloo
picture, fixtures/expected/gpu-ranks.json) nothing is concluded. The real two-GPU recording is
replayed by replay/test_expected_reports.py (fixtures/expected/gpu-nccl.json)."""
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


# --------------------------------------------------------------------------- NCCL RAS, exits
from pathlib import Path  # noqa: E402

RAS_DIR = Path(__file__).resolve().parents[1] / "data" / "nccl_ras"


def _ras_event(name, fmt, pid_map):
    text = (RAS_DIR / name).read_text()
    for old, new in pid_map.items():
        text = text.replace(f"process {old} ", f"process {new} ").replace(
            f'"pid": {old},', f'"pid": {new},')
    return ev.NcclRasStatus(ts=T0 + 5.0, pid=10, host="127.0.0.1", port=28028, fmt=fmt,
                            text=text)


def _unranked(pid, ppid=1, state="S", exit_code=None):
    # no RANK in the environment: the rank comes from NCCL RAS
    return ev.ProcessInfo(ts=T0, pid=pid, ppid=ppid, comm="python3", cmdline=["python3", "w.py"],
                          threads={pid: "python3"}, state=state, exit_code=exit_code,
                          fds=[ev.FdInfo(8, "nvidiactl", "/dev/nvidiactl", "rw")])


def _spinning(pid):
    evs = [ev.IoctlCall(ts=T0 + 0.5 + i, pid=pid, tid=pid, name="ioctl", fd=8,
                        fd_kind="nvidiactl", fd_target="/dev/nvidiactl", ret=0, dur=0.0003,
                        request=RM_CONTROL, request_name="RM_CONTROL") for i in range(5)]
    evs += [ev.ThreadSample(ts=T0 + i, pid=pid, tid=pid, comm="python3", state="R",
                            utime=100 * i, stime=0, syscall="running") for i in range(6)]
    return evs


def _run(infos, evs):
    an = Analyzer(start=T0, backends=["strace", "proc"], processes=infos, roots=[1])
    an.feed_all(sorted(evs, key=lambda e: e.ts))
    return an.report(end=T0 + 5.0)


def test_both_ranks_spinning_the_one_behind_in_ras_counts_is_the_root_cause():
    # shape 1: rank 1 runs a kernel that never ends, rank 0 waits in AllReduce: both GPUs are
    # busy and both host threads spin-sync; only the job's own counts tell them apart.
    infos = [ev.ProcessInfo(ts=T0, pid=1, ppid=0, comm="python3", threads={1: "python3"}),
             _unranked(622, ppid=1), _unranked(623, ppid=1)]
    evs = _spinning(622) + _spinning(623)
    evs.append(_ras_event("shape_mismatch.json", "json", {}))
    r = _run(infos, evs)
    assert r.verdict == "busy-waiting" and r.rule == "collective-straggler"
    assert r.root_cause["pid"] == 623
    s = r.root_cause["summary"]
    assert s.startswith("rank 1 (pid 623, GPU 1) stopped joining AllReduce: it launched up to "
                        "AllReduce operation 6, rank 0 up to 7 (NCCL RAS)"), s
    assert r.process(622).role == "rank 0 (GPU 0)"
    assert any("AllReduce operations launched differ" in n for n in r.notes)


def test_a_dead_rank_that_ras_misses_is_the_root_cause():
    # shape 3: rank 1 was killed (a zombie nobody reaped); rank 0 spins in the collective.
    infos = [ev.ProcessInfo(ts=T0, pid=1, ppid=0, comm="python3", threads={1: "python3"}),
             _unranked(622, ppid=1), _unranked(623, ppid=1, state="Z", exit_code=9)]
    evs = _spinning(622) + [_ras_event("shape_dead.text", "text", {})]
    r = _run(infos, evs)
    assert r.verdict == "deadlocked" and r.rule == "dead-peer"
    assert r.root_cause["pid"] == 623
    assert "killed by SIGKILL" in r.root_cause["summary"]
    assert "NCCL RAS got no data from it" in r.root_cause["summary"]


def test_a_dead_rank_without_ras_is_the_root_cause_too():
    # the same with NCCL_RAS_ENABLE=0: the ranks carry RANK; the dead one is their sibling
    infos = [ev.ProcessInfo(ts=T0, pid=1, ppid=0, comm="python3", threads={1: "python3"}),
             _rank(622, 0, "10.0.0.1:5000", "10.0.0.1:6000"),
             _rank(623, 1, "10.0.0.1:6000", "10.0.0.1:5000")]
    infos[2].state, infos[2].exit_code, infos[2].fds = "Z", 9, []
    r = _run(infos, _spinning(622))
    assert r.verdict == "deadlocked" and r.root_cause["pid"] == 623
    assert "rank 1 (pid 623) killed by SIGKILL" in r.root_cause["summary"]
    assert "rank 0 (pid 622) spin-waits" in r.root_cause["summary"]
    assert r.process(622).verdict == "deadlocked"
