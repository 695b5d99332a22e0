"""The architecture of an strace log (strace/arch.py), and an aarch64 log like the public
Triton one (``strace -f -tt``, no -y, stderr). No aarch64 machine was at hand: the aarch64 lines
below are written by hand in strace's output format, with the names and numbers of the
kernel's aarch64 table (asm-generic/unistd.h; tracer/linux/syscall_table.py AARCH64) and
aarch64 user addresses; the x86_64 ones are real (fixtures, tests/data/strace)."""
import gzip
import os

import pytest

from tracer import events as ev
from tracer.load.trace import analyze_trace
from tracer.tracefile.format import TraceReader
from tracer.strace.arch import X86_ONLY, log_machine
from tracer.strace.lines import parse_line
from tracer.strace.importer import import_strace
from tracer.linux.syscall_table import AARCH64, X86_64, syscall_number

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tests/
DATA = os.path.join(HERE, "data", "strace")
FIXTURES = os.path.join(HERE, "..", "fixtures", "gpu-h200")

# A Triton-like CUDA start-up on aarch64, as strace -f -tt prints it on stderr without -y:
# no pid column until the second task exists, generic calls only (openat, ppoll, pipe2, dup3,
# eventfd2, epoll_pwait, faccessat), NVIDIA ioctls on fds known only from their openat.
TRITON_AARCH64 = """\
09:14:02.100001 execve("/opt/tritonserver/bin/tritonserver", ["tritonserver", "--model-repository=/models"], 0xffffd2c3a1f8 /* 31 vars */) = 0
09:14:02.100412 faccessat(AT_FDCWD, "/etc/ld.so.preload", R_OK) = -1 ENOENT (No such file or directory)
09:14:02.100523 openat(AT_FDCWD, "/usr/lib/aarch64-linux-gnu/libcuda.so.1", O_RDONLY|O_CLOEXEC) = 3
09:14:02.100601 close(3)                = 0
09:14:02.100700 set_tid_address(0xffff8a5e10f0) = 4242
09:14:02.201000 openat(AT_FDCWD, "/dev/nvidiactl", O_RDWR) = 3
09:14:02.201100 ioctl(3, _IOC(_IOC_READ|_IOC_WRITE, 0x46, 0xd2, 0x48), 0xffffd2c39f10) = 0
09:14:02.201200 ioctl(3, _IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2b, 0x20), 0xffffd2c39e90) = 0
09:14:02.201300 openat(AT_FDCWD, "/dev/nvidia-uvm", O_RDWR|O_CLOEXEC) = 4
09:14:02.201400 ioctl(4, _IOC(_IOC_NONE, 0, 0x1, 0x3000), 0) = 0
09:14:02.201500 openat(AT_FDCWD, "/dev/nvidia0", O_RDWR|O_CLOEXEC) = 5
09:14:02.201600 dup3(5, 17, O_CLOEXEC)  = 17
09:14:02.201700 ioctl(17, _IOC(_IOC_READ|_IOC_WRITE, 0x46, 0xc9, 0x30), 0xffffd2c39d70) = 0
09:14:02.201800 eventfd2(0, EFD_CLOEXEC|EFD_NONBLOCK) = 6
09:14:02.201900 pipe2([7, 8], O_CLOEXEC) = 0
09:14:02.202000 clone(child_stack=0xffff89dfe9f0, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID, parent_tid=[4250], tls=0xffff89dff8e0, child_tidptr=0xffff89dff270) = 4250
[pid  4250] 09:14:02.202100 prctl(PR_SET_NAME, "cuda-EvtHandlr") = 0
[pid  4250] 09:14:02.202200 ppoll([{fd=6, events=POLLIN}, {fd=17, events=POLLIN}, {fd=7, events=POLLIN}], 3, {tv_sec=0, tv_nsec=100000000}, NULL, 8 <unfinished ...>
[pid  4242] 09:14:02.202300 write(8, "\\1", 1) = 1
[pid  4242] 09:14:02.202400 ioctl(3, _IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2a, 0x20), 0xffffd2c39e50) = 0
[pid  4250] 09:14:02.302250 <... ppoll resumed>) = 0 (Timeout)
[pid  4242] 09:14:02.402400 write(2, "I1130 09:14:02.402 model_lifecycle.cc:469] loading: simple:1\\n", 60) = 60
"""


