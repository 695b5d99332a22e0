"""Issue 43 items 1 and 3, unit: the console report of an 8-GPU-server-sized tree (a synthetic
report model shaped as tp8_server's: 802 threads) on one screen, the folding rules it shares
with ``snapshot`` (render/fold.py), and a trace cut short saying so (headline, JSON, exit)."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from tracer.render.compact import chain_lines, condensed_summary
from tracer.render.console import render_report
from tracer.render.fold import cut, fold_groups, label_ranges, number_ranges, pid_runs
from tracer.report import ProcessReport, Report, ThreadReport

REPO = Path(__file__).resolve().parents[2]
STRAGGLER, RANKS = 5, 8
PIDS = {r: 1000 + 100 * r for r in range(RANKS)}


# ---------------------------------------------------------------- fold.py

def test_ranges_and_cuts():
    assert number_ranges([5, 3, 4, 9, 11, 10]) == "3-5,9-11"
    assert number_ranges([7]) == "7" and number_ranges([]) == ""
    assert label_ranges([f"scheduler TP{r}" for r in (0, 1, 2, 3, 4, 6, 7)]) == \
        "scheduler TP0-4,6-7"
    assert label_ranges(["launcher", "rank 3", "rank 1", "detokenizer"]) == \
        "launcher, rank 1,3, detokenizer"
    assert pid_runs("writers: pid 10, pid 11, pid 12, pid 14") == "writers: pids 10-12,14"
    assert pid_runs("peer: pid 10, pid 11") == "peer: pid 10, pid 11"
    assert cut("x" * 10, 5) == "xxxx…" and cut("abc", 5) == "abc"


def test_fold_groups_keeps_fewer_than_three_apart():
    got = fold_groups(["a", "b", "a", "a", "b", "c"], key=lambda s: s)
    assert got == [["a", "a", "a"], ["b"], ["b"], ["c"]]


# ---------------------------------------------------------------- a tree of 802 threads

def _thread(tid: int, verdict: str, rule: str, current: str, stack: list, evidence: list,
            state: str = "S", parked: bool = False) -> ThreadReport:
    return ThreadReport(tid=tid, name="python3", state=state, verdict=verdict, rule=rule,
                        evidence=evidence, current=current, stack=stack, parked=parked,
                        counters={"syscalls_per_s": 0.0, "cpu_pct": 0.0})


def _scheduler(rank: int) -> ProcessReport:
    pid = PIDS[rank]
    main = _thread(pid, "blocked", "blocked-without-timeout", "futex",
                   ["Condition.wait (threading.py:327)", "Queue.get (queue.py:171)"],
                   [f"blocked in futex WAIT_BITSET on 0x55{rank}0, no timeout"])
    if rank == STRAGGLER:
        runner = _thread(pid + 1, "busy-waiting", "cpu-spin", "running",
                         ["native_spin (serving_tree.py:158)", "runner (tp8_server.py:94)"],
                         ["on CPU 98% of 5.0 s", "no syscalls", "no output"], state="R")
    else:
        runner = _thread(pid + 1, "blocked", "blocked-without-timeout", "recvfrom",
                         ["allreduce (serving_tree.py:166)", "runner (tp8_server.py:96)"],
                         [f"blocked in recvfrom(7<TCP:[127.0.0.1:{4000 + rank}->"
                          f"127.0.0.1:5000]>), no timeout"])
    store = _thread(pid + 2, "idle", "waits-for-input", "accept4",
                    ["socket.accept (socket.py:294)"], ["waits for connections in accept4"])
    dogs = [_thread(pid + 3 + i, "busy-waiting", "periodic-wakeups", "clock_nanosleep",
                    ["watchdog (serving_tree.py:365)"],
                    [f"{4 + i % 2} sleeps in 5.0 s (0.9/s)", "5 eventfd writes (1.0/s)"])
            for i in range(4)]
    pool = [_thread(pid + 7 + i, "blocked", "blocked-without-timeout", "futex",
                    ["Condition.wait (threading.py:327)"], ["parked"], parked=True)
            for i in range(93)]
    waits = [] if rank == STRAGGLER else [{"kind": "collective", "pids": [PIDS[STRAGGLER]]},
                                           {"kind": "socket", "pids": [PIDS[STRAGGLER]]}]
    verdict, rule = (("busy-waiting", "stopped-joining-collective") if rank == STRAGGLER
                     else ("blocked", "waits-in-collective"))
    return ProcessReport(
        pid=pid, ppid=900, role=f"scheduler TP{rank}", comm="python3",
        cmdline=[f"sglang::scheduler_TP{rank}", "/opt/venv/lib/python3.11/site-packages/sglang/"
                 "srt/managers/scheduler.py", "--child", "scheduler", str(rank)],
        verdict=verdict, rule=rule, evidence=[], waits_on=waits,
        threads=[main, runner, store, *dogs, *pool], counters={"syscalls_per_s": 6.0})


def tree_report() -> Report:
    others = [r for r in range(RANKS) if r != STRAGGLER]
    labels = [f"scheduler TP{r} (pid {PIDS[r]})" for r in others]
    summary = (f"scheduler TP5 (pid {PIDS[5]}) stopped joining the collective: its threads "
               f"differ from the 7 other ranks' ({', '.join(labels)}): it lacks 1 thread blocked "
               "in recvfrom on tcp; it has 1 thread spinning the others do not; it busy-waits: "
               "on CPU 98% of 5.0 s; " + "; ".join(f"{x} waits in the collective, waiting for it"
                                                   for x in labels))
    everyone = list(PIDS.values())
    launcher = ProcessReport(
        pid=900, ppid=1, role="launcher", comm="python3", cmdline=["python3", "-m",
                                                                   "sglang.launch_server"],
        verdict="blocked", rule="waits-on-peers", evidence=[
            "thread 900: reads pipe:[1]; writers: " + ", ".join(f"pid {p}" for p in everyone)],
        waits_on=[{"kind": "pipe", "pids": everyone}],
        threads=[_thread(900, "blocked", "blocked-without-timeout", "read",
                         ["launcher_main (launch_server.py:208)"], ["blocked in read"])])
    detok = ProcessReport(
        pid=901, ppid=900, role="detokenizer", comm="python3", cmdline=["sglang::detokenizer"],
        verdict="blocked", rule="waits-on-peers", evidence=[],
        waits_on=[{"kind": "socket", "pids": everyone}],
        threads=[_thread(901, "blocked", "blocked-without-timeout", "recvfrom",
                         ["detokenizer_main (detokenizer.py:130)"], ["blocked in recvfrom"])])
    schedulers = [_scheduler(r) for r in range(RANKS)]
    for s in schedulers:
        s.ppid = 900
    return Report(verdict="busy-waiting", rule="collective-straggler",
                  root_cause={"pid": PIDS[5], "tid": PIDS[5] + 1, "summary": summary},
                  processes=[launcher, detok, *schedulers],
                  window={"start": 0.0, "end": 5.0, "duration": 5.0}, backends=["strace"],
                  notes=["progress signals looked at and found still: log lines (no log file "
                         "grew); page faults; Python stacks (1 thread on a CPU sampled)"],
                  rank_stacks=[{"pids": everyone, "labels": [f"scheduler TP{r} (pid {PIDS[r]})"
                                                             for r in range(RANKS)],
                                "frames": ["Condition.wait (threading.py:327)"]}])


def rendered(report: Report, verbose: bool = False, width: int = 80) -> str:
    buf = io.StringIO()
    render_report(report, Console(file=buf, width=width, color_system=None), verbose=verbose)
    return buf.getvalue()


def test_the_tree_s_report_fits_one_screen_and_ends_with_the_verdict_and_chain():
    r = tree_report()
    assert sum(len(p.threads) for p in r.processes) == 802
    lines = rendered(r).splitlines()
    assert len(lines) <= 60, "\n".join(lines)
    assert all(len(line) <= 80 for line in lines)
    assert lines[0].startswith("hangtrace verdict: busy-waiting")
    tail = "\n".join(lines[-6:])
    assert "verdict: busy-waiting" in tail
    root = next(i for i, line in enumerate(lines) if line.startswith("root cause"))
    assert root >= len(lines) - 6 and f"pid {PIDS[5]} tid {PIDS[5] + 1}" in lines[root]
    chain = [line for line in lines[root:] if line.startswith(("chain:", "       "))]
    assert chain[-1].lstrip().startswith(f"scheduler TP5 pid {PIDS[5]} thread {PIDS[5] + 1}")
    assert any("scheduler TP0-4,6-7 → scheduler TP5" in line for line in chain)
    body = "\n".join(lines)
    assert "x7 scheduler TP0-4,6-7" in body                  # alike processes folded
    assert "x4 python3 tids" in body and "watchdog (serving_tree.py:365)" in body
    assert "native_spin (serving_tree.py:158)" in body       # the root cause's stack kept


def test_the_root_cause_names_the_waiting_ranks_once_as_a_range():
    r = tree_report()
    text = condensed_summary(r)
    assert text.count("scheduler TP0-4,6-7") == 2 and "pid 1000" not in text
    assert "scheduler TP0-4,6-7 wait in the collective, waiting for it" in text
    assert len(text) < len(r.root_cause["summary"]) / 2
    assert chain_lines(r)[0].startswith("launcher pid 900, detokenizer pid 901 → ")


def test_verbose_is_every_thread_and_json_is_unchanged():
    r = tree_report()
    before = json.dumps(r.to_json(), sort_keys=True)
    full = rendered(r, verbose=True, width=1000)
    assert full.count("watchdog (serving_tree.py:365)") == 32     # every watchdog, one by one
    assert r.root_cause["summary"] in full                         # the whole root cause
    assert json.dumps(r.to_json(), sort_keys=True) == before


# ---------------------------------------------------------------- a trace cut short

def _hangtrace(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracer", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=120)


def test_a_trace_cut_short_says_so_and_does_not_exit_0(tmp_path):
    """The demo's busy-waiting trace cut to its first 3,000 bytes (``head -c 3000``): what is
    left looks idle, which the missing end could overturn: exit 7, not 0."""
    whole = (REPO / "fixtures/traces/sglang_like.ebpf.htrace.gz").read_bytes()
    cut_trace = tmp_path / "cut.htrace.gz"
    cut_trace.write_bytes(whole[:3000])
    p = _hangtrace("analyze", str(cut_trace))
    head = p.stdout.splitlines()[0]
    assert "partial: the trace ends at 2.2 s of 5 s" in head, head
    assert p.returncode == 7, (p.returncode, head)
    doc = json.loads(_hangtrace("analyze", str(cut_trace), "--json").stdout)
    assert doc["truncated"] is True and doc["exit_code"] == 7
    assert doc["window"]["asked"] == 5.0
    assert doc["unobserved"][0].startswith("the trace ends at 2.2 s of 5 s")
    whole_doc = json.loads(_hangtrace("analyze", str(REPO / "fixtures/traces/"
                                                     "sglang_like.ebpf.htrace.gz"),
                                      "--json").stdout)
    assert whole_doc["truncated"] is False and "asked" not in whole_doc["window"]


def test_a_log_cut_mid_line_says_so(tmp_path):
    log = (REPO / "tests/data/strace/python_f_ttt_T_yy.log").read_bytes()
    cut_log = tmp_path / "cut.log"
    cut_log.write_bytes(log[:-40])                 # its last line cut after "3817  "
    p = _hangtrace("analyze", str(cut_log))
    assert "partial: the trace was cut short at 0.2 s" in p.stdout.splitlines()[0], p.stdout
    doc = json.loads(_hangtrace("analyze", str(cut_log), "--json").stdout)
    assert doc["truncated"] is True
    # what it recorded proves its verdict: the process wrote output (progress is progress)
    assert doc["verdict"] == "progressing" and p.returncode == 0
    whole = json.loads(_hangtrace("analyze", str(REPO / "tests/data/strace/"
                                                  "python_f_ttt_T_yy.log"), "--json").stdout)
    assert whole["truncated"] is False


# ---------------------------------------------------------------- alike threads, mixed verdicts

def _mixed_watchdogs(report: Report) -> Report:
    """The tree as a loaded machine records it (46.11): of each rank's four watchdogs, the
    first woke once more in the window (busy-waiting, periodic-wakeups) and the second was
    caught runnable; the other two are idle (timed-wait)."""
    for p in report.processes:
        dogs = [t for t in p.threads if t.stack[:1] == ["watchdog (serving_tree.py:365)"]]
        for i, t in enumerate(dogs):
            if i:
                t.verdict, t.rule, t.evidence = "idle", "timed-wait", ["waits in clock_nanosleep"]
            if i == 1:
                t.state = "R"
    return report


def test_alike_threads_judged_apart_by_one_window_stay_one_line():
    uniform, mixed = rendered(tree_report()).splitlines(), \
        rendered(_mixed_watchdogs(tree_report())).splitlines()
    assert len(mixed) <= len(uniform) <= 60, "\n".join(mixed)
    dog = PIDS[STRAGGLER] + 3
    line = next(x for x in mixed if "x4 python3 tids" in x)
    assert "S,R in clock_nanosleep" in line, line
    assert "idle (timed-wait)" in line, line                  # the most members' verdict
    wide = rendered(_mixed_watchdogs(tree_report()), width=200)
    assert "idle (timed-wait) x3, busy-waiting x1" in wide, wide
    # the odd one named, with its evidence, in the rows a group's evidence takes
    assert any(x.lstrip("│├└─ ").startswith(f"tid {dog} busy-waiting (periodic-wakeups): "
                                            "4 sleeps in 5.0 s") for x in mixed), "\n".join(mixed)


def test_threads_on_the_proven_path_are_never_folded():
    r = tree_report()
    straggler = next(p for p in r.processes if p.pid == PIDS[STRAGGLER])
    dogs = [t.tid for t in straggler.threads if t.stack[:1] == ["watchdog (serving_tree.py:365)"]]
    r.wait_graph = {"nodes": [{"id": f"T{dogs[2]}", "kind": "thread", "tid": dogs[2]},
                              {"id": "T900", "kind": "thread", "tid": 900}],
                    "edges": [], "proof": {"path": [{"src": "T900", "dst": f"T{dogs[2]}",
                                                     "object": "pipe"}]}}
    body = rendered(r, width=200)
    assert "x3 python3 tids" in body
    assert any(line.lstrip("│├└─ ").startswith(f"{dogs[2]} python3")
               for line in body.splitlines()), body
