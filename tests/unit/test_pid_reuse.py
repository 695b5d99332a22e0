"""record/targets.py: a pid reused before attach (issue 46 item 4). Discovery keeps each
process's start time; a pid whose process now started at another time is another process
(the target exited and a new one took its pid), and is never traced as the target: dropped
with one line, and the session refuses when nothing is left."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tracer.errors import TargetGone
from tracer.record.session import Session
from tracer.record.targets import TargetSet


def _stat(root: Path, pid: int, ppid: int, starttime: int, comm: str = "worker") -> None:
    """/proc/PID/stat as the kernel writes it (starttime: field 22, clock ticks)."""
    (root / str(pid)).mkdir(exist_ok=True)
    rest = ["S", str(ppid), str(pid), "0", "0", "-1", "0", "100", "0", "0", "0", "5", "3",
            "0", "0", "20", "0", "1", "0", str(starttime), "0", "10"]
    (root / str(pid) / "stat").write_text(f"{pid} ({comm}) {' '.join(rest)}\n")


@pytest.fixture
def tree(tmp_path):
    _stat(tmp_path, 100, 1, 5000)
    _stat(tmp_path, 101, 100, 5100)
    ts = TargetSet([100])
    ts.discover(str(tmp_path))
    return tmp_path, ts


def test_the_same_process_is_not_reused(tree):
    root, ts = tree
    assert ts.pids() == [100, 101]
    assert ts.reused(100) is None and ts.drop_reused() == []


def test_a_start_time_that_changed_is_another_process(tree):
    root, ts = tree
    _stat(root, 101, 1, 98765, comm="sshd")      # 101 exited; a root daemon took its pid
    line = ts.reused(101)
    assert line == ("pid 101 is not the process found at discovery: that one (started 51.00 s "
                    "after boot) exited and 'sshd' (started 987.65 s after boot) now holds "
                    "its pid: not traced")
    assert ts.drop_reused() == [(101, line)]
    assert ts.pids() == [100]
    assert ts.alive() == [100]


def test_a_process_that_is_gone_is_not_called_reused(tree):
    root, ts = tree
    (root / "101" / "stat").unlink()
    assert ts.reused(101) is None and ts.alive() == [100]


def test_the_session_refuses_with_one_line_when_every_target_was_reused(tree):
    root, ts = tree
    _stat(root, 100, 1, 7777, comm="cron")
    _stat(root, 101, 1, 7778, comm="cron")
    fake = SimpleNamespace(targets=ts, infos=list(ts.infos.values()), pending=[])
    with pytest.raises(TargetGone) as exc:
        Session._drop_reused(fake)
    assert str(exc.value).startswith("pid 100 is not the process found at discovery")
    assert "\n" not in str(exc.value)


def test_the_session_leaves_out_a_reused_pid_and_says_so(tree):
    root, ts = tree
    _stat(root, 101, 1, 7778, comm="cron")
    fake = SimpleNamespace(targets=ts, infos=list(ts.infos.values()), pending=[])
    Session._drop_reused(fake)
    assert ts.pids() == [100]
    assert [i.pid for i in fake.infos] == [100]
    [err] = fake.pending
    assert (err.what, err.pid) == ("reused", 101) and "'cron'" in err.why
