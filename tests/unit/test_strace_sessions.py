"""strace sessions in one log (issue 20's field logs): the real lines of
tests/data/strace/field/pasted_two_p_sessions.log and h200_rm_control_p_excerpt.log, table-driven.

- a "strace: Process N detached" strace glued onto an unfinished call line is split off: the
  call is unfinished (the thread is inside it), N detached;
- the tids of a session opened by "Process P attached with K threads" (no clone records) are
  P's, at most K of them with P; unprefixed lines after a later "Process Q attached" (once the
  earlier session's processes detached) are Q's, never thread 0 of the earlier process;
- a log that names no task takes ``--pid N`` (import-strace) for its lines, and without it
  reports a thread of unknown process, never "pid 0";
- a thread attached alone (no "with K threads") is marked ``threads_partial``: no deadlock
  proof rests on a wait for "another thread" of its process.
"""
from __future__ import annotations

import io
import os

import pytest

import report_schema
from tracer.load.trace import analyze_trace
from tracer.render.console import render_report, report_console
from tracer.strace.convert import StraceConverter
from tracer.strace.importer import import_strace
from tracer.strace.parallel import classify
from tracer.strace.scan import LogScan
from tracer.tracefile.format import TraceReader

FIELD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                     "data", "strace", "field")

SESSION_1 = [
    "strace: Process 3812 attached with 3 threads",
    '[pid  3820] write(4, "TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT"..., 110592 <unfinished ...>',
    "[pid  3819] pselect6(0, NULL, NULL, NULL, {tv_sec=0, tv_nsec=737579957}, NULL "
    "<unfinished ...>",
    "[pid  3812] read(5,  <unfinished ...>",
    "[pid  3819] <... pselect6 resumed>)     = 0 (Timeout)",
    "[pid  3819] pselect6(0, NULL, NULL, NULL, {tv_sec=1, tv_nsec=0}, NULL) = 0 (Timeout)",
]
GLUED_3819 = ["[pid  3819] pselect6(0, NULL, NULL, NULL, {tv_sec=1, tv_nsec=0}, "
              "NULLstrace: Process 3812 detached",
              "strace: Process 3819 detached",
              " <detached ...>",
              "strace: Process 3820 detached"]
SESSION_2 = ["strace: Process 3818 attached",
             "futex(0x1d253d20, FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME, 0, NULL, "
             "FUTEX_BITSET_MATCH_ANYstrace: Process 3818 detached",
             " <detached ...>"]
RM_CONTROL = "ioctl(8, _IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2a, 0x20), 0x7fff56739ea0) = 0"


def _convert(lines, **kw):
    conv = StraceConverter(**kw)
    out = []
    for text in lines:
        out += conv.feed_text(text)
    out += conv.finish()
    return conv, [(e.pid, e.tid, e.name, e.ongoing) for e in out if hasattr(e, "name")]


# (lines, the calls still in flight at the end (tid, name), unparsed lines)
GLUED = [
    pytest.param(GLUED_3819, {(3819, "pselect6")}, 0, id="detach-glued-then-continuation"),
    pytest.param(GLUED_3819[:1], {(3819, "pselect6")}, 0, id="detach-glued-log-ends"),
    pytest.param(SESSION_2, {(3818, "futex")}, 0, id="unprefixed-call-glued"),
    pytest.param(SESSION_2[:2], {(3818, "futex")}, 0, id="unprefixed-glued-log-ends"),
    pytest.param(SESSION_1 + GLUED_3819 + SESSION_2,
                 {(3820, "write"), (3812, "read"), (3819, "pselect6"), (3818, "futex")}, 0,
                 id="whole-pasted-log"),
]


@pytest.mark.parametrize("lines,ongoing,unparsed", GLUED)
def test_detach_glued_to_an_unfinished_call(lines, ongoing, unparsed):
    conv, calls = _convert(lines)
    assert {(tid, name) for _, tid, name, live in calls if live} == ongoing
    assert conv.unparsed == unparsed
    assert all(tid != 0 for _, tid, _, _ in calls)      # never "thread 0"


def test_the_detached_threads_are_no_longer_traced():
    conv = StraceConverter()
    for text in SESSION_1 + GLUED_3819:
        conv.feed_text(text)
    assert conv._procs.only_alive() is None and not conv._procs._alive  # noqa: SLF001


def _facts(lines):
    scan = LogScan()
    scan.feed(("\n".join(lines) + "\n").encode())
    return scan.facts


P_WITH_2 = ["strace: Process 500 attached with 2 threads", "strace: Process 600 attached",
            "[pid   501] read(3, ", "[pid   500] read(4, ", "[pid   600] read(5, "]
