"""Safe outputs (issue 22 item 1): hangtrace runs as root and writes at names others can
predict, so no output follows a link, truncates what is there, or is readable by others.

tracer/outputs.py itself, then every command that writes a file without a live target
(import-strace -o, export -o, merge -o, watch's files, the default names); the recordings
(attach -o, the default name in the working directory, SIGKILL mid-recording) are in
tests/live/test_safe_outputs.py."""
from __future__ import annotations

import gzip
import json
import os
import stat
from pathlib import Path

import pytest

from tracer import outputs
from tracer.errors import OutputError
from tracer.tracefile.format import TraceReader, create_output, default_trace_path
from cli_run import hangtrace, one_line  # noqa: E402  (tests/cli_run.py)

REPO = Path(__file__).resolve().parents[2]
LOG = REPO / "tests" / "data" / "strace" / "python_f_ttt_T_yy.log"
TRACE = REPO / "fixtures" / "traces" / "spin.strace.htrace.gz"
SECRET = b"root's precious file\n"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def planted(tmp_path):
    """A file somebody wants clobbered, and a function planting a link to it at a path."""
    victim = tmp_path / "victim"
    victim.write_bytes(SECRET)
    victim.chmod(0o644)

    def plant(path: Path) -> Path:
        path.symlink_to(victim)
        return path
    plant.victim = victim  # type: ignore[attr-defined]
    return plant


def _untouched(victim: Path) -> None:
    assert victim.read_bytes() == SECRET and _mode(victim) == 0o644


# ----------------------------------------------------------------- the module
@pytest.mark.parametrize("kind", ["link", "fifo", "dir", "dangling"])
def test_what_is_not_a_regular_file_is_refused_with_one_line(tmp_path, planted, kind) -> None:
    path = tmp_path / "out.json"
    if kind == "link":
        planted(path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        path.mkdir()
    else:
        path.symlink_to(tmp_path / "nowhere")
    for make in (lambda: outputs.open_streamed(str(path)),
                 lambda: outputs.replacing(str(path)).__enter__(),
                 lambda: create_output(str(path))):
        with pytest.raises(OutputError) as e:
            make()
        msg = str(e.value)
        assert msg.startswith(f"{path}: is a") and "not written" in msg and "\n" not in msg
    assert not (tmp_path / "nowhere").exists()
    _untouched(planted.victim)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_device_outputs_are_refused_and_never_replaced() -> None:
    # a rename over /dev/null would replace the device node itself
    with pytest.raises(OutputError, match="/dev/null: is a device or special file"):
        outputs.replacing("/dev/null").__enter__()
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_an_existing_file_is_replaced_by_rename_never_truncated(tmp_path) -> None:
    path = tmp_path / "out.txt"
    path.write_bytes(SECRET)
    os.link(path, tmp_path / "hardlink")          # another name for the same inode
    before = path.stat().st_ino
    with outputs.replacing(str(path)) as f:
        f.write("new report\n")
    assert path.read_text() == "new report\n" and path.stat().st_ino != before
    assert (tmp_path / "hardlink").read_bytes() == SECRET
    assert _mode(path) == 0o600
    with outputs.open_streamed(str(path)) as f:   # a streamed one is at the name at once
        assert path.stat().st_ino == os.fstat(f.fileno()).st_ino
        assert path.read_bytes() == b""
        f.write(b"x")
    assert (tmp_path / "hardlink").read_bytes() == SECRET


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path) -> None:
    path = tmp_path / "keep.json"
    path.write_text("keep")
    with pytest.raises(RuntimeError):
        with outputs.replacing(str(path)) as f:
            f.write("half")
            raise RuntimeError("the input was bad")
    assert path.read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.json"]


