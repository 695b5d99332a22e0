"""watch on a real process that prints a line every 10 ms with PYTHONUNBUFFERED into a file:
the file's position (fdinfo) is read and its advance is output (issue 20 item 6)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tracer.analysis.watch_rules import progress_signals
from tracer.linux.procfs_fds import written_positions
from tracer.record.watch_looks import TreeSampler


def _orphan(code: str, log, stdin) -> int:
    """A python printing into ``log``, started through a shell that exits: not our child (the
    watcher leaves its own children out of the tree)."""
    sh = subprocess.run(["sh", "-c", '"$0" -u -c "$1" > "$2" < "$3" 2>/dev/null & echo $!',
                         sys.executable, code, str(log), str(stdin)],
                        capture_output=True, text=True, timeout=30, check=True)
    return int(sh.stdout.strip())


def test_written_positions_of_a_real_process(tmp_path) -> None:
    log, stdin = tmp_path / "out.log", tmp_path / "in.txt"
    stdin.write_text("x")
    code = ("import sys, time\n"
            "for i in range(3000):\n"
            "    sys.stdout.write(f'{i}\\n'); time.sleep(0.01)\n")
    pid = _orphan(code, log, stdin)
    # killed through a pidfd: by the time the test ends it may have exited and been reaped by
    # init, and its pid taken by another test's process
    pidfd = os.pidfd_open(pid)
    try:
        deadline = time.monotonic() + 30
        first = None
        while time.monotonic() < deadline:
            pos = written_positions(pid, (0, 1, 2))
            if 1 in pos and pos[1][1] > 0:
                first = pos
                break
            time.sleep(0.05)
        assert first is not None and 0 not in first       # stdin is open for reading only
        assert first[1][0] == str(log)
        sampler = TreeSampler([pid], tcp=False)
        looks = [sampler.look()]
        while time.monotonic() < deadline:
            time.sleep(0.3)
            looks.append(sampler.look())
            sig = [s for s in progress_signals(looks[-2], looks[-1]) if s.kind == "output"]
            if sig:
                assert "(its position advanced: fdinfo)" in sig[0].text
                break
        else:
            raise AssertionError("no output signal while the child printed a line every 10 ms")
        sampler.close()
    finally:
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(pidfd)
