"""The analyzer against the truth of the issue-20 recordings (fixtures/truth/*.json and the GPU
ones in fixtures/gpu/truth/*.json, each beside its trace): the tree's verdict is the truth's or
an acceptable one, and the root cause names the truth's thread by pid and tid.

The comparison is tests/truth_check.py's (the README of fixtures/truth says what each key
means). A recording the analyzer still gets wrong is listed in KNOWN_MISSES with the reason, as
a strict xfail: it fails the run the day it is right, so that the list is shortened.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from scenarios import REPO
from tracer.load.trace import analyze_trace
from truth_check import cause_named, verdict_ok

TRUTH = sorted((REPO / "fixtures" / "truth").glob("*.json")) + sorted(
    (REPO / "fixtures" / "gpu" / "truth").glob("*.json"))

RETRY_UNSEEN = ("a call's result (ECONNREFUSED) is not in /proc samples: the retry loop looks "
                "like a ticking thread, so TP1 is named (blocked) but not its runner")
UPROBES_ONLY = ("a warm-up that spins in cuCtxSynchronize until its GPU work is done makes no "
                "syscall and writes nothing: only uprobes on libcuda see its syncs return; "
                "without them it looks like a spin (the verdict says so)")
NCCL_UPROBES = ("which rank's sync waits for the other is in the libnccl and libcuda calls only "
                "(uprobes, the eBPF backend): the stand-in libcuda's spin makes no syscall, so "
                "both ranks look like CPU spins, and no NVML reading tells their GPUs apart")
NO_RM_CONTROL = ("the stand-in libcuda spins without the real driver's RM_CONTROL ioctls: the "
                 "surviving rank's spin is not known to be a GPU wait, so the dead rank is not "
                 "taken for the peer it waits for")
IDLE_WORKER = ("a ready server whose second rank's runner waits on its queue for work: a wait on "
               "another thread of its process, whose waker cannot be told from an idle worker's "
               "(both mains wait on their runners too): blocked, not idle")
KNOWN_MISSES = {
    **{f"nccl_ranks-{s}.{b}": NCCL_UPROBES for s in ("kernel", "lock") for b in ("strace", "proc")},
    **{f"nccl_ranks-slow.{b}": UPROBES_ONLY for b in ("strace", "proc")},
    "nccl_ranks-dead.strace": NO_RM_CONTROL,
    **{f"serving_tree-warmup-slow.{b}": UPROBES_ONLY for b in ("strace", "proc")},
    "serving_tree-retry.proc": RETRY_UNSEEN,
    **{f"serving2-idle.{b}": IDLE_WORKER for b in ("strace", "proc", "ebpf")},
}


@pytest.mark.parametrize("path", TRUTH, ids=lambda p: p.stem)
def test_verdict_and_root_cause_are_the_truths(path: Path, request) -> None:
    if path.stem in KNOWN_MISSES:
        request.applymarker(pytest.mark.xfail(reason=KNOWN_MISSES[path.stem], strict=True))
    truth = json.loads(path.read_text())
    report = analyze_trace(str(REPO / truth["trace"]))
    assert verdict_ok(truth, report.verdict), (
        report.verdict, report.rule, report.root_cause["summary"][:300])
    assert cause_named(truth, report.root_cause), (truth["root_cause"], report.root_cause)
