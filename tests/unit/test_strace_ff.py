"""strace -ff -o PREFIX sets (tracefile/strace_ff.py): one file per tid, merged into one
recording in time order. tests/data/strace/ff_ttt_T is ``strace -ff -ttt -T -o ff/trace ./thr``
(thr.c: a main thread 13443, a thread 13444, a fork child 13445), recorded here."""
import contextlib
import gzip
import io
import os
import shutil

import pytest
from click.testing import CliRunner

import report_schema
from tracer.cli import commands as cli
from tracer import events as ev
from tracer.cli.commands import main
from tracer.strace import ff as strace_ff
from tracer.tracefile.format import TraceReader
from tracer.strace.importer import ImportError_, import_strace

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tests/
FF = os.path.join(HERE, "data", "strace", "ff_ttt_T")
MAIN, THREAD, CHILD = 13443, 13444, 13445


def _events(path):
    return list(TraceReader(path).events())


@pytest.mark.parametrize("given", ["dir", "prefix"])
def test_ff_set_is_one_recording(tmp_path, given):
    src = FF if given == "dir" else os.path.join(FF, "trace")
    out = str(tmp_path / "ff.htrace")
    res = import_strace(src, out)
    evs = _events(out)
    calls = [e for e in evs if isinstance(e, ev.Syscall)]
    assert {e.tid for e in calls} == {MAIN, THREAD, CHILD}       # tids from the file names
    assert [e.ts for e in calls] == sorted(e.ts for e in calls)   # merged in time order
    assert res.lines == sum(1 for n in os.listdir(FF) for _ in open(os.path.join(FF, n)))
    procs = {p.pid: p for p in res.processes}
    assert set(procs) == {MAIN, CHILD} and procs[CHILD].ppid == MAIN
    assert set(procs[MAIN].threads) == {MAIN, THREAD}
    assert not any(p.pid_unknown for p in procs.values())
    # fds followed across the files: the thread's /dev/null, the fork child's inherited pipe
    writes = {(e.tid, e.fd): e.fd_kind for e in calls if isinstance(e, ev.WriteCall)}
    assert writes[(THREAD, 8)] == "null" and writes[(CHILD, 4)] == "pipe"
    assert writes[(MAIN, 20)] == "eventfd"
    assert res.capabilities == {"timestamps": True, "durations": True, "fd_paths": False,
                                "pids": True}
    assert TraceReader(out).info.header["options"]["log"] == "trace.*"


def test_ff_gzip_and_cut_files(tmp_path):
    d = tmp_path / "set"
    shutil.copytree(FF, d)
    data = (d / f"trace.{MAIN}").read_bytes()
    (d / f"trace.{MAIN}").unlink()
    (d / f"trace.{MAIN}.gz").write_bytes(gzip.compress(data))
    child = gzip.compress((d / f"trace.{CHILD}").read_bytes())
    (d / f"trace.{CHILD}").unlink()
    (d / f"trace.{CHILD}.gz").write_bytes(child[:len(child) - 12])   # cut short
    res = import_strace(str(d), str(tmp_path / "o.htrace"))
    assert res.truncated and {e.tid for e in _events(str(tmp_path / "o.htrace"))
                              if isinstance(e, ev.Syscall)} == {MAIN, THREAD, CHILD}


def test_ff_without_timestamps_is_read_by_tid_and_says_so(tmp_path):
    d = tmp_path / "nots"
    d.mkdir()
    for name in os.listdir(FF):
        lines = open(os.path.join(FF, name)).read().splitlines()
        (d / name).write_text("".join(ln.split(" ", 1)[1] + "\n" for ln in lines))
    res = import_strace(str(d / "trace"), str(tmp_path / "o.htrace"))
    assert res.capabilities["timestamps"] is False
    assert any("not merged in time order" in n for n in res.notes)
    procs = {p.pid: p for p in res.processes}
    assert procs[CHILD].ppid == MAIN                  # the parent's file first: its clone


def test_ff_time_of_day_past_midnight(tmp_path):
    """-tt times: a thread that starts after midnight sorts after the ones before it."""
    d = tmp_path / "tt"
    d.mkdir()
    (d / "t.100").write_text("23:59:59.500000 getpid() = 100\n"
                             "00:00:00.700000 getppid() = 1\n")
    (d / "t.101").write_text("00:00:00.100000 gettid() = 101\n")
    (d / "t.102").write_text("23:59:59.900000 gettid() = 102\n")
    import_strace(str(d), str(tmp_path / "o.htrace"))
    calls = [e for e in _events(str(tmp_path / "o.htrace")) if isinstance(e, ev.Syscall)]
    assert [(e.tid, e.name) for e in calls] == [(100, "getpid"), (102, "gettid"),
                                                (101, "gettid"), (100, "getppid")]
    assert calls[-1].ts - calls[0].ts == pytest.approx(1.2)


def test_ff_opens_files_only_while_their_thread_runs(tmp_path, monkeypatch):
    """Memory and open files grow with the threads alive at once, not with the set: 300
    threads that run one after the other are merged with a handful of files open."""
    d = tmp_path / "many"
    d.mkdir()
    for i in range(300):
        t = 1000 + i
        (d / f"x.{t}").write_text(f"{1.0 + i:.6f} gettid() = {t} <0.000001>\n"
                                  f"{1.5 + i:.6f} +++ exited with 0 +++\n")
    opened, peak = set(), [0]
    real = strace_ff.LogFile

    class Counting(real):
        def __init__(self, path):
            super().__init__(path)
            opened.add(id(self))
            peak[0] = max(peak[0], len(opened))

        def close(self):
            opened.discard(id(self))
            super().close()
    monkeypatch.setattr(strace_ff, "LogFile", Counting)
    res = import_strace(str(d), str(tmp_path / "o.htrace"))
    assert res.events >= 600 and peak[0] <= 3


def test_ff_errors_are_one_line(tmp_path):
    with pytest.raises(ImportError_, match="no such file"):
        import_strace(str(tmp_path / "nothing"), str(tmp_path / "o.htrace"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ImportError_, match="without strace -ff files"):
        import_strace(str(tmp_path / "empty"), str(tmp_path / "o.htrace"))
    two = tmp_path / "two"
    two.mkdir()
    (two / "a.1").write_text("1.0 getpid() = 1\n")
    (two / "b.2").write_text("1.0 getpid() = 2\n")
    with pytest.raises(ImportError_, match=r"several strace -ff sets \(a\.\*, b\.\*\)"):
        import_strace(str(two), str(tmp_path / "o.htrace"))


def test_cli_import_and_analyze_a_set(tmp_path):
    d = tmp_path / "set"
    shutil.copytree(FF, d)
    r = CliRunner().invoke(main, ["import-strace", str(d) + "/"])
    assert r.exit_code == 0, r.output
    assert os.path.exists(str(tmp_path / "set.htrace.gz"))
    r = CliRunner().invoke(main, ["analyze", "--json", str(d / "trace")])
    assert r.exit_code in (0, 3, 4, 5, 6), r.output
    assert '"pid": 13443' in r.output
    report_schema.check_output(["--json"], r.stdout)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.run(["analyze", str(tmp_path / "nothing")])     # errors become one line
    assert code == 1 and "no such file" in err.getvalue()
