"""A target that execs a setuid program names nothing root reads for it (issue 46, item 3).

A process of ``nobody`` names a Flight Recorder prefix inside a 0700 folder of root that holds
a 0600 dump of root, then execs a setuid-root program (its ids become real 65534, effective,
saved and file-system 0, and the kernel marks the exec AT_SECURE). Before, the probe took the
effective uid: it listed root's folder and copied the dump into the trace. It must read
nothing of it, and say why. A relative prefix is looked up from the target's working folder,
where torch writes it (item 10). Needs root (setuid, another user) and a C compiler."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

from tracer.analysis.job.flight_recorder import read_recorder
from tracer.linux.target_files import TargetFileRefused, list_target_dir, target_creds
from tracer.record.probes.flight_recorder import flight_recorder_probe

pytestmark = [pytest.mark.live,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (setuid, another user)"),
              pytest.mark.skipif(shutil.which("cc") is None or shutil.which("setpriv") is None,
                                 reason="needs cc and setpriv")]

NOBODY = 65534
DUMP = Path(__file__).resolve().parents[2] / "fixtures" / "flight-recorder" / "skip" / "fr_rank_1"
AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
PAUSE = "#include <unistd.h>\nint main(void) { for (;;) pause(); }\n"


@pytest.fixture
def world() -> Iterator[Path]:
    """A folder every user may enter (pytest's tmp_path is root's own, 0700), on a file system
    that honours setuid."""
    d = Path(tempfile.mkdtemp(prefix="ht-setuid-", dir="/var/tmp"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _setuid_pause(world: Path) -> Path:
    src, exe = world / "pause.c", world / "suid_pause"
    src.write_text(PAUSE)
    subprocess.run(["cc", "-O", "-o", str(exe), str(src)], check=True)
    os.chown(exe, 0, 0)
    os.chmod(exe, 0o4755)
    return exe


def _start(argv: list, env: dict, program: str, cwd: str = "/") -> subprocess.Popen:
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:          # exec'd and running ``program`` (setpriv's exec)
        try:
            if os.readlink(f"/proc/{p.pid}/exe") == os.path.realpath(program):
                break
        except OSError:
            pass
        time.sleep(0.05)
    assert p.poll() is None
    return p


def _stop(p: subprocess.Popen) -> None:
    p.kill()
    p.wait(timeout=10)


def test_a_setuid_target_s_dump_prefix_is_not_read(world: Path) -> None:
    secret_dir = world / "R"
    secret_dir.mkdir(mode=0o700)
    shutil.copy(DUMP, secret_dir / "s_1")
    os.chmod(secret_dir / "s_1", 0o600)
    exe = _setuid_pause(world)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TORCH_FR_BUFFER_SIZE": "1",
           "TORCH_FR_DUMP_TEMP_FILE": f"{secret_dir}/s_"}
    p = _start(AS_NOBODY + [str(exe)], env, str(exe))
    try:
        creds = target_creds(p.pid)
        assert creds is not None and creds.uids == (NOBODY, 0, 0, 0)   # the exec took effect
        events = flight_recorder_probe([p.pid])
        with pytest.raises(TargetFileRefused, match="setuid"):
            list_target_dir(p.pid, str(secret_dir))
    finally:
        _stop(p)
    assert all(e.path != f"{secret_dir}/s_1" for e in events), "root's folder was listed"
    assert all(e.entries == [] and e.size == 0 and e.mtime is None for e in events)
    [e] = events                                       # the probe says why it read nothing
    assert e.path == f"{secret_dir}/s_" and e.pid == p.pid
    assert e.error.startswith("not read: ") and "setuid" in e.error, e.error
    [note] = read_recorder(events).notes               # the report says it once
    assert note.count("not read") == 1 and "65534/0/0/0" in note, note


def test_a_relative_prefix_is_looked_up_from_the_target_s_working_folder(world: Path) -> None:
    work = world / "job"
    (work / "fr").mkdir(parents=True)
    shutil.copy(DUMP, work / "fr" / "d_3")
    for path in (work, work / "fr", work / "fr" / "d_3"):
        os.chown(path, NOBODY, NOBODY)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TORCH_FR_BUFFER_SIZE": "1",
           "TORCH_FR_DUMP_TEMP_FILE": "fr/d_"}
    sleep = shutil.which("sleep") or "/bin/sleep"
    p = _start(AS_NOBODY + [sleep, "300"], env, sleep, cwd=str(work))
    try:
        events = flight_recorder_probe([p.pid])
    finally:
        _stop(p)
    [e] = events
    assert (e.path, e.rank, e.error) == (f"{work}/fr/d_3", 3, "")
    assert e.entries and e.size == DUMP.stat().st_size


def test_a_chrooted_target_s_relative_prefix_is_found_from_its_working_folder(world: Path
                                                                               ) -> None:
    """In a chroot, /proc/PID/cwd reads as the host sees it (JAIL/own): the prefix is looked up
    from /own inside the target's root, not from the host's JAIL/own nor from /."""
    import sys
    jail = world / "jail"
    (jail / "own").mkdir(parents=True)
    shutil.copy(DUMP, jail / "own" / "d_8")
    os.chown(jail / "own" / "d_8", NOBODY, NOBODY)
    script = (f"import os, time\nos.chroot({str(jail)!r})\nos.chdir('/own')\nos.setgroups([])\n"
              f"os.setgid({NOBODY})\nos.setuid({NOBODY})\nprint('READY', flush=True)\n"
              "while True: time.sleep(1)\n")
    env = dict(os.environ, TORCH_FR_BUFFER_SIZE="1", TORCH_FR_DUMP_TEMP_FILE="d_")
    p = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "READY"
        events = flight_recorder_probe([p.pid])
    finally:
        _stop(p)
    [e] = events
    assert (e.path, e.rank, e.error) == ("/own/d_8", 8, "")
    assert e.entries