# (lines, tid -> pid expected, tids whose process is unknown)
MEMBERS = [
    pytest.param(SESSION_1 + GLUED_3819 + SESSION_2,
                 {3812: 3812, 3819: 3812, 3820: 3812, 3818: 3818}, set(), id="pasted-sessions"),
    pytest.param(SESSION_1[:1] + ["[pid  3820] write(4, ", "[pid  3819] pselect6(0, ",
                                  "[pid  3821] read(9, "] + GLUED_3819 + SESSION_2,
                 {3812: 3812, 3818: 3818, 3820: 3812, 3819: 3812}, {3821},
                 id="at-most-K-threads"),
    # strace -f -p A -p B (both attached before anything detached): one session of two
    # processes, no way to tell whose the threads are
    pytest.param(P_WITH_2, {500: 500, 600: 600}, {501}, id="two-targets-one-session"),
]


@pytest.mark.parametrize("lines,pid_of,alone", MEMBERS)
def test_session_membership(lines, pid_of, alone):
    who = _facts(lines).membership()
    assert {t: who.pid_of[t] for t in pid_of} == pid_of
    assert who.alone == alone


@pytest.mark.parametrize("block_split", [1, 3, 7])
def test_sessions_whatever_the_blocks(block_split):
    lines = SESSION_1 + GLUED_3819 + SESSION_2
    scan = LogScan()
    for k in range(0, len(lines), block_split):
        scan.feed(("\n".join(lines[k:k + block_split]) + "\n").encode())
    assert scan.facts.membership().pid_of == {3812: 3812, 3819: 3812, 3820: 3812, 3818: 3818}


# (lines, given --pid, the tid of unprefixed lines the first pass settles on)
UNPREFIXED = [
    pytest.param([RM_CONTROL] * 3, None, None, id="no-pid-anywhere"),
    pytest.param([RM_CONTROL] * 3, 444, 444, id="given-pid"),
    pytest.param(["strace: Process 1729 attached", RM_CONTROL], None, 1729, id="attach-line"),
    pytest.param(["strace: Process 1729 attached", RM_CONTROL], 444, 1729,
                 id="the-log-wins-over-pid"),
]


@pytest.mark.parametrize("lines,given,tid", UNPREFIXED)
def test_unprefixed_lines_take_the_given_pid_only_when_the_log_names_none(lines, given, tid):
    facts = _facts(lines)
    facts.given_pid = given
    assert facts.membership().unprefixed_tid == tid


@pytest.mark.parametrize("text", [GLUED_3819[0], SESSION_2[1]])
def test_a_line_cut_by_a_message_is_global_for_the_workers(text):
    assert classify(text)[1]


def test_rm_control_excerpt_without_and_with_pid(tmp_path):
    log = os.path.join(FIELD, "h200_rm_control_p_excerpt.log")
    out = str(tmp_path / "a.htrace")
    res = import_strace(log, out)
    assert any("give --pid" in n for n in res.notes)
    (proc,) = TraceReader(out).info.processes
    assert proc.pid_unknown
    report = analyze_trace(out)
    assert report.root_cause["pid"] is None and report.root_cause["tid"] is None
    buf = io.StringIO()
    render_report(report, report_console(buf))
    text = buf.getvalue()
    assert "give --pid" in text and "pid 0" not in text and "tid 0" not in text
    out2 = str(tmp_path / "b.htrace")
    res = import_strace(log, out2, pid=444)
    assert [p.pid for p in res.processes] == [444]
    assert not any("give --pid" in n for n in res.notes)
    report = analyze_trace(out2)
    assert (report.root_cause["pid"], report.root_cause["tid"]) == (444, 444)


def test_a_thread_attached_alone_proves_no_deadlock(tmp_path):
    log = tmp_path / "b.log"
    log.write_text("\n".join(SESSION_2) + "\n")
    out = str(tmp_path / "b.htrace")
    res = import_strace(str(log), out)
    (proc,) = res.processes
    assert proc.pid == 3818 and proc.threads_partial
    assert any("alone (no -f)" in n for n in res.notes)
    report = analyze_trace(out)
    assert str(report.verdict) == "blocked"
    assert (report.root_cause["pid"], report.root_cause["tid"]) == (3818, 3818)


def test_a_process_attached_with_its_threads_is_whole(tmp_path):
    log = tmp_path / "a.log"
    log.write_text("\n".join(SESSION_1 + GLUED_3819) + "\n")
    res = import_strace(str(log), str(tmp_path / "a.htrace"))
    (proc,) = res.processes
    assert proc.pid == 3812 and set(proc.threads) == {3812, 3819, 3820}
    assert not proc.threads_partial


def test_import_strace_cli_takes_pid(tmp_path):
    import json

    from click.testing import CliRunner

    from tracer.cli.commands import main
    log = os.path.join(FIELD, "h200_rm_control_p_excerpt.log")
    run = CliRunner().invoke(main, ["import-strace", log, "-o", str(tmp_path / "t.htrace"),
                                    "--pid", "444", "--analyze", "--json"])
    assert run.exit_code == 0, run.output
    doc = json.loads(run.stdout[run.stdout.index("{"):])
    report_schema.check(doc)
    assert (doc["root_cause"]["pid"], doc["root_cause"]["tid"]) == (444, 444)
    bad = CliRunner().invoke(main, ["import-strace", log, "--pid", "0"])
    assert bad.exit_code != 0
