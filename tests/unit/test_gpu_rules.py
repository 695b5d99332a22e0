"""GPU wait rules and NVML findings (tracer/analysis/threads/gpu.py) on small synthetic inputs;
the real H200 recordings are replayed by replay/test_expected_reports.py (fixtures/expected/gpu-*.json)."""
from __future__ import annotations

from tracer import events as ev
from tracer.analysis.accumulate.accumulator import Accumulator
from tracer.analysis.job.collective import collective_peers
from tracer.analysis.accumulate.gpu import GpuAccumulator
from tracer.analysis.threads.gpu import gpu_findings, rule_gpu_yield_wait
from tracer.analysis.threads.thread import ThreadContext

T0 = 1000.0
NV_FDS = [ev.FdInfo(3, "nvidiactl", "/dev/nvidiactl"), ev.FdInfo(4, "nvidia", "/dev/nvidia0")]


def _yield_ctx(fds, n=400, window=2.0):
    acc = Accumulator(start=T0, backends=["strace"],
                      processes=[ev.ProcessInfo(T0, pid=10, ppid=1, comm="python3",
                                                threads={10: "python3", 11: "NCCL Proxy"},
                                                fds=fds)])
    for i in range(n):
        acc.feed(ev.Syscall(T0 + i * window / n, 10, 11, "sched_yield", "", 0, None, 1e-6))
    rec = acc.finish(T0 + window)
    return ThreadContext(t=rec.threads[(10, 11)], rec=rec, proc=rec.processes[10], wait=None,
                         cpu=None)


def test_yield_loop_in_a_gpu_process_is_a_yield_sync_wait():
    v = rule_gpu_yield_wait(_yield_ctx(NV_FDS))
    assert v is not None and v.verdict == "busy-waiting" and v.rule == "gpu-yield-wait"
    assert "sched_yield 200.0/s (400 calls)" in v.evidence[0]
    assert "yield-sync wait on the GPU" in v.evidence[0]
    assert v.evidence[-1] == "no output"


def test_yield_loop_without_gpu_fds_is_left_to_the_plain_rule():
    assert rule_gpu_yield_wait(_yield_ctx([ev.FdInfo(1, "tty", "/dev/pts/0")])) is None


def test_few_yields_are_not_a_loop():
    assert rule_gpu_yield_wait(_yield_ctx(NV_FDS, n=30, window=10.0)) is None


def _samples(util, pids, n=10, gpu=0):
    acc = GpuAccumulator()
    for i in range(n):
        acc.feed(ev.GpuSample(T0 + i * 0.5, gpu, "GPU-x", util, 1 << 30, 140 << 30, pids))
    acc.feed(ev.Syscall(T0, 1, 1, "read"))   # other events are ignored
    return acc.gpus


def test_busy_gpu_without_host_progress_is_a_kernel_that_does_not_finish():
    notes = gpu_findings(_samples(100, [5]), {5: "busy-waiting"}, 8.0)
    assert len(notes) == 1
    assert notes[0].startswith("GPU 0 (used by pid 5) at 100% utilization")
    assert "with no host progress for 8 s: a kernel that does not finish" in notes[0]


def test_idle_gpu_while_the_host_waits():
    notes = gpu_findings(_samples(0, [5]), {5: "blocked"}, 8.0)
    assert "the GPU is idle while the host waits on it" in notes[0]


def test_busy_gpu_with_progress_is_only_described():
    notes = gpu_findings(_samples(98, [5]), {5: "progressing"}, 8.0)
    assert notes == ["GPU 0 (used by pid 5) at 98% utilization on average in 10 NVML samples "
                     "over 4.5 s, 1024 MiB of 143360 MiB used"]


def test_gpu_of_other_processes_is_ignored_and_hidden_pids_count():
    assert gpu_findings(_samples(100, [77]), {5: "busy-waiting"}, 8.0) == []
    assert "does not finish" in gpu_findings(_samples(100, []), {5: "busy-waiting"}, 8.0)[0]


def test_collective_peers_match_reversed_tcp_endpoints():
    a = ev.ProcessInfo(T0, pid=20, ppid=1, fds=[
        ev.FdInfo(19, "tcp", "TCP:[127.0.0.1:33245->127.0.0.1:52370]"),
        ev.FdInfo(11, "tcp", "TCPv6:[[::]:30066]")])
    b = ev.ProcessInfo(T0, pid=21, ppid=1, fds=[
        ev.FdInfo(7, "tcp", "TCP:[127.0.0.1:52370->127.0.0.1:33245]")])
    c = ev.ProcessInfo(T0, pid=22, ppid=1, fds=[
        ev.FdInfo(7, "tcp", "TCP:[127.0.0.1:1111->127.0.0.1:2222]")])
    rec = Accumulator(start=T0, processes=[a, b, c]).finish(T0 + 1)
    assert collective_peers(rec, 20) == [21]
    assert collective_peers(rec, 21) == [20]
    assert collective_peers(rec, 22) == []
