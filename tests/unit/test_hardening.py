"""Regression tests for issue 16's hardening items that need no live target: bounded reads
(1), refusals (2), what could not be observed (3, on synthetic traces), NaN options and the
stop flag (4), huge numbers in strace logs (5), header and row validation (6), the output
path checked before attaching (7), messages and exit statuses (8). The live ones (attach to
kthreadd, an unprivileged user, the safety of the target) are in test_safety.py."""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import resource
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import report_schema
from tracer.cli import commands as cli
from tracer import events as ev
from tracer.analysis.analyzer import Analyzer
from tracer.load.trace import analyze_trace
from tracer.errors import CorruptTrace, NotATrace
from tracer.record.stopflag import StopFlag
from tracer.report import EXIT_CODES
from tracer.tracefile.format import MAX_LINE_CHARS, TraceReader, TraceWriter, make_header
from tracer.strace.convert import StraceConverter
from tracer.strace.importer import import_strace
from cli_run import hangtrace, one_line  # noqa: E402  (tests/cli_run.py)

from cli_run import HANGTRACE  # noqa: E402
REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "strace"


def cli_run(*argv: str):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.run(list(argv))
    report_schema.check_output(argv, out.getvalue())     # a --json document: its schema
    return code, out.getvalue(), err.getvalue()


def _limit_memory() -> None:      # runs in the child: 1 GiB of address space
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _header(**over) -> dict:
    h = make_header(backends=["strace"], source="attach", targets=[10], start=100.0,
                    processes=[ev.ProcessInfo(ts=100.0, pid=10, ppid=1, comm="w",
                                              cmdline=["w"], threads={10: "w", 11: "x"})])
    h.update(over)
    return h


def _write(path: Path, header: dict, rows=()) -> Path:
    with open(path, "w") as f:
        f.write(json.dumps(header) + "\n")
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return path


# ------------------------------------------------------------------- 1: bounded reads
def test_analyze_dev_zero_is_refused_at_once() -> None:
    p = hangtrace("analyze", "/dev/zero", timeout=30, preexec_fn=_limit_memory)
    assert p.returncode == 1
    assert "not a regular file" in one_line(p.stderr)


def test_a_line_over_the_limit_is_a_corrupt_trace_in_bounded_memory(tmp_path) -> None:
    # 80 MiB of one line without a newline, compressed to a small file (like /dev/zero piped
    # through gzip): the reader stops at the limit instead of reading it all into memory.
    path = tmp_path / "long.htrace.gz"
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(b'{"magic":"hangtrace-trace"' + b" " * (80 << 20))
    p = hangtrace("analyze", str(path), preexec_fn=_limit_memory)
    assert p.returncode == 1
    assert f"line 1 is longer than {MAX_LINE_CHARS >> 20} MiB" in one_line(p.stderr)
    # an event line over the limit, after a good header
    path2 = tmp_path / "long-event.htrace.gz"
    with gzip.open(path2, "wb", compresslevel=1) as f:
        f.write(json.dumps(_header()).encode() + b"\n" + b'["sc",' + b"1" * (70 << 20))
    with pytest.raises(CorruptTrace, match="line 2 is longer than"):
        list(TraceReader(str(path2)).events())


def test_a_trace_can_be_read_from_a_pipe(tmp_path) -> None:
    src = REPO / "fixtures" / "traces" / "spin.strace.htrace.gz"
    with open(src, "rb") as f:
        p = subprocess.run(HANGTRACE + ["analyze", "/dev/stdin", "--json"], stdin=f,
                           capture_output=True, text=True, timeout=60)
    report_schema.check(json.loads(p.stdout))
    assert json.loads(p.stdout)["verdict"] == analyze_trace(str(src)).verdict, p.stderr


# ------------------------------------------------------------------- 2: refusals
@pytest.mark.parametrize("pid,words", [(1, "pid 1 is init"), (2, "is a kernel thread")])
def test_pid_1_and_kernel_threads_are_refused_without_force(pid, words) -> None:
    code, out, err = cli_run("attach", str(pid), "--duration", "0.5")
    assert code == 2 and out == ""
    assert words in one_line(err) and "--force" in err