def test_rule_proof_and_its_limits():
    x86 = {"open", "stat", "poll", "access", "arch_prctl", "pipe", "dup2", "epoll_wait"}
    assert x86 <= X86_ONLY and not X86_ONLY & set(AARCH64.values())
    assert log_machine({"openat", "poll"}, {})[0] == "x86_64"
    # openat without open, newfstatat, ppoll, pipe2...: no proof (x86_64 programs call them)
    generic = {"openat", "newfstatat", "fstat", "ppoll", "pipe2", "dup3", "epoll_pwait"}
    assert log_machine(generic, {}) == (
        "unknown", "no call or syscall number that exists on only one architecture")
    # strace -n numbers prove it: openat is 56 on aarch64, 257 on x86_64
    assert log_machine(generic, {"openat": 56, "ppoll": 73})[0] == "aarch64"
    assert log_machine({"openat"}, {"openat": 257})[0] == "x86_64"
    assert log_machine({"openat"}, {"openat": 437})[0] == "unknown"   # 424+: every arch
    # aarch64 libraries and no x86_64-only call: inferred, and said to be
    machine, why = log_machine(generic, {}, {"aarch64-linux-gnu"})
    assert machine == "aarch64" and why.startswith("inferred")
    assert log_machine(generic | {"access"}, {}, {"aarch64-linux-gnu"})[0] == "x86_64"


def test_strace_n_numbers_are_parsed():
    line = parse_line("23308 15:52:43.174873 [ 257] openat(AT_FDCWD, \"/etc/ld.so.cache\", "
                      "O_RDONLY|O_CLOEXEC) = 3")
    assert (line.tid, line.nr, line.name, line.ret) == (23308, 257, "openat", 3)
    line = parse_line("[pid  4250] 09:14:02.202000 [  56] openat(AT_FDCWD, \"/dev/nvidiactl\", "
                      "O_RDWR) = 3")
    assert (line.tid, line.nr, line.name) == (4250, 56, "openat")
    assert syscall_number("openat", "aarch64") == 56 and X86_64[257] == "openat"
    assert parse_line("[ Process PID=12 runs in 32 bit mode. ]").kind == "info"


@pytest.mark.parametrize("numbers", [False, True])
def test_triton_like_aarch64_log(tmp_path, numbers):
    text = TRITON_AARCH64
    if numbers:                       # strace -n: each call with its aarch64 number
        out = []
        for ln in text.splitlines():
            line = parse_line(ln)
            if line is not None and line.kind in ("call", "unfinished") and line.name:
                nr = syscall_number(line.name, "aarch64")
                head = ln.index(line.name + "(")
                ln = f"{ln[:head]}[{nr:4d}] {ln[head:]}"
            out.append(ln)
        text = "\n".join(out) + "\n"
    log = tmp_path / "triton.log"
    log.write_text(text)
    res = import_strace(str(log), str(tmp_path / "t.htrace"))
    trace = TraceReader(str(tmp_path / "t.htrace"))
    evs = list(trace.events())
    assert res.unparsed == 0
    assert trace.info.header["machine"] == "aarch64"
    why = trace.info.header["options"]["machine_evidence"]
    assert why.startswith("strace -n numbers") if numbers else why.startswith("inferred")
    calls = [e for e in evs if isinstance(e, ev.Syscall)]
    assert {e.tid for e in calls} == {4242, 4250}        # no phantom thread 0
    assert [p.pid for p in res.processes] == [4242]
    io = [(e.fd_kind, e.request_name) for e in calls if isinstance(e, ev.IoctlCall)]
    assert io[0][0] == "nvidiactl" and io[2][0] == "nvidia-uvm" and io[3][0] == "nvidia"
    assert all(name for _, name in io), io               # every NVIDIA request named
    assert ("nvidiactl", "RM_CONTROL") in io
    [poll] = [e for e in calls if isinstance(e, ev.PollCall)]
    assert set(poll.fd_kinds) == {"eventfd", "nvidia", "pipe"} and poll.timed_out
    report = analyze_trace(str(tmp_path / "t.htrace"))
    evt = [t for p in report.processes for t in p.threads if t.tid == 4250]
    assert evt and evt[0].name == "cuda-EvtHandlr"
    # the 1-byte write to its own pipe (pipe2 above) is a wake-up, not output: only the
    # 60-byte log line to stderr counts
    [main] = [t for p in report.processes for t in p.threads if t.tid == 4242]
    assert main.counters["output_bytes"] == 60


def test_x86_logs_are_said_to_be_x86(tmp_path):
    res = import_strace(os.path.join(FIXTURES, "spin.strace.gz"), str(tmp_path / "s.htrace"))
    assert res.machine == "x86_64"
    header = TraceReader(str(tmp_path / "s.htrace")).info.header
    assert header["machine"] == "x86_64" and "poll" in header["options"]["machine_evidence"]
    with gzip.open(os.path.join(FIXTURES, "spin.strace.gz"), "rt") as f:
        assert " poll(" in f.read()
