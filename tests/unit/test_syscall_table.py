"""syscall_table: names, /proc/.../syscall decoding and what a blocked thread waits on.

Lines are real: from fixtures/gpu-h200 (an H200 host) and from tests/data/procfs/scenario.py
threads captured on this VM (tests/data/procfs/<pid>/task/<tid>/syscall).
"""
import json
import os

import pytest

from tracer.linux.procfs import read_fds
from tracer.linux.blocking import decode_blocking as describe_blocking
from tracer.linux.futex import decode_op
from tracer.linux.futex import parse_op_text
from tracer.linux.syscall_table import (AARCH64, X86_64, parse_proc_syscall, syscall_name,
                                        syscall_number)

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "procfs")


def test_tables_complete_and_right():
    assert len(X86_64) > 370 and len(AARCH64) > 300
    assert [X86_64[n] for n in (0, 1, 7, 202, 232, 281, 61, 435, 455)] == [
        "read", "write", "poll", "futex", "epoll_wait", "epoll_pwait", "wait4", "clone3",
        "futex_wait"]
    assert [AARCH64[n] for n in (63, 98, 73, 22, 260, 79, 62, 220)] == [
        "read", "futex", "ppoll", "epoll_pwait", "wait4", "newfstatat", "lseek", "clone"]
    assert syscall_name(202, "x86_64") == "futex" and syscall_name(98, "aarch64") == "futex"
    assert syscall_name(9999, "x86_64") == "syscall_9999"


@pytest.mark.parametrize("line,kind,name,args", [
    ("running", "running", None, ()),
    ("-1 0x7ffd5c4a8f38 0x7f3b2d6e0f1a", "outside", None, ()),
    ("202 0x7ffda087ef30 0x189 0x0 0x0 0x0 0xffffffff 0x7ffda087ee80 0x7f19dee98e51",
     "syscall", "futex", (0x7ffda087ef30, 0x189, 0, 0, 0, 0xffffffff)),
])
def test_parse_proc_syscall(line, kind, name, args):
    cs = parse_proc_syscall(line, "x86_64")
    assert (cs.kind, cs.name, cs.args) == (kind, name, args)


@pytest.mark.parametrize("line", ["", "garbage", "202 0x1 0x2", "-1", "12 zz 0 0 0 0 0 0 0"])
def test_parse_proc_syscall_rejects_garbage(line):
    assert parse_proc_syscall(line) is None


def test_futex_op_flags():
    assert (decode_op(0x189).name, decode_op(0x189).private) == ("WAIT_BITSET", True)
    assert decode_op(0x189).realtime                      # |PRIVATE|CLOCK_REALTIME
    assert (decode_op(0x80).name, decode_op(0x80).private) == ("WAIT", True)
    assert (decode_op(0x1).name, decode_op(0x1).private) == ("WAKE", False)
    assert decode_op(0x86).is_pi and decode_op(0x86).is_wait
    assert decode_op(0x1).is_wake and not decode_op(0x1).is_wait
    assert decode_op(0x7f).name == "OP_127"


@pytest.mark.parametrize("text,name,private,realtime", [
    # strace's three renderings of the same word, and plain ones (real strace 6.1 output)
    ("FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME", "WAIT_BITSET", True, True),
    ("0x189", "WAIT_BITSET", True, True),
    ("0x189 /* FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME */", "WAIT_BITSET", True, True),
    ("FUTEX_WAKE_PRIVATE", "WAKE", True, False),
    ("FUTEX_LOCK_PI", "LOCK_PI", False, False),
    ("FUTEX_WAIT", "WAIT", False, False),
])
def test_futex_op_text(text, name, private, realtime):
    op = parse_op_text(text)
    assert (op.name, op.private, op.realtime) == (name, private, realtime)
    assert op == decode_op(0x189) or text != "0x189"


def test_syscall_number_per_architecture():
    assert syscall_number("futex", "x86_64") == 202
    assert syscall_number("futex", "aarch64") == 98
    assert syscall_number("no_such_call", "x86_64") is None


