"""Fields checked once, at the edge (issue 22 item 4, outside trace rows): numbers are ASCII
digits with a bounded length before int() (``str.isdigit()`` says yes to ``²``, which int()
refuses: 75 fuzz runs ended in an internal error), and text is written whatever it holds (a
lone surrogate in a comm broke ``export --format dot``)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tracer import events as ev
from tracer.analysis.evidence.ports import ports_asked
from tracer.analysis.job.roles import parse_environ_rank
from tracer.linux.fdtarget import FdTarget
from tracer.linux.futex import parse_op_text
from tracer.linux.intparse import is_digits, parse_c_int, parse_uint
from tracer.strace.convert import StraceConverter
from tracer.strace.importer import import_strace
from tracer.strace.lines import py_split_line, split_line
from tracer.tracefile.format import TraceWriter, make_header

REPO = Path(__file__).resolve().parents[2]
REAL_LOG = REPO / "tests" / "data" / "strace" / "python_f_ttt_T_yy.log"


@pytest.mark.parametrize("text,digits,uint,c_int", [
    ("123", True, 123, 123), ("²", False, None, None), ("3¹540", False, None, None),
    ("٣", False, None, None), ("+5", False, None, None), (" 5", False, None, None),
    ("1_000", False, None, None), ("-7", False, None, -7), ("0x1f", False, None, 31),
    ("0x" + "f" * 40, False, None, None), ("9" * 21, True, None, None), ("", False, None, None),
    ("007", True, 7, None),
])
def test_number_texts(text, digits, uint, c_int) -> None:
    assert is_digits(text) is digits
    assert parse_uint(text) == uint
    assert parse_c_int(text) == c_int


# Lines that each made an internal error (or a number no path should take), and what both
# paths must read them as: None (not strace output), or the tid and kind.
LINES = [
    ("3¹540 1795953170.545572 getpid() = 1 <0.000011>", None),
    ("[pid ²] 1795953170.545572 getpid() = 1", None),
    ("[pid -5] 1795953170.545572 getpid() = 1", None),
    ("[pid 1_0] 1795953170.545572 getpid() = 1", None),
    ("[pid  42] 1795953170.545572 getpid() = 1", (42, "call")),
    ("strace: Process ²5 attached", ("info",)),
    ("42  1795953170.545572 Process 25557 attached", (25557, "attached")),
    ("42  1e5 getpid() = 1", None),
    ("42  nan getpid() = 1", None),
    ("42  1795953170.545572 getpid() = +5 <0.1>", None),
    ("42  1795953170.545572 getpid() = 1_0 <0.1>", None),
    ("42  1795953170.545572 getpid() = ² <0.1>", None),
    ("42  1795953170.545572 getpid() = 5 <1e-5>", (42, "call")),     # no duration: ret_text
    ("42  1795953170.545572 --- SIGCHLD {si_signo=SIGCHLD, si_pid=²} ---", (42, "signal")),
    ("42  1795953170.545572 +++ exited with ² +++", None),
    ("42  1795953170.545572 [ ²] getpid() = 1", None),
    ("42  10:11:1² getpid() = 1", None),
]


@pytest.mark.parametrize("line,want", LINES)
def test_lines_with_odd_numbers_read_the_same_on_both_paths(line, want) -> None:
    py = py_split_line(line)
    assert split_line(line) == py
    if want is None:
        assert py is None
    elif len(want) == 1:
        assert py is not None and py[2] == want[0]
    else:
        assert py is not None and (py[0], py[2]) == want


def test_odd_numbers_in_a_real_log_never_fail_the_import(tmp_path) -> None:
    good = REAL_LOG.read_text().splitlines()
    tid = good[0].split()[0]
    odd = [line for line, _ in LINES] + [
        f"{tid}  1795953170.6 read(3<pipe:[²]>, \"\", 1) = 0 <0.000010>",
        f"{tid}  1795953170.6 poll([{{fd=²<pipe:[1²]>, events=POLLIN}}], 1, 0) = 0 <0.1>",
        f"{tid}  1795953170.6 select(4, [3 ²], NULL, NULL, NULL) = 1 <0.1>",
        f"{tid}  1795953170.6 futex(0x1, ², 0, NULL) = 0 <0.1>",
        f"{tid}  1795953170.6 nanosleep({{tv_sec=², tv_nsec=0}}, NULL) = 0 <0.1>",
        f"{tid}  1795953170.6 tgkill(²5, 3, SIGTERM) = 0 <0.1>",
        f"{tid}  1795953170.6 pipe2([3<pipe:[²]>, 4<pipe:[²]>], 0) = 0 <0.1>",
        f"{tid}  1795953170.6 close({'9' * 5000}) = 0 <0.1>",
    ]
    log = tmp_path / "odd.log"
    log.write_text("\n".join(good[:20] + odd + good[20:]) + "\n")
    res = import_strace(str(log), str(tmp_path / "o.htrace"))
    assert res.events > 100
    conv = StraceConverter()
    for line in odd:
        for e in conv.feed_text(line + "\n"):
            json.dumps(ev.event_to_row(e))


def test_fd_targets_and_futex_ops_with_odd_digits() -> None:
    assert FdTarget.parse("pipe:[²]").inode is None
    assert FdTarget.parse("pipe:[123]").inode == 123
    assert FdTarget.parse("UNIX-STREAM:[²->³]").peer_inode is None
    assert FdTarget.parse("TCP:[" + "9" * 5000 + "]").inode is None
    assert parse_op_text("²").name == "²"
    assert parse_op_text("0x80").name == "WAIT" and parse_op_text("0x80").private
    assert len(parse_op_text("FUTEX_" + "X" * 100000).name) < 200


def test_a_target_started_with_odd_digits_in_argv_is_still_analyzed() -> None:
    """``--port ²`` made every trace of the process fail to analyze (evidence reads argv)."""
    assert ports_asked(["python", "-m", "sglang.launch_server", "--port", "²"]) == []
    asked = ports_asked(["srv", "--port", "30000", "--dist-init-addr", "h:2²"])
    assert [a.port for a in asked] == [30000]
    assert parse_environ_rank("²") is None and parse_environ_rank("RANK=" + "9" * 5000) is None
    assert parse_environ_rank("RANK=3 LOCAL_RANK=1") == 3


def test_export_dot_of_a_comm_with_a_lone_surrogate(tmp_path) -> None:
    info = ev.ProcessInfo(ts=100.0, pid=10, ppid=1, comm="w\udcff", cmdline=["w\udcff"],
                          threads={10: "w\udcff", 11: "x\ud800"})
    path = tmp_path / "s.htrace"
    with TraceWriter(str(path), make_header(backends=["strace"], source="attach", targets=[10],
                                            start=100.0, processes=[info])) as w:
        for t in (10, 11):
            w.write(ev.FutexCall(ts=100.5, pid=10, tid=t, name="futex", args="", ret=None,
                                 err=None, dur=None, fd=None, fd_kind=None, fd_target=None,
                                 ongoing=True, op="WAIT", addr=0x1000 + t, val=0,
                                 timeout=None, private=True))
    for fmt in ("dot", "json", "perfetto"):
        p = subprocess.run([sys.executable, "-m", "tracer", "export", str(path), "-f", fmt],
                           capture_output=True, timeout=120)
        assert p.returncode == 0, (fmt, p.stderr)
        assert b"Traceback" not in p.stderr and p.stdout
