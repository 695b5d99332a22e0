"""The watch loop (tracer/record/watch.py) over scripted looks and a stand-in recorder: when the
silence begins, when a capture happens (after --silent-for, once per silence), what it writes,
and the exit statuses."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import List, Optional

import pytest

import report_schema
from tracer import events as ev
from tracer.analysis.watch_rules import ProcessLook, TreeLook
from tracer.linux.tcpdiag import TcpSock
from tracer.record.session import Recorded
from tracer.record.watch import Watcher, WatchOptions, clock_text, silence_summary
from tracer.report import Report

T0 = 1_800_000_000.0
PID = 4321


class ScriptedSampler:
    """Hands out prepared looks; then an empty tree (every process gone)."""
    name: Optional[str] = None

    def __init__(self, looks: List[TreeLook]) -> None:
        self.looks = list(looks)
        self.notes: List[str] = []
        self.taken = 0

    def look(self) -> TreeLook:
        self.taken += 1
        return self.looks.pop(0) if self.looks else TreeLook(ts=T0 + 10_000)

    def tree_roots(self, look: TreeLook) -> List[int]:
        return sorted(look.processes)

    def close(self) -> None:
        pass


def look(t: float, wchar: int, syscw: int = 0, sockets=None, owners=None) -> TreeLook:
    io = ev.ProcessIO(ts=T0 + t, pid=PID, rchar=0, wchar=wchar, syscr=0, syscw=syscw)
    return TreeLook(ts=T0 + t, processes={PID: ProcessLook(PID, 1, 0, io, comm="srv")},
                    sockets=sockets, owners=owners or {})


# bytes of log a second: more than a timer's reports (progress/reports.REPORT_MAX_RATE)
LOG = 4096


def timeline(writes: List[int]) -> List[TreeLook]:
    """One look a second; ``writes[i]`` bytes of log written in the second before look i."""
    out, total = [], 0
    for i, n in enumerate(writes):
        total += n
        out.append(look(i, total, syscw=i))
    return out


class FakeRecorder:
    def __init__(self, verdict: str = "deadlocked", fail: bool = False) -> None:
        self.calls: List[tuple] = []
        self.verdict, self.fail = verdict, fail

    def __call__(self, roots: List[int], output: str) -> Recorded:
        self.calls.append((list(roots), output))
        if self.fail:
            raise OSError(28, "No space left on device")
        Path(output).write_text("trace")
        start = T0 + 5_000 + len(self.calls)
        report = Report(verdict=self.verdict, rule="in-process-deadlock",
                        root_cause={"pid": PID, "tid": PID, "summary": "stuck", "node": None,
                                    "node_pid": None, "node_tid": None}, processes=[],
                        window={"start": start, "end": start + 2, "duration": 2.0},
                        backends=["proc"], trace_path=output)
        return Recorded(report=report, trace_path=output, reason="complete")


def still_stacks(pids):
    return []


def no_driver_calls(pids):
    return [], "no process maps libcuda"


def run(looks, tmp_path: Path, *, silent_for=3.0, max_captures=1, recorder=None,
        stack_sampler=still_stacks, driver_sampler=no_driver_calls):
    rec = recorder or FakeRecorder()
    lines: List[str] = []
    caps: list = []
    w = Watcher(ScriptedSampler(looks), WatchOptions(silent_for=silent_for, duration=2,
                                                     output_dir=str(tmp_path),
                                                     max_captures=max_captures,
                                                     interval=0.001, verbose=True),
                say=lines.append, on_capture=caps.append, recorder=rec,
                stack_sampler=stack_sampler, driver_sampler=driver_sampler)
    code = w.run()
    return code, w, rec, lines


def test_capture_after_the_threshold_and_not_before(tmp_path):
    # logs for 4 s (looks 1..4 see output), then nothing: silent from look 4 (T0 + 4)
    looks = timeline([0, LOG, LOG, LOG, LOG, 0, 0, 0, 0, 0, 0])
    sampler_looks = list(looks)
    code, w, rec, lines = run(looks, tmp_path)
    assert code == 4                                   # --once: the verdict's exit status
    assert len(rec.calls) == 1 and rec.calls[0][0] == [PID]
    cap = w.captures[0]
    assert cap.report.watch["silent_since"] == T0 + 4
    # the capture came at the first look 3 s after the silence began (look 7), not before
    assert len(sampler_looks) - len(w.sampler.looks) == 8
    assert any("silent since" in line and "wrote" in line for line in lines)
    doc = json.loads(Path(cap.json_path).read_text())
    assert doc["watch"]["silent_for"] == 3.0 and doc["watch"]["last_progress"]
    assert doc["watch"]["summary"].startswith(f"the tree went silent at {clock_text(T0 + 4)}")
    text = Path(cap.text_path).read_text()
    assert "watch: the tree went silent at" in text and "\x1b[" not in text
    report_schema.check(doc)    # last: skipped (with the reason) where jsonschema is missing


def test_one_capture_per_silence_and_max_captures(tmp_path):
    writes = [0, LOG] + [0] * 6 + [LOG] + [0] * 6      # two silences, progress in between
    code, w, rec, _ = run(timeline(writes), tmp_path, max_captures=2)
    assert code == 4 and len(rec.calls) == 2
    first, second = (c.report.watch["silent_since"] for c in w.captures)
    assert (first, second) == (T0 + 1, T0 + 8)


def test_a_stats_line_every_2_s_is_no_progress(tmp_path):
    """A 120-byte stats line to a pipe every other second (the timer's report of a hung server)
    does not end the silence that began with the log's end: the capture comes on time."""
    writes = [0, LOG] + [0, 120] * 6
    code, w, rec, _ = run(timeline(writes), tmp_path, max_captures=2)
    assert len(rec.calls) == 1
    assert w.captures[0].report.watch["silent_since"] == T0 + 1


def test_a_silence_that_goes_on_is_captured_once(tmp_path):
    code, w, rec, lines = run(timeline([0, LOG] + [0] * 20), tmp_path, max_captures=5)
    assert len(rec.calls) == 1
    assert code == 5 and lines[-1] == "every watched process is gone"


def test_never_any_progress(tmp_path):
    code, w, rec, _ = run(timeline([0] * 6), tmp_path)
    watch = w.captures[0].report.watch
    assert watch["silent_since"] == T0 and watch["last_progress"] == []
    assert watch["summary"].startswith("the tree showed no progress since watching began")


def test_eventfd_pokes_are_silence(tmp_path):
    looks = [look(i, wchar=8 * i, syscw=i) for i in range(6)]     # 8-byte writes: wake-ups
    code, w, rec, _ = run(looks, tmp_path)
    assert len(rec.calls) == 1 and w.captures[0].report.watch["silent_since"] == T0


def test_keepalive_chatter_is_silence_even_with_short_intervals(tmp_path):
    """A 24-byte heartbeat a second, looked at four times a second: judged over a second."""
    looks = []
    for i in range(24):
        t = i * 0.25
        n = int(t) + 1
        s = TcpSock(9, 77, "ESTABLISHED", ("127.0.0.1", 5000), ("127.0.0.1", 6000),
                    1 + 24 * n, 0, n)
        looks.append(look(t, 0, sockets={9: s}, owners={77: PID}))
    code, w, rec, _ = run(looks, tmp_path)
    assert len(rec.calls) == 1 and w.captures[0].report.watch["silent_since"] == T0


def test_a_failed_recording_is_said_and_ends_once_with_1(tmp_path):
    code, w, rec, lines = run(timeline([0] * 6), tmp_path, recorder=FakeRecorder(fail=True))
    assert code == 1 and w.captures == []
    assert any(line.startswith("recording failed: No space left on device") for line in lines)


def test_gone_before_any_capture(tmp_path):
    code, w, rec, lines = run(timeline([0, LOG]), tmp_path)
    assert code == 5 and rec.calls == []


@pytest.mark.parametrize("since, start, want", [
    (T0, T0 + 300, "the tree went silent at {a}; recorded from {b}"),
])
def test_summary_words(since, start, want):
    assert silence_summary(since, start, True) == want.format(a=clock_text(since),
                                                              b=clock_text(start))
    assert len(clock_text(T0)) == 8 and len(clock_text(T0, T0 + 86400 * 2)) == 19


# --------------------------------------------------------------------------- command line
def _cli(*args):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "tracer", "watch", *args], capture_output=True,
                          text=True, timeout=60)