def test_a_full_disk_is_one_line_output_error() -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    f = outputs.guarded(open("/dev/full", "w"), "/dev/full")
    with pytest.raises(OutputError, match="^/dev/full: cannot write: No space left"):
        f.write("x" * 100000)
        f.flush()


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o277])
def test_every_kind_of_output_is_0600_whatever_the_umask(tmp_path, umask) -> None:
    old = os.umask(umask)
    try:
        with outputs.replacing(str(tmp_path / "a.txt")) as f:
            f.write("a")
        outputs.open_streamed(str(tmp_path / "b.gz")).close()
        outputs.create_fresh(str(tmp_path / "c.json"), text=True).close()
        outputs.scratch_beside(str(tmp_path / "d")).close()
        created = outputs.fresh_directory(str(tmp_path / "e"))
    finally:
        os.umask(old)
    for p in tmp_path.iterdir():
        assert _mode(p) == (0o700 if p.is_dir() else 0o600), p
    assert created == str(tmp_path / "e")


def test_fresh_names_never_replace_anything(tmp_path, planted) -> None:
    name = tmp_path / "hangtrace-42-20260101-000000.htrace.gz"
    planted(name)
    (tmp_path / "hangtrace-42-20260101-000000-2.htrace.gz").write_text("taken")
    f = create_output(outputs.FreshName(str(name)))
    f.write(b"trace")
    f.close()
    assert f.name == str(tmp_path / "hangtrace-42-20260101-000000-3.htrace.gz")
    assert Path(f.name).read_bytes() == b"trace"
    _untouched(planted.victim)
    assert isinstance(default_trace_path([42], str(tmp_path)), outputs.FreshName)
    assert outputs.fresh_directory(str(tmp_path)) == f"{tmp_path}-2"
    os.rmdir(f"{tmp_path}-2")


def test_text_outputs_survive_a_lone_surrogate(tmp_path) -> None:
    with outputs.replacing(str(tmp_path / "r.txt")) as f:
        f.write("comm \udcff\ud800 x\n")
    assert (tmp_path / "r.txt").read_text() == "comm ?? x\n"


# ----------------------------------------------------------------- the commands
def _merge_args(out: Path):
    return ("merge", str(TRACE), "-o", str(out))