def test_hangtrace_never_records_itself() -> None:
    code, _, err = cli_run("attach", str(os.getpid()), "-b", "proc", "-d", "0.5")
    assert code == 2 and "hangtrace itself" in one_line(err)


# ------------------------------------------------------------------- 3: not observed
def _recorded(tmp_path: Path, events, backends=("strace",)) -> Path:
    path = tmp_path / "t.htrace"
    header = _header(backends=list(backends))
    with TraceWriter(str(path), header) as w:
        for e in events:
            w.write(e)
    return path


def test_threads_never_attached_are_unknown_and_the_trace_says_why(tmp_path) -> None:
    # strace could not attach to either thread: before, strace timing made them "100% outside
    # syscalls" (busy-waiting, exit 3).
    errs = [ev.ObserveError(ts=101.0, source="strace", what="attach", pid=10, tid=t,
                            why="ptrace(PTRACE_SEIZE): Operation not permitted", denied=True)
            for t in (10, 11)]
    path = _recorded(tmp_path, errs)
    r = analyze_trace(str(path))
    assert r.verdict == "unknown" and r.exit_code == 7 == EXIT_CODES["unknown"]
    assert {t.verdict for t in r.processes[0].threads} == {"unknown"}
    assert "could not attach" in r.root_cause["summary"]
    assert any("could not attach to 2 threads of pid 10" in u for u in r.unobserved)
    code, out, _ = cli_run("analyze", str(path), "--json")
    assert code == 7 and json.loads(out)["unobserved"] == r.unobserved


def test_unreadable_proc_files_make_samples_unknown_not_idle(tmp_path) -> None:
    # proc backend alone, another user's process: stat reads (35% CPU), syscall does not.
    samples = [ev.ThreadSample(ts=100.0 + i, pid=10, tid=10, comm="w", state="R",
                               utime=35 * i, stime=0, syscall="", ticks_hz=100)
               for i in range(5)]
    err = ev.ObserveError(ts=100.0, source="proc", what="syscall", pid=10,
                          why="permission denied", denied=True)
    r = analyze_trace(str(_recorded(tmp_path, [err] + samples, backends=("proc",))))
    t = next(t for t in r.processes[0].threads if t.tid == 10)
    assert t.verdict == "unknown" and r.verdict == "unknown" and r.exit_code != 0
    assert any("CPU 35%" in e for e in t.evidence), t.evidence
    assert any("/proc/PID/task/*/syscall" in u and "permission denied" in u
               for u in r.unobserved)


def test_a_fine_looking_tree_with_an_unseen_process_is_unknown(tmp_path) -> None:
    info2 = ev.ProcessInfo(ts=100.0, pid=20, ppid=10, comm="child", cmdline=["child"],
                           threads={20: "child"})
    writes = [ev.WriteCall(ts=100.0 + i / 10, pid=10, tid=10, name="write", ret=100, dur=1e-5,
                           fd=1, fd_kind="file", fd_target="/log", nbytes=100)
              for i in range(20)]
    err = ev.ObserveError(ts=100.0, source="strace", what="attach", pid=20, tid=20,
                          why="ptrace(PTRACE_SEIZE): Operation not permitted", denied=True)
    an = Analyzer(start=100.0, backends=["strace"], processes=[_header_info(), info2],
                  roots=[10])
    for e in [err] + writes:
        an.feed(e)
    r = an.report(end=105.0)
    assert r.process(10).verdict == "progressing"
    assert r.process(20).verdict == "unknown"
    assert r.verdict == "unknown" and r.root_cause["pid"] == 20
    assert "could not be observed" in r.root_cause["summary"]


def _header_info() -> ev.ProcessInfo:
    return ev.ProcessInfo(ts=100.0, pid=10, ppid=1, comm="w", cmdline=["w"],
                          threads={10: "w"})