H200 = [  # (line, text, waits_on, has_timeout, timeout)
    ("202 0x7fcf6c9f7060 0x189 0x0 0x0 0x0 0xffffffff 0x7fcf4a5fed60 0x7fcf6e098e51",
     "futex(0x7fcf6c9f7060, WAIT_BITSET|PRIVATE) no timeout", "futex 0x7fcf6c9f7060", False, None),
    ("7 0x24a50750 0x3 0xffffffff 0x24a4e680 0x0 0x7 0x7fcf077fed40 0x7fcf6e11b79d",
     "poll(3 fds) no timeout", "fds", False, None),
    ("7 0x7fccf0000c20 0xb 0x64 0x0 0x0 0x0 0x7fcf053fed40 0x7fcf6e11b79d",
     "poll(11 fds) timeout 100 ms", "fds", True, 0.1),
]


@pytest.mark.parametrize("line,text,waits_on,has_timeout,timeout", H200)
def test_describe_h200_lines(line, text, waits_on, has_timeout, timeout):
    b = describe_blocking(parse_proc_syscall(line, "x86_64"))
    assert (str(b), b.waits_on, b.has_timeout, b.timeout) == (text, waits_on, has_timeout, timeout)


def _captured():
    with open(os.path.join(DATA, "manifest.json")) as f:
        m = json.load(f)
    out = {}
    for name, tid in m["tids"].items():
        with open(os.path.join(DATA, str(m["pid"]), "task", str(tid), "syscall")) as f:
            out[name] = f.read()
    with open(os.path.join(DATA, str(m["pid"]), "syscall")) as f:
        out["main"] = f.read()
    return m, out


def test_describe_captured_threads():
    m, lines = _captured()
    fds = read_fds(m["pid"], root=DATA)  # the captured fd table of the same process
    d = {name: describe_blocking(parse_proc_syscall(line, "x86_64"), fds)
         for name, line in lines.items()}
    assert d["locked"].call.startswith("futex(") and "WAIT" in d["locked"].call
    assert d["locked"].has_timeout is False
    assert d["timedlock"].has_timeout is True and d["timedlock"].waits_on.startswith("futex")
    assert (d["poller"].has_timeout, d["poller"].timeout) == (True, 5.0)
    assert d["epoller"].call.startswith("epoll_wait(") and d["epoller"].has_timeout is False
    assert d["sleeper"].waits_on == "timer"
    assert d["main"].call == f"wait4({m['odd']})" and d["main"].has_timeout is False
    # read/accept name the fd as strace -y would
    assert d["reader"].call.startswith("read(3<pipe:[") and d["reader"].fd_info.kind == "pipe"
    assert d["acceptor"].call == f"accept4(7<TCP:[127.0.0.1:{m['tcp_port']}]>)"
    assert d["acceptor"].fd_info.kind == "tcp"


def test_describe_misc():
    def desc(name, *args):
        nr = {v: k for k, v in X86_64.items()}[name]
        line = f"{nr} " + " ".join(hex(a) for a in (args + (0,) * 6)[:6]) + " 0x7ffd 0x4000"
        return describe_blocking(parse_proc_syscall(line, "x86_64"))
    assert str(desc("wait4", 0xffffffff)) == "wait4(-1) no timeout"
    assert desc("wait4", 0xffffffff).waits_on == "any child"
    assert desc("select", 5, 1, 0, 0, 0).has_timeout is False
    assert desc("pselect6", 5, 1, 0, 0, 0x7ffd1000).has_timeout is True
    assert desc("ppoll", 0x1000, 2, 0).has_timeout is False
    assert desc("epoll_wait", 4, 0x1000, 16, 0xffffffffffffffff).has_timeout is False
    assert desc("epoll_pwait", 4, 0x1000, 16, 250).timeout == 0.25
    assert desc("sched_yield").waits_on.startswith("CPU")
    assert desc("nanosleep", 0x7ffd0000).waits_on == "timer"
    assert desc("recvfrom", 9).call == "recvfrom(9)"
    assert desc("futex", 0x1000, 1, 1).call == "futex(0x1000, WAKE)"
    assert describe_blocking(parse_proc_syscall("running")) is None
