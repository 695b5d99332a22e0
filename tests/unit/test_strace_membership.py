"""Nothing invented (issue 13): lines without a pid column belong to the first traced process,
process membership the log does not show is stated (ProcessInfo.pid_unknown, the report), and
an fd the log never showed opened is named as such. Real logs recorded here (README in
tests/data/strace)."""
import json
import os

from tracer import events as ev
from tracer.load.trace import analyze_trace
from tracer.render.console import render_report
from tracer.tracefile.format import TraceReader
from tracer.strace.ff import SingleLog
from tracer.strace.importer import import_strace

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tests/
DATA = os.path.join(HERE, "data", "strace")
FIXTURES = os.path.join(HERE, "..", "fixtures", "gpu-h200")

# mt.c run twice, strace -f -tt -o LOG -p A -p B: A=13449 and B=13450 (their main threads call
# getpid), threads 13451 13452 13453 13454 13455 of either (they call only getppid)
A, B, THREADS = 13449, 13450, {13451, 13452, 13453, 13454, 13455}


def _import(tmp_path, name, log):
    out = str(tmp_path / (name + ".htrace"))
    res = import_strace(log, out)
    return res, out


def test_two_attached_processes_without_fork_records(tmp_path):
    res, out = _import(tmp_path, "pp", os.path.join(DATA, "attach_pp_o_tt.log"))
    procs = {p.pid: p for p in TraceReader(out).info.processes}
    assert procs[A].threads.keys() == {A} and procs[B].threads.keys() == {B}
    alone = {pid for pid, p in procs.items() if p.pid_unknown}
    assert alone == THREADS & set(procs) and len(alone) >= 4
    assert all(list(procs[t].threads) == [t] for t in alone)
    assert any("does not show which process" in n for n in res.notes)
    report = analyze_trace(out)
    text = json.dumps(report.to_json())
    assert "does not show which process" in text                # the note
    for p in report.processes:
        assert p.pid_unknown == (p.pid in alone)
        for t in p.threads:                                       # never "process A thread T"
            assert t.tid == p.pid or p.pid not in (A, B) or t.tid not in THREADS
    lines = _render(report)
    assert f"thread {min(alone)} (its process is not shown by the recording)" in lines
    assert f"pid {A} " in lines and f"pid {min(alone)} " not in lines


def test_attach_messages_name_the_processes(tmp_path):
    """The same on stderr: "strace: Process A attached with 3 threads" names A."""
    facts = SingleLog(os.path.join(DATA, "attach_pp_stderr_tt.log")).scan()
    assert sorted(facts.attached) == [A, B]
    who = facts.membership()
    seen = {int(t) for t in facts.tid_lines}
    assert who.pid_of[A] == A and who.pid_of[B] == B
    assert who.alone == seen - {A, B} and len(who.alone) >= 4 and who.alone <= THREADS
    res, out = _import(tmp_path, "pps", os.path.join(DATA, "attach_pp_stderr_tt.log"))
    assert {p.pid for p in res.processes if p.pid_unknown} == who.alone


def test_one_attached_process_is_taken_as_one_and_says_so(tmp_path):
    """strace -f -p PID (the H200 recordings): no fork records and no second process in the
    log: the threads are taken as the smallest tid's, and the report says it assumed so."""
    res, out = _import(tmp_path, "one", os.path.join(FIXTURES, "blocking_event.strace.gz"))
    assert [p.pid for p in res.processes] == [2312] and not res.processes[0].pid_unknown
    report = analyze_trace(out)
    assert any("taken as threads of one process, 2312" in n for n in report.notes)


def test_unprefixed_lines_belong_to_the_first_process(tmp_path):
    """strace -f -tt on stderr prints no pid column while it traces one task: the start-up
    lines, and the main thread's lines once the others exited. They are 13436's (its
    set_tid_address result), never a thread 0's."""
    log = os.path.join(DATA, "stderr_f_tt_noy.log")
    who = SingleLog(log).scan().membership()
    assert who.unprefixed_tid == 13436
    res, out = _import(tmp_path, "unpref", log)
    evs = list(TraceReader(out).events())
    tids = {e.tid for e in evs if isinstance(e, ev.Syscall)}
    assert 0 not in tids and tids == {13436, 13437, 13438}
    procs = {p.pid: p for p in res.processes}
    assert set(procs) == {13436, 13438} and procs[13438].ppid == 13436
    assert set(procs[13436].threads) >= {13436, 13437}
    # the main thread's last lines (after its children are gone) are its own too
    [done] = [e for e in evs if isinstance(e, ev.WriteCall) and e.fd == 1]
    assert done.tid == 13436
    assert res.unparsed == 0          # the two lines strace cut with its attach messages


def test_a_log_without_any_pid_stays_one_thread(tmp_path):
    res, out = _import(tmp_path, "nopid", os.path.join(DATA, "oneproc_t.log"))
    assert res.capabilities["pids"] is False
    assert "no pid column" in " ".join(analyze_trace(out).notes)


def test_fd_not_seen_opened(tmp_path):
    """A write whose entry half came before the log began (strace -p mid-call): its fd is
    unknown; the evidence says so instead of "fd None"."""
    log = tmp_path / "mid.log"
    log.write_text(
        "2325  1795951378.012864 <... write resumed>) = 4096 <0.000020>\n"
        "2325  1795951378.112864 <... write resumed>) = 4096 <0.000020>\n"
        "2325  1795951378.212864 write(1, \"step\"..., 4096) = 4096 <0.000020>\n"
        "2325  1795951379.212864 write(1, \"step\"..., 4096) = 4096 <0.000020>\n")
    _, out = _import(tmp_path, "mid", str(log))
    report = analyze_trace(out)
    text = json.dumps(report.to_json())
    assert "fd None" not in text
    [t] = [t for p in report.processes for t in p.threads]
    assert any("an fd not seen opened" in e for e in t.evidence), t.evidence


def _render(report) -> str:
    from rich.console import Console
    c = Console(record=True, width=200)
    render_report(report, c, verbose=True)
    return c.export_text()