def test_cli_bad_input_is_one_line():
    missing = _cli("999999999", "--silent-for", "1")
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr.splitlines() == ["hangtrace: no process with pid 999999999"]
    usage = _cli("1")
    assert usage.returncode == 2 and "--silent-for" in usage.stderr
    nothing = _cli("--silent-for", "1")
    assert nothing.returncode == 2 and "Traceback" not in nothing.stderr


def test_cli_output_dir_must_be_writable(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("")
    p = _cli(str(os.getpid()), "--silent-for", "1", "--output-dir", str(f / "sub"))
    assert p.returncode == 1 and p.stderr.startswith("hangtrace: ") and "Traceback" not in p.stderr


# --------------------------------------------------------------------------- issue 35 item 9
@pytest.mark.parametrize("slash", ["", "/"])
def test_cli_output_dir_that_is_a_link_is_refused(tmp_path, sleeper, slash):
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    p = _cli(str(sleeper), "--silent-for", "1", "--once", "--output-dir", f"{link}{slash}")
    assert p.returncode == 1 and p.stdout == "", p.stderr
    assert p.stderr.splitlines() == [
        f"hangtrace: {link}{slash}: is a symbolic link, not a directory: nothing written "
        "(hangtrace writes no output through a link: give the directory it points to)"]
    assert list(target.iterdir()) == [] and link.is_symlink()


def test_cli_output_dir_that_is_a_file_is_refused(tmp_path, sleeper):
    f = tmp_path / "a-file"
    f.write_text("kept")
    p = _cli(str(sleeper), "--silent-for", "1", "--once", "--output-dir", str(f))
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.splitlines() == [f"hangtrace: {f}: is a regular file, not a directory: "
                                     "nothing written"]
    assert f.read_text() == "kept"


def test_cli_watch_of_its_own_ancestor_is_refused_with_the_reason(tmp_path):
    """``watch $$`` from a shell: the shell is the watcher's parent; the test process is an
    ancestor too."""
    import subprocess
    import sys
    shell = subprocess.run(["bash", "-c", f"{sys.executable} -m tracer watch $$ --silent-for 1 "
                            f"--once --output-dir {tmp_path}; echo status=$?"],
                           capture_output=True, text=True, timeout=60)
    assert shell.stdout.strip() == "status=2", shell.stdout + shell.stderr
    lines = shell.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hangtrace: pid ") and \
        "is hangtrace's own ancestor" in lines[0] and "give the pid of the process" in lines[0]
    me = _cli(str(os.getpid()), "--silent-for", "1", "--once", "--output-dir", str(tmp_path))
    assert me.returncode == 2 and f"pid {os.getpid()} is hangtrace's own ancestor" in me.stderr
    assert len(me.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_cli_cluster_output_dir_that_is_a_link_is_refused(tmp_path):
    from cli_run import hangtrace, one_line
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    p = hangtrace("cluster", "--via", "ssh", "node-a", "-p", "42", "-d", "1",
                  "--output-dir", str(link))
    assert p.returncode == 1
    assert f"{link}: is a symbolic link, not a directory" in one_line(p.stderr)
    assert list(target.iterdir()) == []


def test_code_that_moves_is_not_silence(tmp_path):
    """A tree that writes nothing while its Python code moves (a capture walking layers) is
    asked for stacks once the silence is long enough, and not captured while they move."""
    from tracer.events.stacks import StackSamples
    asked: List[List[int]] = []

    def moving(pids):
        asked.append(pids)
        frames = [[f"layer_{i % 4} (model.py:{10 + i % 4})", "capture (runner.py:5)"]
                  for i in range(8)]
        return [StackSamples(ts=T0, pid=PID, tid=PID + 1, samples=frames, span=0.9)]

    looks = timeline([0, LOG] + [0] * 12)
    code, w, rec, lines = run(looks, tmp_path, stack_sampler=moving)
    assert code == 5 and rec.calls == []            # never captured; ended when the tree went
    assert asked and asked[0] == [PID]
    assert any("silent, but not stuck" in line and "code moves" in line for line in lines)
    # and a tree whose stacks stay still is captured as before
    code, w, rec, lines = run(timeline([0, LOG] + [0] * 12), tmp_path)
    assert len(rec.calls) == 1


def test_a_silent_tree_whose_gpu_work_completes_is_not_captured(tmp_path):
    """A warm-up or a slow collective writes nothing and its stacks stay on the sync's line:
    libcuda's uprobes, counting for a moment before a capture, see its syncs return."""
    from tracer.events.evidence import CudaDriverCalls

    def completing(pids):
        return [CudaDriverCalls(ts=T0 + 1.5, pid=PID, tid=PID, since=T0, work_probed=True,
                                kernels=400, syncs=80, syncs_done=80,
                                last_sync_done=T0 + 1.45)], ""

    code, w, rec, lines = run(timeline([0, LOG] + [0] * 12), tmp_path,
                              driver_sampler=completing)
    assert code == 5 and rec.calls == []
    assert any("silent, but not stuck" in line and "GPU work completes" in line
               for line in lines)

    def stalled(pids):           # in a sync since the look began: a kernel that never ends
        return [CudaDriverCalls(ts=T0 + 1.5, pid=PID, tid=PID, since=T0, work_probed=True,
                                syncs=1, in_sync_since=T0 + 0.01)], ""
    code, w, rec, lines = run(timeline([0, LOG] + [0] * 12), tmp_path, driver_sampler=stalled)
    assert len(rec.calls) == 1


def test_a_signal_during_the_looks_before_a_capture_stops_the_watch(tmp_path):
    """SIGTERM or Ctrl-C while the driver look counts (up to LOOK_MAX_S): the watch ends there,
    with no capture begun (a capture after it would be cut at once, a partial trace left)."""
    watcher: list = []

    def interrupted(pids):
        watcher[0]._stop.set()          # what the signal handler does
        return [], ""

    rec = FakeRecorder()
    lines: List[str] = []
    w = Watcher(ScriptedSampler(timeline([0, LOG] + [0] * 12)),
                WatchOptions(silent_for=3.0, duration=2, output_dir=str(tmp_path),
                             max_captures=1, interval=0.001, verbose=True),
                say=lines.append, recorder=rec, stack_sampler=still_stacks,
                driver_sampler=interrupted)
    watcher.append(w)
    assert w.run() == 0
    assert rec.calls == [] and lines[-1] == "watch stopped" and list(tmp_path.iterdir()) == []
