"""import_strace end to end: header, events readable by tracefile/format.py, gzip, truncation, errors."""
import os
import shutil

import pytest

from tracer import events as ev
from tracer.tracefile import format as trace
from tracer.strace.importer import ImportError_, import_strace

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tests/
FIXTURES = os.path.join(HERE, "..", "fixtures", "gpu-h200")
DATA = os.path.join(HERE, "data", "strace")


def read_all(path):
    r = trace.open_trace(path)
    return r.info, list(r.events())


@pytest.mark.parametrize("out_name", ["t.htrace", "t.htrace.gz"])
def test_import_h200_blocking(tmp_path, out_name):
    out = str(tmp_path / out_name)
    res = import_strace(os.path.join(FIXTURES, "blocking_event.strace.gz"), out)
    info, evs = read_all(out)
    assert not info.truncated and info.end is not None and info.end.events == res.events
    assert len(evs) == res.events == 78
    h = info.header
    assert h["source"] == "import-strace" and h["backends"] == ["strace-log"]
    assert h["targets"] == [2312] and h["start"] == res.start == pytest.approx(1795951378.012864)
    assert h["options"]["log"] == "blocking_event.strace.gz"
    assert h["options"]["capabilities"] == {"timestamps": True, "durations": True,
                                            "fd_paths": True, "pids": True,
                                            "one_session": True, "all_threads": True}
    assert [p.pid for p in info.processes] == [2312] and len(info.processes[0].threads) == 18
    futex = [e for e in evs if isinstance(e, ev.FutexCall) and e.tid == 2312]
    assert len(futex) == 1 and futex[0].ongoing and futex[0].dur > 5
    assert res.unparsed == 0 and not res.truncated and res.span == pytest.approx(5.94, abs=0.01)
    # rows written by the importer's fast encoder decode to equal events
    polls = [e for e in evs if isinstance(e, ev.PollCall)]
    assert isinstance(polls[0].fd_kinds, tuple) and "nvidia" in polls[0].fd_kinds


def test_import_startup_processes_in_header(tmp_path):
    out = str(tmp_path / "s.htrace")
    res = import_strace(os.path.join(FIXTURES, "startup.strace.gz"), out)
    info, evs = read_all(out)
    procs = {p.pid: p for p in info.processes}
    assert set(procs) == {444, 460} and procs[460].ppid == 444
    assert procs[444].cmdline == ["python3", "gpu_scenarios.py", "startup", "0"]
    assert info.header["targets"] == [444]
    assert len(evs) == res.events and res.lines == 11385


def test_plain_text_log_renamed_gz_is_detected_by_magic(tmp_path):
    src = tmp_path / "log.gz"              # not gzip despite the name
    shutil.copy(os.path.join(DATA, "python_f_ttt_T_yy.log"), src)
    res = import_strace(str(src), str(tmp_path / "o.htrace"))
    assert res.events > 300 and res.unparsed == 0


def test_truncated_gzip_imports_what_is_there(tmp_path):
    data = open(os.path.join(FIXTURES, "startup.strace.gz"), "rb").read()
    cut = tmp_path / "cut.strace"
    cut.write_bytes(data[: len(data) // 2])
    res = import_strace(str(cut), str(tmp_path / "o.htrace"))
    assert res.truncated and 1000 < res.lines < 11385
    assert any("cut short" in w for w in res.warnings)
    info, evs = read_all(str(tmp_path / "o.htrace"))
    assert len(evs) == res.events and info.end.reason == "log-truncated"
    assert info.header["options"]["log_truncated"] is True


def test_no_timestamps_log(tmp_path):
    res = import_strace(os.path.join(DATA, "sh_f_plain.log"), str(tmp_path / "o.htrace"))
    assert res.capabilities["timestamps"] is False
    assert any("no timestamps" in w for w in res.warnings)


def test_errors_are_one_line(tmp_path):
    with pytest.raises(ImportError_, match="no such file"):
        import_strace(str(tmp_path / "missing.log"), str(tmp_path / "o.htrace"))
    with pytest.raises(ImportError_, match="is a directory"):
        import_strace(str(tmp_path), str(tmp_path / "o.htrace"))
    binary = tmp_path / "bin.log"
    binary.write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    with pytest.raises(ImportError_, match="binary"):
        import_strace(str(binary), str(tmp_path / "o.htrace"))
    text = tmp_path / "notes.txt"
    text.write_text("hello\nthis is not strace\n")
    with pytest.raises(ImportError_, match="does not look like strace"):
        import_strace(str(text), str(tmp_path / "o.htrace"))
    empty = tmp_path / "empty.log"
    empty.write_text("")
    with pytest.raises(ImportError_, match="empty"):
        import_strace(str(empty), str(tmp_path / "o.htrace"))
    if os.geteuid() != 0:
        locked = tmp_path / "locked.log"
        locked.write_text("1 1.0 getpid() = 1\n")
        locked.chmod(0)
        with pytest.raises(ImportError_, match="permission denied"):
            import_strace(str(locked), str(tmp_path / "o.htrace"))
    # no temp files left behind by failed or successful imports
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".hangtrace-import-")]


def test_gzip_output_compress_flag(tmp_path):
    out = str(tmp_path / "o.htrace")
    import_strace(os.path.join(DATA, "c_signals_killed.log"), out, compress=True)
    assert open(out, "rb").read(2) == b"\x1f\x8b"
    info, evs = read_all(out)
    assert any(isinstance(e, ev.ProcessExit) and e.core_dumped for e in evs)