def test_old_traces_without_the_new_event_still_read() -> None:
    path = REPO / "fixtures" / "traces" / "py_deadlock.strace.htrace.gz"
    assert "oerr" not in TraceReader(str(path)).info.header["schema"]   # recorded before it
    r = analyze_trace(str(path))
    expected = json.loads((REPO / "fixtures" / "expected" / "py_deadlock.strace.json")
                          .read_text())
    assert r.unobserved == [] and r.verdict == expected["verdict"]


# ------------------------------------------------------------------- 4: NaN and stopping
@pytest.mark.parametrize("opt,value", [("--duration", "nan"), ("--duration", "inf"),
                                       ("--duration", "-inf"), ("--rate", "nan"),
                                       ("--rate", "inf"), ("--duration", "0.1")])
def test_non_finite_or_out_of_range_options_are_usage_errors(opt, value) -> None:
    code, out, err = cli_run("attach", "999999", opt, value)
    assert code == 2 and out == "" and opt in one_line(err)


def test_stop_flag_handler_only_records_the_signal() -> None:
    flag = StopFlag()
    flag.install()
    try:
        assert signal.getsignal(signal.SIGTERM) == flag._handler
        os.kill(os.getpid(), signal.SIGTERM)      # no exception may come out of this
        deadline = time.monotonic() + 5
        while flag.signum is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert flag.signum == signal.SIGTERM
    finally:
        flag.restore()
    assert signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None) or \
        signal.getsignal(signal.SIGTERM) != flag._handler


# ------------------------------------------------------------------- 5: huge numbers
BIG = "9" * 5000


@pytest.mark.parametrize("line", [
    f"{BIG} 1795953170.545572 getpid() = 1 <0.000011>",
    f"3817  1795953170.545572 getpid() = {BIG} <0.000011>",
    f"3817  1795953170.545572 getpid() = 0x{'f' * 5000} <0.000011>",
    f"3817  {BIG}.5 getpid() = 1 <0.000011>",
    "3817  1e999 getpid() = 1 <0.000011>",
    f"3817  1795953170.545572 getpid() = 1 <{BIG}.1>",
    f"strace: Process {BIG} attached",
    f"[pid {BIG}] 1795953170.545572 getpid() = 1",
    f"3817  1795953170.545572 --- SIGCHLD {{si_signo=SIGCHLD, si_pid={BIG}}} ---",
    f"3817  1795953170.545572 +++ exited with {BIG} +++",
    f"3817  1795953170.545572 futex(0x{'a' * 300}, FUTEX_WAIT, 0, NULL) = 0 <0.1>",
    f"3817  1795953170.545572 nanosleep({{tv_sec={BIG[:400]}, tv_nsec=0}}, NULL) = 0 <0.1>",
])
def test_a_line_with_huge_numbers_is_counted_never_fatal(line, tmp_path) -> None:
    conv = StraceConverter()
    for e in conv.feed_text(line + "\n"):
        json.dumps(ev.event_to_row(e))        # whatever it made can be written
    good = (DATA / "python_f_ttt_T_yy.log").read_text().splitlines()
    log = tmp_path / "big.log"
    log.write_text("\n".join(good[:30] + [line] + good[30:]) + "\n")
    res = import_strace(str(log), str(tmp_path / "o.htrace"))
    assert res.events > 100
    list(TraceReader(str(tmp_path / "o.htrace")).events())


# ------------------------------------------------------------------- 6: header and rows
@pytest.mark.parametrize("field,value,words", [
    ("processes", 5, "'processes'"), ("processes", [[["pi"]]], "'processes'"),
    ("version", True, "'version'"), ("schema", {"sc": 3}, "'schema'"),
    ("start", "soon", "'start'"), ("targets", [[1]], "'targets'"),
    ("options", {"capabilities": {"timestamps": "yes"}}, "capabilities"),
    ("roles", [], "'roles'"),
])
def test_a_header_with_wrong_types_is_a_corrupt_trace(tmp_path, field, value, words) -> None:
    path = _write(tmp_path / "bad.htrace", _header(**{field: value}))
    code, out, err = cli_run("analyze", str(path))
    line = one_line(err)
    assert code == 1 and out == "" and f"{path}: corrupt trace" in line and words in line


