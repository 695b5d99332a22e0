"""Live tier of issue 20's proof: each scenario of fixtures/truth/cases.py (the serving shapes,
unbuffered_logger, pool_server, feeder_blocked, watchdog_futex, stopped_child) started afresh
and attached with every backend; the live report must say what the truth says (verdict, and the
root cause by the pid and tid of the scenario's READY facts: tests/truth_check.py), as the
replay of the committed recordings does (tests/replay/test_truth_verdicts.py). four_ranks has
its own live test (test_four_ranks.py)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from scenarios import REPO, start_scenario
from truth_check import cause_named, verdict_ok

sys.path.insert(0, str(REPO / "fixtures" / "truth"))
from cases import CASES  # noqa: E402
from record import SETTLE_S, attach, truth_of  # noqa: E402

from test_attach_verdicts import BACKENDS  # noqa: E402

DURATION = 4.0
NAMES = sorted(n for n in CASES if not n.startswith("four_ranks"))
# what the live run cannot show (the replay keeps it as a strict xfail with the same reason)
CANNOT = {**{("serving_tree-warmup-slow", b): "syncs that return are seen by uprobes on libcuda "
             "only (the eBPF backend)" for b in ("strace", "proc")},
          **{(f"nccl_ranks-{s}", b): "which rank's sync waits for the other is in the libnccl "
             "and libcuda calls only (uprobes, the eBPF backend)"
             for s in ("kernel", "lock", "slow") for b in ("strace", "proc")},
          ("nccl_ranks-dead", "proc"): "/proc sampling is no tracer the scenario can see: its "
          "rank dies --hang-after (8 s) after READY, after this window",
          ("nccl_ranks-dead", "strace"): "the stand-in libcuda's spin makes no RM_CONTROL ioctl: "
          "not known to be a GPU wait",
          ("serving_tree-retry", "proc"): "calls' results are not in /proc samples: a retry loop "
          "cannot be told from a tick"}


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "auto"])
@pytest.mark.parametrize("name", NAMES)
def test_live_report_says_what_the_truth_says(name: str, backend: str, tmp_path: Path) -> None:
    if (name, backend) in CANNOT:
        pytest.skip(CANNOT[(name, backend)])
    case = CASES[name]
    trace = tmp_path / "t.htrace.gz"
    with start_scenario(case.scenario, *case.args, ready_timeout=case.ready_timeout) as sc:
        time.sleep(SETTLE_S)
        report = attach(sc.pid, backend, DURATION, trace)
        truth = truth_of(case, backend, sc.pid, sc.extra, sc.facts, report, trace)
    said = (report["verdict"], report["rule"], report["root_cause"]["summary"][:400],
            states(report))
    assert verdict_ok(truth, report["verdict"]), said
    assert cause_named(truth, report["root_cause"]), (truth["root_cause"], *said)


def states(report: dict) -> str:
    """Each process's and thread's verdict and rule, for a failure's message: what CI prints
    is all there is of a run that went wrong there."""
    return "; ".join(
        f"{p['pid']} {p['verdict']} {p['rule']} ["
        + ", ".join(f"{t['tid']} {t['verdict']} {t['rule']}" for t in p.get("threads", []))
        + "]" for p in report.get("processes", []))
