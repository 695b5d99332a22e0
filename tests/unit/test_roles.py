"""Roles of serving-stack processes and library helper threads (tracer/analysis/job/roles.py)."""
from __future__ import annotations

import pytest

from tracer.analysis.job.roles import helper_kind, parse_environ_rank, role_of


@pytest.mark.parametrize("cmdline, comm, kw, label", [
    (["sglang::scheduler_TP1"], "sglang::schedul", {}, "scheduler TP1"),
    (["sglang::scheduler_TP3_DP1"], "sglang::schedul", {}, "scheduler TP3 DP1"),
    (["sglang::detokenizer"], "sglang::detoken", {}, "detokenizer"),
    (["VLLM::EngineCore"], "VLLM::EngineCor", {}, "engine core"),
    (["VLLM::Worker_TP0"], "VLLM::Worker_TP", {}, "worker TP0"),
    (["VLLM::Worker_TP2_PP1"], "VLLM::Worker_TP", {}, "worker TP2 PP1"),
    (["python3", "train.py"], "python3", {"environ_rank": "RANK=3 LOCAL_RANK=1"}, "rank 3"),
    (["python3", "train.py"], "python3", {"environ_rank": "LOCAL_RANK=2"}, "rank 2"),
    (["python3", "train.py"], "python3", {"environ_rank": "5"}, "rank 5"),
    (["python3", "-m", "sglang.launch_server"], "python3", {"has_children": True}, "launcher"),
    (["python3", "x.py"], "python3", {"has_children": True, "is_root": True}, "launcher"),
    (["python3", "x.py"], "python3", {}, "other"),
    # an option value that says "launch" is not the program: a rank that forked a compiler
    (["python3", "gpu_tree.py", "--role", "rank", "--launcher-pid", "3607"], "sglang::schedul",
     {"has_children": True}, "other"),
    (["/usr/bin/vllm", "serve", "m"], "vllm", {"has_children": True}, "launcher"),
])
def test_role_of(cmdline, comm, kw, label):
    assert role_of(cmdline, comm, **kw).label == label


def test_rank_role_carries_the_number():
    r = role_of(["python3"], "python3", environ_rank="RANK=1 LOCAL_RANK=1")
    assert (r.kind, r.rank) == ("rank", 1)


@pytest.mark.parametrize("text, rank", [("RANK=3 LOCAL_RANK=1", 3), ("LOCAL_RANK=1 RANK=0", 0),
                                        ("LOCAL_RANK=4", 4), ("7", 7), ("", None), (None, None),
                                        ("WORLD_SIZE=2", None)])
def test_parse_environ_rank(text, rank):
    assert parse_environ_rank(text) == rank


@pytest.mark.parametrize("comm, helper", [
    ("cuda-EvtHandlr", True), ("cuda00005800017", True), ("pt_nccl_watchdg", True),
    ("pt_nccl_heartbt", True), ("pt_gloo_runloop", True), ("pt_tcpstore_uv", True),
    ("NCCL Proxy Serv", True), ("NCCL Service 0", True), ("ZMQbg/IO/0", True),
    ("pt_main_thread", False), ("python3", False), ("sglang::schedul", False),
])
def test_helper_threads(comm, helper):
    assert (helper_kind(comm) is not None) == helper


# Titles a target writes (issue 46 item 6): a rank is at most 10 ASCII digits (intparse.py); 5,000
# digits made int() raise "Exceeds the limit (4300 digits)" in attach, snapshot and watch.
@pytest.mark.parametrize("title,label,rank", [
    ("sglang::scheduler_TP" + "9" * 5000, "scheduler", None),
    ("VLLM::Worker_TP" + "9" * 5000, "worker", None),
    ("VLLM::Worker_TP0_DP" + "1" * 5000, "worker TP0", 0),
    ("sglang::scheduler_TP٣", "scheduler", None),          # Arabic-Indic 3: no ASCII rank
    ("sglang::scheduler_TP²", "scheduler", None),
    ("sglang::scheduler_TP-1", "scheduler", None),
    ("sglang::scheduler_TP12345678901", "scheduler", None),  # 11 digits: no rank
    ("sglang::scheduler_TP3_DP2", "scheduler TP3 DP2", 3),
])
def test_role_of_hostile_titles(title, label, rank):
    role = role_of([title], "x")
    assert (role.label, role.rank) == (label, rank)


@pytest.mark.parametrize("environ,rank", [
    ("RANK=" + "7" * 5000, None), ("RANK=²", None), ("RANK=٣", None), ("RANK=-1", None),
    ("٣", None), ("7" * 5000, None), ("RANK=3", 3),
])
def test_environ_rank_hostile(environ, rank):
    assert parse_environ_rank(environ) == rank


def test_label_ranges_hostile_numbers():
    from tracer.render.fold import label_ranges, pid_runs
    long = "worker TP" + "9" * 5000
    assert label_ranges([long, "worker TP1", "worker TP2"]) == f"{long}, worker TP1-2"
    assert label_ranges(["x٣"]) == "x٣"
    text = "pid 1, pid 2, pid " + "3" * 5000
    assert pid_runs(text) == text
    assert pid_runs("pid 1, pid 2, pid 3") == "pids 1-3"
