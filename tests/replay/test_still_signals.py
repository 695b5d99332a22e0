"""A hung verdict says which progress signals were looked at and found still, and which the
recording could not give (issue 30, item 8; analysis/progress/still.py), on recordings made
with the progress probes; a progressing one does not, and older traces keep their reports."""
from __future__ import annotations

from scenarios import REPO
from tracer.load.trace import analyze_trace

HEAD = "progress signals looked at and found still: "


def _note(name: str) -> list:
    report = analyze_trace(str(REPO / name))
    return [n for n in report.notes if n.startswith(HEAD)]


def test_a_gpu_spin_says_what_was_still():
    (note,) = _note("fixtures/gpu/traces/serving-spin.strace.htrace.gz")
    assert "page faults (no thread faulted memory in)" in note
    assert "Python stacks (1 thread(s) on a CPU sampled, 0 moved)" in note
    assert "GPU 0: SM activity 0.8%" in note
    # strace saw the process hold the GPU; only uprobes (eBPF) count its libcuda calls
    assert note.endswith("not in this recording: libcuda calls (uprobes need --backend ebpf)")


def test_what_the_recording_lacks_is_said():
    (note,) = _note("fixtures/traces/serving_tree-retry.proc.htrace.gz")
    assert note.endswith("not in this recording: call results (retries show only with "
                         "strace, ebpf or a log)")


def test_progressing_and_older_recordings_have_no_such_note():
    assert _note("fixtures/traces/serving_tree-load-slow.strace.htrace.gz") == []
    assert _note("fixtures/traces/serving_tree-stats-hang.strace.htrace.gz") == []  # no probes


def test_silent_work_that_advances_is_called_slow_not_hung():
    """Item 8: a progressing tree whose chain ends in work that writes nothing (a load, a
    capture, the GPU) says slow, not hung; one whose work writes (a decode loop) does not."""
    for name in ("fixtures/gpu/traces/serving2-load.ebpf.htrace.gz",
                 "fixtures/gpu/traces/serving2-warmup.proc.htrace.gz",
                 "fixtures/gpu/traces/serving2-capture.proc.htrace.gz"):
        report = analyze_trace(str(REPO / name))
        assert report.verdict == "progressing"
        assert report.root_cause["summary"].startswith("slow, not hung (nothing is written, "
                                                       "but the work advances): "), name
    decode = analyze_trace(str(REPO / "fixtures/gpu/traces/serving2-decode.proc.htrace.gz"))
    assert decode.verdict == "progressing" and "slow, not hung" not in \
        decode.root_cause["summary"]
