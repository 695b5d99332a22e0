"""Lines that are not strace's never decide (issue 32 item 4): a log pasted from a terminal
with the shell prompt, the strace command, a ps listing and a note around it is counted as
that many lines not understood, and judged as the log alone is."""
from __future__ import annotations

from pathlib import Path

import pytest

from tracer.load.trace import analyze_trace
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


@pytest.mark.parametrize("line,argv", [
    ("root@gpu-node:~# strace -f -e trace=futex -o hang.log python3 serve.py --port 8000",
     ["python3", "serve.py", "--port", "8000"]),
    ("$ strace -ff -ttt -T -yy -s 0 -o /tmp/x python -m sglang.launch_server --tp 2 2> e.log",
     ["python", "-m", "sglang.launch_server", "--tp", "2"]),
    ("sudo timeout 30 strace -fk -o/tmp/t ./a.out x", ["./a.out", "x"]),
    ("$ sudo strace -f -tt --output=x.log python3 train.py", ["python3", "train.py"]),
    ("strace -- ls -l", ["ls", "-l"]),
    ("root@gpu-node:~# strace -f -p 3092 2> hang.log", None),     # an attach names no program
    ("root@gpu-node:~# cat hang.log", None),
    ("# it had hung for an hour", None),
    ("strace -e 'trace=futex python3 x", None),                   # quoting that does not parse
])
def test_the_program_a_strace_command_names(line, argv):
    from tracer.strace.cmdline import named_program
    assert named_program(line) == argv


def test_a_command_line_before_the_log_names_a_process_the_log_does_not(tmp_path):
    """A log traced with -e trace=futex has no execve: the pasted command names its program;
    a log whose execve is there keeps what the execve said."""
    log = tmp_path / "futex.log"
    log.write_text("root@gpu-node:~# strace -f -e trace=futex python3 serve.py --port 8000\n"
                   "4101  futex(0x7f0a, FUTEX_WAIT_PRIVATE, 2, NULL\n")
    res = import_strace(str(log), str(tmp_path / "t.htrace"))
    (p,) = res.processes
    assert p.cmdline == ["python3", "serve.py", "--port", "8000"] and res.unparsed == 1
    with_exec = tmp_path / "exec.log"
    with_exec.write_text("$ strace -f python3 other.py\n"
                         '4101  execve("/usr/bin/python3", ["python3", "serve.py"], 0x7ffd /* 9 '
                         "vars */) = 0\n4101  futex(0x7f0a, FUTEX_WAIT_PRIVATE, 2, NULL\n")
    (p,) = import_strace(str(with_exec), str(tmp_path / "u.htrace")).processes
    assert p.cmdline == ["python3", "serve.py"]


@pytest.mark.parametrize("workers", [None, 2])
def test_the_named_program_survives_a_sharded_import(tmp_path, workers):
    log = tmp_path / "big.log"
    log.write_text("root@gpu-node:~# strace -f -e trace=futex python3 serve.py\n"
                   + "4101  futex(0x7f0a, FUTEX_WAKE_PRIVATE, 1) = 0\n" * 20000
                   + "4101  futex(0x7f0a, FUTEX_WAIT_PRIVATE, 2, NULL\n")
    res = import_strace(str(log), str(tmp_path / "t.htrace"), workers=workers)
    assert [p.cmdline for p in res.processes] == [["python3", "serve.py"]]
