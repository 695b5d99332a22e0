"""A flock() wait that began before the recording is resolved to its holder with every
backend (issue 30): serving_tree's jit-lock shape, where TP1's runner waits in flock on the
cache lock TP0 holds; the wait-for graph says who holds it (/proc/locks, the in-flight call's
fd from /proc/TID/syscall under eBPF)."""
from __future__ import annotations

import time

import pytest

from test_attach_verdicts import BACKENDS, attach_json

pytestmark = pytest.mark.live


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_lock_waiter_names_the_holder(scenario, backend, tmp_path):
    sc = scenario("serving_tree", "--shape", "jit-lock", ready_timeout=40)
    time.sleep(1.0)
    report = attach_json(sc.pid, backend, 2.0, str(tmp_path / "t.htrace.gz"))
    tp0 = int(sc.facts["tp0"])
    runner1 = int(sc.facts["runner1"].split(":")[1])
    edges = report["wait_graph"]["edges"]
    lock = [e for e in edges if e["src"] == f"T{runner1}"]
    assert lock and any(e["dst"] == f"P{tp0}" for e in lock), lock
    assert not any("fd None" in e.get("text", "") + e.get("label", "") for e in edges)
