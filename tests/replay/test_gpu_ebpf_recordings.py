"""Replay of the GPU scenarios recorded on the lent H200 with the eBPF backend, against the
verdicts the strace recordings of the same scenarios give, and their NVIDIA decoding against
strace's, for both loaders: BCC (fixtures/gpu/record_ebpf.sh, BCC carried as a bundle ->
traces/<name>.ebpf.htrace.gz) and the CO-RE object through libbpf (fixtures/gpu/record_core.sh,
no BCC, no kernel headers -> traces/<name>.core.htrace.gz, its attach report in
fixtures/gpu/core-run/<name>.core.json). Each test is skipped while its recording is not in
the repository.

What is compared, without pids (a new recording has new ones):
- the tree verdict, rule and root-cause summary (fixtures/expected/gpu-<name>.json for the
  strace recording says the same, with its pids);
- NVIDIA decoding: the root-cause thread makes the same kinds of NVIDIA ioctls (escape and
  device) in both recordings at a similar rate, and every RM_CONTROL / RM_ALLOC the eBPF
  backend streamed has its command / class read from the caller's memory (strace prints only
  the escape and size);
- the kernel's counts agree with the calls streamed one by one (ThreadCounts.streamed is the
  number of completed events of each call in the trace).
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from tracer import events as ev
from tracer.events.counts import ThreadCounts
from tracer.load.trace import analyze_trace
from tracer.gpu.nvidia import describe_ioctl
from tracer.tracefile.format import TraceReader

TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "gpu" / "traces"
NV = ("nvidiactl", "nvidia", "nvidia-uvm")

# What the strace recordings of the same scenarios give (fixtures/expected/gpu-*.json).
EXPECTED = {
    "spin": ("busy-waiting", "process-thread-gpu-spin-wait",
             ["RM_CONTROL on /dev/nvidiactl", "spin-waits for the GPU", "no output"]),
    "blocking": ("blocked", "process-waits-on-gpu",
                 ["waits for the GPU", "polls the GPU", "blocking-sync wait on the GPU"]),
    # NCCL_RAS_ENABLE left at NCCL's default (on): the RAS thread's keep-alives, counted in
    # the kernel under ebpf, must not read as progress
    "nccl": ("busy-waiting", "collective-straggler",
             ["stopped joining AllReduce", "(NCCL RAS)", "it is blocked: futex"]),
    "nccl_kernel": ("busy-waiting", "collective-straggler",
                    ["stopped joining AllReduce", "(NCCL RAS)", "it busy-waits"]),
    "nccl_lock": ("busy-waiting", "collective-straggler",
                  ["stopped joining AllReduce", "(NCCL RAS)", "it is blocked: futex"]),
    "nccl_kill": ("deadlocked", "dead-peer",
                  ["killed by SIGKILL", "NCCL RAS got no data from it",
                   "spin-waits on GPU 0 in the collective"]),
}


CORE_RUN = TRACES.parent / "core-run"
# recording kind -> the script that makes it
KINDS = {"ebpf": "fixtures/gpu/record_ebpf.sh", "core": "fixtures/gpu/record_core.sh"}
CASES = [(name, kind) for name in sorted(EXPECTED) for kind in KINDS]


def _ebpf(name: str, kind: str = "ebpf") -> Path:
    path = TRACES / f"{name}.{kind}.htrace.gz"
    if not path.exists():
        pytest.skip(f"{path.name} not recorded yet ({KINDS[kind]})")
    return path


def _strace(name: str) -> Path:
    """The strace recording of the same run, else the committed one of an earlier run."""
    for cand in (TRACES / f"{name}.strace.htrace.gz", TRACES / f"{name}.htrace.gz"):
        if cand.exists():
            return cand
    pytest.skip(f"no strace recording of {name}")
    raise AssertionError  # pragma: no cover


def _events(path: Path) -> List[ev.Event]:
    return list(TraceReader(str(path)).events())


@pytest.mark.parametrize("name,kind", CASES)
def test_ebpf_recording_gives_the_strace_verdict(name, kind):
    verdict, rule, contains = EXPECTED[name]
    report = analyze_trace(str(_ebpf(name, kind)))
    assert (report.verdict, report.rule) == (verdict, rule), report.root_cause
    for text in contains:
        assert text in report.root_cause["summary"], report.root_cause["summary"]
    assert "ebpf" in report.backends


def _nv_calls(path: Path, tid: int) -> Tuple[Counter, List[ev.IoctlCall], float]:
    """NVIDIA ioctls of thread ``tid``: Counter of "ESCAPE on DEVICE" over every completed call
    (streamed ones plus the kernel's counts of the others), the streamed calls, the window."""
    events = _events(path)
    kinds: Counter = Counter()
    streamed = [e for e in events if isinstance(e, ev.IoctlCall) and e.tid == tid
                and not e.ongoing and e.fd_kind in NV]
    for e in streamed:
        d = describe_ioctl(e.fd_kind, e.request, e.request_name)
        kinds[f"{d.name} on {d.device}" if d else hex(e.request)] += 1
    counts = [e for e in events if isinstance(e, ThreadCounts) and e.tid == tid]
    for io in (counts[-1].ioctls if counts else []):
        if io["kind"] in NV:
            d = describe_ioctl(io["kind"], io["request"], None)
            kinds[f"{d.name} on {d.device}" if d else hex(io["request"])] += io["calls"]
    ts = [e.ts for e in events]
    return kinds, streamed, max(ts) - min(ts)


@pytest.mark.parametrize("name,kind", CASES)
def test_nvidia_decoding_matches_strace_and_reads_the_rm_command(name, kind):
    ebpf_path, strace_path = _ebpf(name, kind), _strace(name)
    tids = {p: analyze_trace(str(p)).root_cause for p in (ebpf_path, strace_path)}
    if name.startswith("nccl"):   # the root cause may be idle or dead: compare a spinning rank
        tids = {p: _spinning_rank(p) for p in tids}
    got: Dict[Path, Tuple[Counter, List[ev.IoctlCall], float]] = {
        p: _nv_calls(p, rc["tid"]) for p, rc in tids.items()}
    (e_kinds, e_streamed, e_win), (s_kinds, _, s_win) = got[ebpf_path], got[strace_path]
    assert set(e_kinds) == set(s_kinds), (e_kinds, s_kinds)
    for k in e_kinds:            # the 1 Hz heartbeat of a spin-wait: about the same rate
        e_rate, s_rate = e_kinds[k] / e_win, s_kinds[k] / s_win
        assert 0.5 <= e_rate / s_rate <= 2.0, (k, e_rate, s_rate)
    if not s_kinds:     # a thread asleep in a blocking-sync wait makes no ioctl at all
        return
    rm = [e for e in e_streamed if (e.request & 0xFF) in (0x2A, 0x2B)
          and (e.request >> 16) & 0x3FFF in (32, 48)]
    assert rm, "no RM_CONTROL/RM_ALLOC streamed"
    for e in rm:
        assert re.fullmatch(r"RM_CONTROL cmd=0x[0-9a-f]{8}|RM_ALLOC hClass=0x[0-9a-f]+",
                            e.request_name or ""), e


def _spinning_rank(path: Path) -> dict:
    report = analyze_trace(str(path))
    for p in report.processes:
        if p.rule in ("thread-gpu-spin-wait", "spins-for-a-dead-peer"):
            return {"pid": p.pid, "tid": p.pid}
    raise AssertionError("no rank spin-waits on the GPU")


@pytest.mark.parametrize("name,kind", CASES)
def test_kernel_counts_agree_with_the_calls_streamed(name, kind):
    events = _events(_ebpf(name, kind))
    last: Dict[int, ThreadCounts] = {}
    streamed: Counter = Counter()
    for e in events:
        if isinstance(e, ThreadCounts):
            last[e.tid] = e
        elif isinstance(e, ev.Syscall) and not e.ongoing:
            streamed[(e.tid, e.name)] += 1
    assert last or not streamed, "calls streamed, but no ThreadCounts"
    for tid, c in last.items():
        for call, n in c.streamed.items():
            assert streamed[(tid, call)] == n, (tid, call, n, streamed[(tid, call)])
            assert c.calls[call] >= n


def _wording(text: str) -> str:
    """A summary without its numbers (pids, addresses, rates, times differ between runs)."""
    return re.sub(r"0x[0-9a-f]+|\d+(\.\d+)?", "N", text)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_core_recording_reads_as_the_bcc_one_and_was_made_with_libbpf(name):
    """Same verdict, rule and root-cause wording as the BCC recording of the scenario, the
    same NVIDIA requests by the root-cause thread, and the attach report says libbpf loaded
    the CO-RE object (no BCC on that machine)."""
    core, bcc = _ebpf(name, "core"), _ebpf(name, "ebpf")
    a, b = analyze_trace(str(core)), analyze_trace(str(bcc))
    assert (a.verdict, a.rule) == (b.verdict, b.rule)
    assert _wording(a.root_cause["summary"]) == _wording(b.root_cause["summary"])
    ka, _, _ = _nv_calls(core, a.root_cause["tid"])
    kb, _, _ = _nv_calls(bcc, b.root_cause["tid"])
    assert set(ka) == set(kb), (ka, kb)
    report = CORE_RUN / f"{name}.core.json"
    if report.exists():
        import json
        notes = json.loads(report.read_text())["notes"]
        assert any(n.startswith("eBPF: libbpf ") and "CO-RE object" in n for n in notes), notes
