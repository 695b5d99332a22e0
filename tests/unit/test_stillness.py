"""record/stillness.py: who did nothing since a look, told from a /proc written here (the
scheduler's run counts; for a ptraced recording, calls, user ticks and faults)."""
from __future__ import annotations

from pathlib import Path

from tracer.record.stillness import RESTART_FAULTS, RunCounts


def _proc(root: Path, pid: int, runs: dict, utime: int = 5, minflt: int = 100,
          majflt: int = 0) -> None:
    """/proc/PID/stat and task/TID/schedstat for ``runs`` {tid: run count}."""
    for tid, count in runs.items():
        d = root / str(pid) / "task" / str(tid)
        d.mkdir(parents=True, exist_ok=True)
        (d / "schedstat").write_text(f"{1000 * count} 7 {count}\n")
    rest = ["S", "1", str(pid), "0", "0", "-1", "0", str(minflt), "0", str(majflt), "0",
            str(utime), "3", "0", "0", "20", "0", str(len(runs)), "0", "4242", "0", "10"]
    (root / str(pid) / "stat").write_text(f"{pid} (worker) {' '.join(rest)}\n")


def test_still_is_told_by_each_thread_s_run_count(tmp_path):
    _proc(tmp_path, 10, {10: 3})
    _proc(tmp_path, 11, {11: 3, 12: 8})
    _proc(tmp_path, 13, {13: 1})
    counts = RunCounts.read([10, 11, 13], root=str(tmp_path))
    _proc(tmp_path, 11, {11: 3, 12: 9})          # one of its threads ran
    _proc(tmp_path, 13, {13: 1, 14: 1})          # a thread was born
    assert counts.still([10, 11, 13, 99]) == {10}


def test_a_scheduler_that_keeps_no_counts_makes_nothing_still(tmp_path):
    d = tmp_path / "10" / "task" / "10"
    d.mkdir(parents=True)
    (d / "schedstat").write_text("0 0 0\n")
    _proc(tmp_path, 10, {})
    counts = RunCounts.read([10], root=str(tmp_path))
    assert counts.still([10]) == set()


def test_quiet_allows_the_restart_s_fault_and_nothing_else(tmp_path):
    for pid in (20, 21, 22, 23, 24):
        _proc(tmp_path, pid, {pid: 2})
    counts = RunCounts.read([20, 21, 22, 23, 24], root=str(tmp_path))
    for pid in (20, 21, 22, 23, 24):
        _proc(tmp_path, pid, {pid: 5})           # ptrace's attach woke every one
    _proc(tmp_path, 21, {21: 5}, minflt=100 + RESTART_FAULTS)
    _proc(tmp_path, 22, {22: 5}, minflt=100 + RESTART_FAULTS + 1)
    _proc(tmp_path, 23, {23: 5}, utime=6)
    assert counts.still([20, 21]) == set()
    assert counts.quiet([20, 21, 22, 23, 24], callers={24}) == {20, 21}


def test_the_ebpf_stop_takes_a_still_process_s_first_look_again(monkeypatch):
    """A process that did not run since its first look is not read at the eBPF stop: its
    threads' first samples, dated now, and its fds as the discovery read them."""
    import pytest
    from types import SimpleNamespace
    from tracer import events as ev
    from tracer.record.backends.ebpf import final
    from tracer.record.backends.ebpf.convert import FdCache
    first = ev.ThreadSample(ts=1.0, pid=5, tid=5, comm="w", state="S", utime=0, stime=0,
                            syscall="34 0x0 0x0 0x0 0x0 0x0 0x0 0x7ffc 0x7f00")
    ctx = SimpleNamespace(still={5}, start_samples={5: first})
    monkeypatch.setattr(final.procfs, "read_thread_sample",
                        lambda *a, **k: pytest.fail("a still thread read again"))
    s = final._sample(ctx, 5, 5)   # type: ignore[arg-type]
    assert s is not None and s.ts > 1.0 and (s.state, s.syscall) == ("S", first.syscall)
    fds = FdCache(root="/nonexistent")
    fds.known(5, [ev.FdInfo(0, "pipe", "pipe:[7]", "r")])
    assert fds.get(5, 0).target == "pipe:[7]" and fds.get(5, 9) is None
