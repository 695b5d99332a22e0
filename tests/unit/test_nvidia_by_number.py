"""NVIDIA ioctls on fds the log never opened (issue 32 item 6): known by their request number,
they decide like any GPU wait.

The table is the real H200 recordings (fixtures/gpu-h200, ``strace -f -ttt -T -yy``): each
ioctl line is read as it is and with its -yy fd paths removed (what ``strace -p`` of a process
started long before prints); the name known by the number alone must be the one the fd's kind
gives, and no other ioctl of those recordings (TCGETS, FIONREAD, ...) may be taken for NVIDIA's.
"""
from __future__ import annotations

import gzip
import re
from pathlib import Path

from tracer import events as ev
from tracer.gpu.nvidia import UNSEEN_FD, describe_ioctl
from tracer.strace.decode import to_event
from tracer.strace.lines import split_line

from test_rules import T0, info, run

H200 = Path(__file__).resolve().parents[2] / "fixtures" / "gpu-h200"
_FD_PATH = re.compile(r"(?<=[(=])(\d+)<(?:[^<>]|<[^<>]*>)*>")


def _ioctls(plain: bool):
    """(the -yy event, the same line's event without fd paths) of every completed ioctl."""
    for path in sorted(H200.glob("*.strace.gz")):
        with gzip.open(path, "rt") as f:
            for raw in f:
                if "ioctl(" not in raw:
                    continue
                text = raw.rstrip("\n")
                t, u = split_line(text), split_line(_FD_PATH.sub(r"\1", text))
                if t is None or t[2] != "call" or t[3] != "ioctl":
                    continue
                yield (to_event(0, 0, t[3], t[4], t[5], t[6], t[8], 0.0, False),
                       to_event(0, 0, u[3], u[4], u[5], u[6], u[8], 0.0, False))


def _desc(e):
    return describe_ioctl(e.fd_kind or "", e.request, e.request_name or None)


def test_nvidia_ioctls_are_known_by_their_number_alone():
    named = unnamed = 0
    for yy, bare in _ioctls(True):
        if yy.fd_kind not in ("nvidiactl", "nvidia", "nvidia-uvm"):
            continue
        assert bare.fd_kind is None
        d = _desc(bare)
        if d is None:
            unnamed += 1
            continue
        assert (d.name, d.device) == (_desc(yy).name, UNSEEN_FD), (yy.args, d)
        named += 1
    # measured: 465 of the start-up's 466 (NUMA_INFO has no fixed size to know it by)
    assert named >= 460 and unnamed <= 2, (named, unnamed)


def test_no_other_ioctl_is_taken_for_nvidia_s():
    others = [bare for yy, bare in _ioctls(True)
              if yy.fd_kind not in ("nvidiactl", "nvidia", "nvidia-uvm")]
    assert len(others) > 100
    assert [e.args for e in others if _desc(e) is not None] == []


def _uvm_wait(request: int, request_name=None):
    # thread 10 entered a UVM ioctl on fd 9 (opened before the log) and never returned; its
    # helper 11 polls with a 100 ms timeout (libcuda's event thread, unnamed)
    stuck = ev.IoctlCall(ts=T0 + 0.1, pid=10, tid=10, name="ioctl",
                         args=f"9, _IOC(_IOC_NONE, 0, {request:#x}, 0), 0x7fff5673ccb0",
                         fd=9, ongoing=True, request=request, request_name=request_name)
    polls = [ev.PollCall(ts=T0 + 0.2 + 0.1 * i, pid=10, tid=11, name="poll", ret=0, dur=0.1,
                         timeout=0.1, nfds=1) for i in range(40)]
    return run([stuck] + polls, [info(10, threads={10: "python3", 11: "python3"})])


def test_a_uvm_ioctl_that_never_returns_on_an_fd_never_opened_is_a_gpu_wait():
    r = _uvm_wait(0x19)                     # UVM_REGISTER_GPU_VASPACE, as strace prints it
    assert r.verdict == "blocked"
    assert (r.root_cause.get("pid"), r.root_cause.get("tid")) == (10, 10)
    assert "UVM_REGISTER_GPU_VASPACE" in str(r.root_cause) and "GPU driver" in str(r.root_cause)


def test_an_ioctl_strace_named_is_not_taken_for_uvm_s():
    r = _uvm_wait(0x1, "FIBMAP")          # 1 is UVM_RESERVE_VA too; strace named it
    assert "GPU" not in str(r.root_cause)


def test_an_untimed_log_of_rm_control_polls_is_a_gpu_spin_wait(tmp_path):
    """``strace -p`` of a process that polls the GPU, without times and without the open of
    its fd: the end of the log is a run of RM_CONTROL escapes and nothing else; a run of
    another ioctl that returns at once is not taken for one."""
    from tracer.load.trace import analyze_trace
    from tracer.strace.importer import import_strace
    rm = "ioctl(5, _IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2a, 0x20), 0x7ffd1a2b3c40) = 0\n"
    other = "ioctl(5, TCGETS, 0x7ffd1a2b3c40) = 0\n"
    got = {}
    for name, line in (("rm", rm), ("other", other)):
        log = tmp_path / f"{name}.log"
        log.write_text(line * 300)
        import_strace(str(log), str(tmp_path / f"{name}.htrace"))
        r = analyze_trace(str(tmp_path / f"{name}.htrace"))
        got[name] = (str(r.verdict), r.rule)
    assert got["rm"] == ("busy-waiting", "process-thread-gpu-spin-wait")
    assert got["other"][0] != "busy-waiting" or "gpu" not in got["other"][1]
