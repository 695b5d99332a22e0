"""What a GPU wait is behind, from libnccl's and libcuda's uprobes (analysis/progress/
collectives.py), and which libnccl symbols each NCCL entry point of bpf/cuda_calls.bpf.c is
attached to (record/backends/ebpf/cuda_uprobes.NCCL_FAMILIES): names from NCCL 2.28's exports,
pnccl* its profiling aliases."""
from __future__ import annotations

import re

import pytest

from tracer.analysis.progress.collectives import collective_wait, own_work_stall
from tracer.events.evidence import CudaDriverCalls
from tracer.record.backends.ebpf.cuda_uprobes import NCCL_FAMILIES, NCCL_OPS


@pytest.mark.parametrize("symbol,entries", [
    ("ncclAllReduce", ["on_nccl_allreduce", "on_nccl_ret"]),
    ("pncclAllReduce", ["on_nccl_allreduce", "on_nccl_ret"]),
    ("ncclBcast", ["on_nccl_broadcast", "on_nccl_ret"]),
    ("ncclBroadcast", ["on_nccl_broadcast", "on_nccl_ret"]),
    ("ncclReduce", ["on_nccl_reduce", "on_nccl_ret"]),
    ("ncclReduceScatter", ["on_nccl_reducescatter", "on_nccl_ret"]),
    ("ncclAllGather", ["on_nccl_allgather", "on_nccl_ret"]),
    ("ncclSend", ["on_nccl_send", "on_nccl_ret"]), ("ncclRecv", ["on_nccl_recv", "on_nccl_ret"]),
    ("ncclAlltoAll", ["on_nccl_alltoall", "on_nccl_ret"]),
    ("ncclAllToAll", ["on_nccl_alltoall", "on_nccl_ret"]),
    ("ncclGroupEnd", ["on_nccl_group", "on_nccl_ret"]), ("ncclGroupStart", []),
    ("ncclCommInitRank", ["on_nccl_init", "on_nccl_ret"]),
    ("ncclCommInitRankConfig", ["on_nccl_init", "on_nccl_ret"]),
    ("ncclCommDestroy", []), ("ncclGetVersion", []), ("ncclAllReduceX", []),
])
def test_each_nccl_symbol_gets_its_entry_points(symbol, entries):
    assert sorted(fn for fn, rx, _ in NCCL_FAMILIES if re.match(rx, symbol)) == sorted(entries)


def test_op_names_follow_the_bpf_numbers():
    src = open("bpf/cuda_calls.bpf.c").read()
    numbers = dict((int(n), name) for name, n in re.findall(r"#define NCCL_(\w+) (\d+)\n", src))
    names = {"CommInitRank": "INIT", "GroupEnd": "GROUP_END"}
    for i, op in enumerate(NCCL_OPS):
        assert numbers[i] == names.get(op, op.upper()), (i, op)


def _calls(**kw):
    base = dict(ts=110.0, pid=42, tid=42, since=100.0, work_probed=True, nccl_probed=True,
                kernels=40, syncs=10, syncs_done=9, collectives=10, last_op="AllReduce")
    base.update(kw)
    return CudaDriverCalls(**base)


# times as fixtures/traces/nccl_ranks-*.ebpf recorded them, shifted to a window 100..110
@pytest.mark.parametrize("name,kw,behind", [
    ("rank 0: its sync behind the all-reduce it called",
     dict(in_sync_since=105.02, last_sync_done=104.99, last_own_work=105.01,
          last_collective=105.015), "collective"),
    ("rank 1: its sync behind a kernel of its own",
     dict(in_sync_since=105.02, last_sync_done=104.99, last_own_work=105.01,
          last_collective=104.98), "own"),
    ("a sync still short: nothing said", dict(in_sync_since=109.5, last_sync_done=109.4,
                                              last_own_work=109.45, last_collective=109.46), None),
    ("syncs returning: no wait", dict(last_sync_done=109.9, last_own_work=109.8,
                                      last_collective=109.85), None),
    ("queries not ready behind a collective",
     dict(queries_not_ready=500, last_collective=103.0, last_sync_done=102.0), "collective"),
    ("inside a communicator init", dict(in_nccl_since=101.0, last_op="CommInitRank",
                                        collectives=0), "collective"),
    ("libnccl not probed: cannot say", dict(nccl_probed=False, in_sync_since=105.0,
                                            last_own_work=104.9, last_sync_done=104.0), None),
    ("in a sync entered before any call seen", dict(in_sync_since=105.0, kernels=0,
                                                    collectives=0, syncs_done=0), None),
])
def test_what_a_gpu_wait_is_behind(name, kw, behind):
    e = _calls(**kw)
    got = {"collective": collective_wait(e), "own": own_work_stall(e)}
    assert not (got["collective"] and got["own"])
    if behind is None:
        assert got == {"collective": None, "own": None}, name
    else:
        assert got[behind], name


def test_the_sentences_name_the_call_and_the_times():
    e = _calls(in_sync_since=105.0, last_sync_done=104.9, last_own_work=104.95,
               last_collective=104.97)
    assert "behind ncclAllReduce called 5.0 s before the end" in collective_wait(e)
    assert "other ranks" in collective_wait(e)
    e = _calls(in_sync_since=105.0, last_sync_done=104.9, last_own_work=104.95,
               last_collective=104.0)
    assert "a kernel of its own never finishes" in own_work_stall(e)
