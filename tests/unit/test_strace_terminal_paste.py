"""Lines that are not strace's never decide (issue 32 item 4): a log pasted from a terminal
with the shell prompt, the strace command, a ps listing and a note around it is counted as
that many lines not understood, and judged as the log alone is."""
from __future__ import annotations

from pathlib import Path

import pytest

from tracer.analysis.analyzer import analyze_trace
from tracer.strace.importer import import_strace

FIELD = Path(__file__).resolve().parents[1] / "data" / "strace" / "field"
BEFORE = ["root@gpu-node:~# strace -f -p 3092 2> hang.log", "^C",
          "root@gpu-node:~# cat hang.log"]
AFTER = ["root@gpu-node:~# ps -T -p 3092", "    PID    SPID TTY          TIME CMD",
         "   3092    3092 pts/0    00:00:00 python3", "   3092    3093 pts/0    00:00:00 python3",
         "# it had hung for an hour when I took this"]


def _judge(path: Path, out: str):
    res = import_strace(str(path), out)
    r = analyze_trace(out)
    return res.unparsed, (str(r.verdict), r.root_cause.get("pid"), r.root_cause.get("tid"))


@pytest.mark.parametrize("log", ["watchdog_futex_f_p_stderr.log", "clock_spin_p_stderr.log"])
def test_terminal_text_around_a_log_is_unparsed_and_never_decides(log, tmp_path):
    plain = FIELD / log
    pasted = tmp_path / "pasted.log"
    pasted.write_text("\n".join(BEFORE) + "\n" + plain.read_text() + "\n".join(AFTER) + "\n")
    n0, alone = _judge(plain, str(tmp_path / "a.htrace"))
    n1, with_text = _judge(pasted, str(tmp_path / "b.htrace"))
    assert with_text == alone
    assert n1 - n0 == len(BEFORE) + len(AFTER)
