"""Rebuild the captured /proc tree in this directory from live processes (run as root or as the
owner of scenario.py; `python tests/data/procfs/capture.py`).

Copies, for scenario.py's process, its odd-named child and its zombie child: stat, status,
comm, cmdline, io, wchan, syscall, schedstat, the task/ directory, fd/ (as dangling symlinks
with the same link text), fdinfo/, ns/net, and net/* reduced to the header and the sockets those
processes own. environ is NOT copied: only RANK/LOCAL_RANK (which scenario.py is given) are
kept. Hand-made odd cases (vanished process and thread, an H200 worker from
fixtures/gpu-h200) are written by make_odd_cases(). manifest.json says which pid is what.
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = ("stat", "status", "comm", "cmdline", "io", "wchan", "syscall", "schedstat")
TASK_FILES = ("stat", "status", "comm", "wchan", "syscall", "schedstat")


def copy_file(src, dst):
    try:
        with open(src, "rb") as f:
            data = f.read()
    except OSError:
        return
    with open(dst, "wb") as f:
        f.write(data)


def capture(pid, inodes):
    dst = os.path.join(HERE, str(pid))
    os.makedirs(dst)
    for name in FILES:
        copy_file(f"/proc/{pid}/{name}", f"{dst}/{name}")
    try:
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    except OSError:  # a zombie has no memory left to read its environment from
        env = []
    with open(f"{dst}/environ", "wb") as f:
        f.write(b"".join(e + b"\0" for e in env if e.split(b"=")[0] in (b"RANK", b"LOCAL_RANK")))
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.makedirs(f"{dst}/task/{tid}")
        for name in TASK_FILES:
            copy_file(f"/proc/{pid}/task/{tid}/{name}", f"{dst}/task/{tid}/{name}")
    os.makedirs(f"{dst}/fd")
    os.makedirs(f"{dst}/fdinfo")
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
        if target.startswith("/tmp/bash_jobs") or target.startswith("/tmp/pytest"):
            target = "/tmp/scenario.log"  # the capturing harness's own files
        os.symlink(target, f"{dst}/fd/{fd}")
        copy_file(f"/proc/{pid}/fdinfo/{fd}", f"{dst}/fdinfo/{fd}")
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    try:
        os.makedirs(f"{dst}/ns")
        os.symlink(os.readlink(f"/proc/{pid}/ns/net"), f"{dst}/ns/net")
    except OSError:  # a zombie has left its namespaces
        pass
    return dst


def copy_net(pid, dst, inodes):
    os.makedirs(f"{dst}/net")
    for name in ("tcp", "tcp6", "udp", "udp6", "unix", "netlink"):
        try:
            lines = open(f"/proc/{pid}/net/{name}").read().splitlines(True)
        except OSError:  # zombie
            return
        keep = [ln for ln in lines[1:] if set(ln.split()) & inodes]
        with open(f"{dst}/net/{name}", "w") as f:
            f.writelines(lines[:1] + keep)


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(data)


# Thread lines of fixtures/gpu-h200/blocking_event.proc-snapshot.txt (pid 2312, an H200 host).
H200_TASKS = {
    2312: ("python3", "S 414 359 48", "futex_do_wait",
           "202 0x7ffda087ef30 0x189 0x0 0x0 0x0 0xffffffff 0x7ffda087ee80 0x7f19dee98e51"),
    2330: ("cuda00001400006", "S 2312 0 0", "poll_schedule_timeout.constprop.0",
           "7 0xba21c20 0x3 0xffffffff 0xba259d0 0x0 0x7 0x7f18ec7fed40 0x7f19def1b79d"),
    2334: ("cuda-EvtHandlr", "S 2312 1 1", "poll_schedule_timeout.constprop.0",
           "7 0x7f16d8000c20 0xb 0x64 0x0 0x0 0x0 0x7f18eab49d40 0x7f19def1b79d"),
}
H200_FDS = {0: "/dev/null", 1: "/srv/out/blocking_event.log", 10: "/dev/nvidia-uvm",
            11: "/dev/nvidia0", 15: "socket:[7961]", 16: "anon_inode:[eventfd]",
            30: "/dev/nvidiactl", 31: "anon_inode:[eventpoll]", 32: "/dev/shm/cuda.shm (deleted)"}


def make_odd_cases():
    """Hand-made: 99001 vanished (only cmdline left), 99002 with a thread dir emptied by its
    exit, 2312 the H200 worker of fixtures/gpu-h200 (stat fields not in the fixture are 0)."""
    write(f"{HERE}/99001/cmdline", "gone\0")
    write(f"{HERE}/99002/stat", "99002 (half gone) S 1 99002 99002 0 -1 0 0 0 0 0 5 6 0 0 20 0 "
          "2 0 1000 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
    write(f"{HERE}/99002/task/99002/comm", "half gone\n")
    os.makedirs(f"{HERE}/99002/task/99003", exist_ok=True)  # thread exited: empty directory
    for tid, (comm, fields, wchan, sysc) in H200_TASKS.items():
        state, ppid, ut, st = fields.split()
        stat = (f"{tid} ({comm}) {state} {ppid} {ppid} {ppid} 0 -1 0 0 0 0 0 {ut} {st} 0 0 20 0 "
                f"3 0 5000 " + " ".join(["0"] * 30) + "\n")
        write(f"{HERE}/2312/task/{tid}/stat", stat)
        write(f"{HERE}/2312/task/{tid}/comm", comm + "\n")
        write(f"{HERE}/2312/task/{tid}/wchan", wchan)
        write(f"{HERE}/2312/task/{tid}/syscall", sysc + "\n")
        if tid == 2312:
            write(f"{HERE}/2312/stat", stat)
            write(f"{HERE}/2312/cmdline", "python3\0tp_scenarios.py\0blocking_event\0")
    os.makedirs(f"{HERE}/2312/fd", exist_ok=True)
    for fd, target in H200_FDS.items():
        os.symlink(target, f"{HERE}/2312/fd/{fd}")


def main():
    for name in os.listdir(HERE):
        if name.isdigit() or name in ("stat", "manifest.json"):
            path = os.path.join(HERE, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    env = {"PATH": "/usr/bin:/bin", "RANK": "3", "LOCAL_RANK": "1"}
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "scenario.py"),
                             "/tmp/hangtrace-capture.sock"], stdout=subprocess.PIPE, env=env)
    info = None
    try:
        info = json.loads(proc.stdout.readline())
        inodes = set()
        for pid in (info["pid"], info["odd"], info["zombie"]):
            dst = capture(pid, inodes)
            copy_net(pid, dst, inodes)
        btime = [ln for ln in open("/proc/stat") if ln.startswith("btime")]
        with open(os.path.join(HERE, "stat"), "w") as f:
            f.writelines(btime)
        info["btime"] = int(btime[0].split()[1])
        with open(os.path.join(HERE, "manifest.json"), "w") as f:
            json.dump(info, f, indent=1)
        make_odd_cases()
    finally:
        if info:
            os.kill(info["odd"], 9)  # its parent would not reap it once killed itself
        proc.kill()
        proc.wait()
        if os.path.exists("/tmp/hangtrace-capture.sock"):
            os.remove("/tmp/hangtrace-capture.sock")


if __name__ == "__main__":
    main()
