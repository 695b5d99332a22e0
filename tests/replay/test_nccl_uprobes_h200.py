"""libnccl's uprobes on the real libnccl 2.28.9 torch loads, recorded on the H200
(fixtures/gpu/nccl_uprobes.sh, one rank: fixtures/gpu/README.md): the counts agree with each
other, NCCL's calls are told from the thread's own kernels, and a sync behind the thread's own
kernel is named as such."""
from __future__ import annotations

from scenarios import REPO
from tracer.load.trace import analyze_trace
from tracer.events.evidence import CudaDriverCalls
from tracer.tracefile.format import TraceReader

TRACES = REPO / "fixtures" / "gpu" / "traces"


def _calls(name: str) -> CudaDriverCalls:
    found = [e for e in TraceReader(str(TRACES / f"nccl-one-rank-{name}.ebpf.htrace.gz")).events()
             if isinstance(e, CudaDriverCalls)]
    assert len(found) == 1
    return found[0]


def test_every_step_counted_once_by_each_family():
    e = _calls("loop")
    assert e.nccl_probed and e.last_op == "AllReduce"
    assert e.collectives == e.syncs == e.kernels == 46387


def test_the_last_nccl_call_is_not_the_threads_own_work():
    e = _calls("coll-last")
    assert e.collectives == 1 and e.kernels == 1
    assert e.last_own_work is not None and e.last_collective is not None
    assert e.last_own_work < e.last_collective


def test_a_sync_behind_its_own_kernel():
    report = analyze_trace(str(TRACES / "nccl-one-rank-own-hang.ebpf.htrace.gz"))
    assert report.verdict == "busy-waiting" and report.rule == "process-thread-gpu-sync-wait"
    assert "a kernel of its own never finishes" in report.root_cause["summary"]
    assert report.root_cause["pid"] == report.root_cause["tid"]
