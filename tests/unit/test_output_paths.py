"""Issue 46 item 10: what a saved trace says of how its recording ended, and where hangtrace's
output may go (the live counterparts: tests/live/test_output_failures.py)."""
from __future__ import annotations

import pytest

from tracer import events as ev
from tracer.cli.commands import run
from tracer.load.trace import analyze_trace, ended_early_note
from tracer.tracefile.format import TraceWriter, make_header


def _trace(path: str, reason: str) -> str:
    info = ev.ProcessInfo(ts=1.0, pid=10, ppid=1, comm="w", cmdline=["w"], threads={10: "w"})
    header = make_header(backends=["proc"], source="attach", targets=[10], start=1.0,
                         processes=[info])
    with TraceWriter(path, header) as w:
        w.write(ev.ThreadSample(ts=1.5, pid=10, tid=10, comm="w", state="S", utime=1, stime=0,
                                syscall="7 0x1 0x2 0x3e8 0 0 0 0x7ff 0x7f1", run_count=4))
        w.close(reason, end_ts=2.0)
    return path


@pytest.mark.parametrize("reason,note", [
    ("complete", None),
    ("interrupted", "recording ended early: interrupted"),
    ("targets-exited", "recording ended early: targets-exited"),
    ("error", "recording ended early: error"),
])
def test_analyze_of_a_trace_says_its_recording_ended_early(tmp_path, capsys, reason, note):
    """As attach's own report does (record/session.py: the same function words it)."""
    path = _trace(str(tmp_path / "t.htrace.gz"), reason)
    notes = analyze_trace(path).notes
    early = [n for n in notes if n.startswith("recording ended early")]
    assert early == ([note] if note else [])
    run(["analyze", path])
    out = capsys.readouterr().out
    assert (note in out) if note else ("ended early" not in out)


def test_ended_early_note_words() -> None:
    assert ended_early_note("complete") == []
    assert ended_early_note("interrupted", "SIGTERM") == ["recording ended early: interrupted "
                                                          "(SIGTERM)"]


# --------------------------------------------------------------------------- stdout closed
def test_attach_to_a_closed_stdout_is_one_line_and_no_claim(sleeper) -> None:
    """``attach -o - >&-``: fd 1 is /dev/null once Python starts; the trace must not be said to
    have gone to standard output."""
    import subprocess
    import sys
    p = subprocess.run(["bash", "-c", f'exec "$0" -m tracer attach {sleeper} -b proc -d 0.5 '
                        "-o - >&-", sys.executable], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p.stderr
    assert p.stderr.splitlines() == ["hangtrace: cannot write the trace to standard output: it "
                                     "is closed; give a file (-o FILE)"]


# --------------------------------------------------------------------------- links on the way
@pytest.fixture
def linked(tmp_path):
    """tmp/a/link -> tmp/target (an attacker's ``link -> /etc``): (tmp/a, tmp/target)."""
    (tmp_path / "a").mkdir()
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "a" / "link").symlink_to(target)
    return tmp_path / "a", target


def _hangtrace(*args, cwd=None):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "tracer", *args], capture_output=True,
                          text=True, timeout=60, cwd=cwd)


def test_refuse_links_on_the_way(linked) -> None:
    from tracer.errors import OutputError
    from tracer.outputs import refuse_links_on_the_way
    a, target = linked
    for fine in ("-", "x.htrace.gz", f"{a}/new/x", f"{a}/link", f"{target}/x", "no/such/dir/x"):
        refuse_links_on_the_way(fine)
    for bad in (f"{a}/link/x", f"{a}/link/new/x", f"{a}/link/../x", f"{a}/./link//x"):
        with pytest.raises(OutputError, match="link is a symbolic link: nothing written"):
            refuse_links_on_the_way(bad)
    with pytest.raises(OutputError):
        refuse_links_on_the_way(f"{a}/link/", last=True)


@pytest.mark.parametrize("where", ["absolute", "relative"])
def test_watch_output_dir_through_a_link_is_refused(linked, sleeper, where) -> None:
    a, target = linked
    out = f"{a}/link/x" if where == "absolute" else "link/x"
    p = _hangtrace("watch", str(sleeper), "--silent-for", "1", "--once", "--output-dir", out,
                   cwd=str(a))
    assert p.returncode == 1 and p.stdout == "", p.stderr
    assert p.stderr.splitlines() == [
        f"hangtrace: {out}: {out[:-2]} is a symbolic link: nothing written (hangtrace writes "
        "no output through a link: give the path it points to)"]
    assert list(target.iterdir()) == []


def test_files_through_a_link_are_refused(linked, sleeper, tmp_path) -> None:
    a, target = linked
    p = _hangtrace("attach", str(sleeper), "-b", "proc", "-d", "0.5",
                   "-o", f"{a}/link/t.htrace.gz")
    assert p.returncode == 1 and "link is a symbolic link" in p.stderr, p.stderr
    assert len(p.stderr.splitlines()) == 1
    trace = _trace(str(tmp_path / "t.htrace.gz"), "complete")
    p = _hangtrace("export", trace, "-f", "json", "-o", f"{a}/link/t.json")
    assert p.returncode == 1 and "link is a symbolic link" in p.stderr, p.stderr
    assert list(target.iterdir()) == []