COMMANDS = {
    "import-strace": lambda out: ("import-strace", str(LOG), "-o", str(out)),
    "export": lambda out: ("export", str(TRACE), "-f", "json", "-o", str(out)),
    "merge": _merge_args,
    "merge-json": lambda out: ("merge", str(TRACE), "--json", "-o", str(out)),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_link_planted_at_the_output_is_refused(tmp_path, planted, command) -> None:
    out = planted(tmp_path / "out.htrace.gz")
    p = hangtrace(*COMMANDS[command](out))
    assert p.returncode == 1
    line = one_line(p.stderr)
    assert f"{out}: is a symbolic link" in line and "not written" in line
    _untouched(planted.victim)
    assert out.is_symlink()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_outputs_of_every_command_are_0600_under_umask_022(tmp_path, command) -> None:
    out = tmp_path / "out.htrace.gz"
    out.write_text("an older file, world-readable")
    out.chmod(0o644)
    p = hangtrace(*COMMANDS[command](out), preexec_fn=lambda: os.umask(0o022))
    assert p.returncode in (0, 3), p.stderr
    assert _mode(out) == 0o600 and out.read_text("latin-1") != "an older file, world-readable"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out.htrace.gz"]   # no temp left


def test_export_of_a_bad_input_leaves_the_output_untouched(tmp_path) -> None:
    keep = tmp_path / "keep.json"
    keep.write_text("keep me")
    bad = tmp_path / "bad.htrace"
    bad.write_text('{"magic": "hangtrace-trace", "version": 1, "start": "soon"}\n')
    for trace in (bad, tmp_path / "missing.htrace"):
        p = hangtrace("export", str(trace), "-f", "json", "-o", str(keep))
        assert p.returncode == 1 and str(trace) in one_line(p.stderr)
        assert keep.read_text() == "keep me"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["bad.htrace", "keep.json"]


def test_import_of_a_bad_log_leaves_the_output_untouched(tmp_path) -> None:
    keep = tmp_path / "keep.htrace.gz"
    keep.write_bytes(b"keep me")
    log = tmp_path / "bin.log"
    log.write_bytes(b"\0\1\2" * 100)
    p = hangtrace("import-strace", str(log), "-o", str(keep))
    assert p.returncode == 1 and "binary data" in one_line(p.stderr)
    assert keep.read_bytes() == b"keep me"


def test_import_output_is_a_readable_trace(tmp_path) -> None:
    out = tmp_path / "t.htrace.gz"
    p = hangtrace("import-strace", str(LOG), "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert TraceReader(str(out)).info.header["source"] == "import-strace"
    with gzip.open(out) as f:
        assert json.loads(f.readline())["magic"] == "hangtrace-trace"


def test_watch_files_take_fresh_names_never_a_planted_link(tmp_path, planted, monkeypatch) -> None:
    """watch's names are predictable (hangtrace-PID-TIME.*): links planted at all three
    leave the victim untouched; the capture goes to NAME-2.* instead."""
    from test_watch import PID, T0, ScriptedSampler, timeline   # tests/unit/test_watch.py
    from tracer.record import watch as watch_mod
    from tracer.record.session import Recorded
    from tracer.record.watch import Watcher, WatchOptions
    from tracer.report import Report
    monkeypatch.setattr(watch_mod.time, "strftime", lambda fmt, *a: "20260101-000000")
    base = tmp_path / f"hangtrace-{PID}-20260101-000000"
    for ext in (".htrace.gz", ".txt", ".json"):
        planted(Path(str(base) + ext))

    def recorder(roots, output):
        with create_output(output) as f:          # what session.record does with the name
            f.write(b"trace")
        report = Report(verdict="idle", rule="r", root_cause={"summary": "s"}, processes=[],
                        window={"start": T0, "end": T0 + 2, "duration": 2.0},
                        backends=["proc"], trace_path=f.name)
        return Recorded(report=report, trace_path=f.name, reason="complete")
    old = os.umask(0o022)
    try:
        w = Watcher(ScriptedSampler(timeline([0] * 6)),
                    WatchOptions(silent_for=2.0, output_dir=str(tmp_path), max_captures=1,
                                 interval=0.001), say=lambda s: None, recorder=recorder)
        w.run()
    finally:
        os.umask(old)
    cap = w.captures[0]
    assert cap.trace_path == f"{base}-2.htrace.gz"
    assert (cap.text_path, cap.json_path) == (f"{base}-2.txt", f"{base}-2.json")
    for p in (cap.trace_path, cap.text_path, cap.json_path):
        assert _mode(Path(p)) == 0o600 and Path(p).stat().st_size > 0
    _untouched(planted.victim)


def test_cluster_node_files_are_new_0600_and_never_a_planted_link(tmp_path, planted) -> None:
    from tracer.record import cluster as cl
    good = cl.NodeRun(["sh", "-c", "echo trace; echo said >&2"], "a",
                      trace=str(tmp_path / "a.htrace.gz"), log=str(tmp_path / "a.log"))
    bad = cl.NodeRun(["sh", "-c", "echo trace"], "b", trace=str(tmp_path / "b.htrace.gz"),
                     log=str(planted(tmp_path / "b.log")))
    old = os.umask(0o022)
    try:
        res = cl.run([good, bad], timeout=30)
    finally:
        os.umask(old)
    by_node = {r.node: r for r in res}
    assert "b.log: is a symbolic link" in (by_node["b"].error or "")
    _untouched(planted.victim)
    for name in ("a.htrace.gz", "a.log"):
        assert _mode(tmp_path / name) == 0o600
    assert (tmp_path / "a.log").read_text() == "said\n"


def _small_disk() -> None:
    """The child: files may not grow past 512 bytes (EFBIG, as a full disk gives ENOSPC)."""
    import resource
    import signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))


@pytest.mark.parametrize("command", ["merge-json", "export"])
def test_a_full_disk_at_the_output_is_one_line_and_leaves_nothing(tmp_path, command) -> None:
    out = tmp_path / "out.json"
    out.write_text("keep")
    p = hangtrace(*COMMANDS[command](out), preexec_fn=_small_disk)
    assert p.returncode == 1
    assert f"{out}: cannot write: File too large" in one_line(p.stderr)
    assert out.read_text() == "keep"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out.json"]