def test_rows_with_wrong_types_are_skipped_and_counted(tmp_path) -> None:
    good = ["sc", 101.0, 10, 10, "getpid", "", 10, None, 1e-6, None, None, None, False]
    rows = [good, ["sc", "x"] + good[2:], ["sc", float("nan")] + good[2:],
            ["sc", 101.0, [10]] + good[3:], ["ts", 101.0, {"a": 1}, 10, "w", "S", 0, 0],
            ["pi", 101.0, 10, 1, "w", "notalist"], good]
    path = tmp_path / "rows.htrace"
    with open(path, "w") as f:
        f.write(json.dumps(_header()) + "\n")
        for r in rows:
            f.write(json.dumps(r, allow_nan=True) + "\n")
        f.write(json.dumps(["end", 102.0, "complete", 2.0, 2]) + "\n")
    reader = TraceReader(str(path))
    events = list(reader.events())
    assert len(events) == 2 and reader.info.bad_lines == 5
    r = analyze_trace(str(path))
    assert any("5 corrupt lines" in n for n in r.notes)


def test_a_gzip_trace_cut_inside_its_header_says_so(tmp_path) -> None:
    whole = gzip.compress(json.dumps(_header()).encode() + b"\n")
    path = tmp_path / "cut.htrace.gz"
    path.write_bytes(whole[:len(whole) // 2])
    with pytest.raises(CorruptTrace, match="cut short inside its header"):
        TraceReader(str(path))
    plain = tmp_path / "cut.htrace"
    plain.write_text(json.dumps(_header())[:300])
    with pytest.raises(CorruptTrace, match="cut short inside its header"):
        TraceReader(str(plain))
    with pytest.raises(NotATrace):
        TraceReader(str(DATA / "oneproc_t.log"))


# ------------------------------------------------------------------- 7: output first
# ------------------------------------------------------------------- 8: messages, exits
@pytest.mark.parametrize("command", ["analyze", "export", "import-strace"])
def test_a_directory_is_one_line_and_exit_1(command, tmp_path) -> None:
    argv = [command, str(tmp_path)] + (["-f", "json"] if command == "export" else [])
    p = hangtrace(*argv)
    assert p.returncode == 1 and p.stdout == ""
    assert "is a directory" in one_line(p.stderr)


def test_an_unreadable_file_is_one_line_and_exit_1(tmp_path) -> None:
    path = tmp_path / "secret.htrace"
    path.write_text("x\n")
    path.chmod(0)
    os.chmod(tmp_path, 0o755)
    # root reads everything: read it as nobody (a child that drops to uid 65534)
    demote = None if os.geteuid() != 0 else (lambda: (os.setgid(65534), os.setuid(65534)))
    p = hangtrace("analyze", str(path), preexec_fn=demote, cwd="/")
    assert p.returncode == 1 and "permission denied" in one_line(p.stderr)


def test_ctrl_c_before_the_recording_is_one_line_130(monkeypatch) -> None:
    import tracer.record.session as session

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(session, "resolve_targets", interrupted)
    code, out, err = cli_run("attach", "1234")
    assert code == 130 and out == "" and one_line(err) == "hangtrace: interrupted"
    assert "Aborted" not in err


def test_unknown_has_its_own_documented_exit_status() -> None:
    assert EXIT_CODES["unknown"] == 7 and 7 not in [c for v, c in EXIT_CODES.items()
                                                    if v != "unknown"]
    readme = (REPO / "README.md").read_text()
    assert "| 7 | unknown" in readme
    code, out, _ = cli_run("--help")
    assert code == 0 and "7 unknown" in out


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o277])
def test_new_traces_are_0600_whatever_the_umask(tmp_path, umask) -> None:
    old = os.umask(umask)
    try:
        w = TraceWriter(str(tmp_path / "a.htrace.gz"), _header())
        w.close()
        import_strace(str(DATA / "oneproc_t.log"), str(tmp_path / "b.htrace.gz"))
    finally:
        os.umask(old)
    for name in ("a.htrace.gz", "b.htrace.gz"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
