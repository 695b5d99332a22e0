"""What a traced process names is read as that process would read it (issue 35, item 1).

A process running as ``nobody`` enables the Flight Recorder and names a dump prefix whose
files are a FIFO, links to a root-only file and to /dev/zero, a hard link to a root-only file,
a folder reached through a link into a root-only folder, and one real dump it owns; a chrooted
process names a prefix whose folder is an absolute link that would reach the host's files.
The probe must end at once, read the one real dump, and put nothing of the others in the
trace. Needs root (to make the processes of another user and the chroot)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

from tracer.linux.target_files import TargetFileRefused, read_target_file
from tracer.record.probes.flight_recorder import flight_recorder_probe

pytestmark = [pytest.mark.live,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (another user, chroot)")]

NOBODY = 65534
DUMP = Path(__file__).resolve().parents[2] / "fixtures" / "flight-recorder" / "skip" / "fr_rank_1"
SECRET = b"root-only secret line\n"
SLEEPER = "import time\nwhile True: time.sleep(1)\n"


@pytest.fixture
def world() -> Iterator[Path]:
    """A folder every user may enter (pytest's tmp_path is root's own, 0700)."""
    d = Path(tempfile.mkdtemp(prefix="ht-target-files-"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _start(argv: list, env: dict, **kw: object) -> subprocess.Popen:
    """The target started and asleep in its loop (SLEEPER), so that its set-up (a chroot, a
    setuid) is done, however long a busy machine takes (a fixed 0.4 s was not always enough)."""
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, **kw)  # type: ignore[call-overload]
    deadline = time.monotonic() + 60.0      # only bounds a hang
    while "nanosleep" not in _wchan(p.pid):
        assert p.poll() is None, "the target exited"
        assert time.monotonic() < deadline, "the target never reached its sleep loop"
        time.sleep(0.02)
    return p


def _wchan(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return ""


def _stop(p: subprocess.Popen) -> None:
    p.kill()
    p.wait(timeout=10)


def test_hostile_dump_paths_are_refused_and_the_real_one_is_read(world: Path) -> None:
    secret = world / "secret"
    secret.write_bytes(SECRET)
    os.chmod(secret, 0o600)
    fr = world / "fr"
    fr.mkdir()
    os.chown(fr, NOBODY, NOBODY)
    os.mkfifo(fr / "d_1")
    os.chown(fr / "d_1", NOBODY, NOBODY)
    os.symlink(secret, fr / "d_2")
    os.symlink("/dev/zero", fr / "d_3")
    os.link(secret, fr / "d_4")
    shutil.copy(DUMP, fr / "d_5")
    os.chown(fr / "d_5", NOBODY, NOBODY)
    hidden = world / "rootonly"
    hidden.mkdir(mode=0o700)
    (hidden / "d_6").write_bytes(DUMP.read_bytes())
    os.chown(hidden / "d_6", NOBODY, NOBODY)
    os.symlink(hidden, world / "through")
    env = dict(os.environ, TORCH_NCCL_TRACE_BUFFER_SIZE="1",
               TORCH_FR_DUMP_TEMP_FILE=f"{fr}/d_",
               TORCH_NCCL_DEBUG_INFO_TEMP_FILE=f"{world}/through/d_")
    p = _start([sys.executable, "-c", SLEEPER], env, user=NOBODY, group=NOBODY,
               extra_groups=[])
    try:
        t0 = time.monotonic()
        events = flight_recorder_probe([p.pid])
        took = time.monotonic() - t0
    finally:
        _stop(p)
    assert took < 3.0                                   # the FIFO blocked nothing
    by_path = {e.path: e for e in events}
    assert set(by_path) == {f"{fr}/d_{n}" for n in range(1, 6)}   # d_6: folder not entered
    assert "not a regular file" in by_path[f"{fr}/d_1"].error
    assert "symbolic link" in by_path[f"{fr}/d_2"].error
    assert "symbolic link" in by_path[f"{fr}/d_3"].error
    assert by_path[f"{fr}/d_4"].error.startswith("not read: ")    # root's 0600, as nobody
    for n in (1, 2, 3, 4):
        e = by_path[f"{fr}/d_{n}"]
        assert (e.size, e.mtime, e.entries) == (0, None, [])      # nothing of the file kept
    real = by_path[f"{fr}/d_5"]
    assert real.error == "" and real.entries and real.size == DUMP.stat().st_size


def test_a_chrooted_target_s_absolute_link_stays_in_its_root(world: Path) -> None:
    jail = world / "jail"
    jail.mkdir()
    host_fr = world / "host_fr"            # on the host: what the link would reach
    host_fr.mkdir()
    shutil.copy(DUMP, host_fr / "d_7")
    os.chown(host_fr / "d_7", NOBODY, NOBODY)
    os.symlink(str(host_fr), jail / "fr")  # absolute: inside the jail it names jail/<host_fr>
    (jail / "own").mkdir()
    shutil.copy(DUMP, jail / "own" / "d_8")
    os.chown(jail / "own" / "d_8", NOBODY, NOBODY)
    script = (f"import os, time\nos.chroot({str(jail)!r})\nos.chdir('/')\nos.setgroups([])\n"
              f"os.setgid({NOBODY})\nos.setuid({NOBODY})\n" + SLEEPER)
    env = dict(os.environ, TORCH_FR_BUFFER_SIZE="1", TORCH_FR_DUMP_TEMP_FILE="/fr/d_",
               TORCH_NCCL_DEBUG_INFO_TEMP_FILE="/own/d_")
    p = _start([sys.executable, "-c", script], env)
    try:
        events = flight_recorder_probe([p.pid])
        with pytest.raises(TargetFileRefused):
            read_target_file(p.pid, "/fr/d_7", max_bytes=1 << 20)
        own = read_target_file(p.pid, "/own/d_8", max_bytes=1 << 20)
    finally:
        _stop(p)
    assert [e.path for e in events] == ["/own/d_8"] and events[0].error == ""
    assert own.data == DUMP.read_bytes()


def test_size_and_owner_bounds(world: Path) -> None:
    big = world / "big"
    big.write_bytes(b"x" * 4096)
    os.chown(big, NOBODY, NOBODY)
    mine = world / "mine"
    mine.write_bytes(b"root's, readable by all\n")
    os.chmod(mine, 0o644)
    p = _start([sys.executable, "-c", SLEEPER], dict(os.environ), user=NOBODY, group=NOBODY,
               extra_groups=[])
    try:
        with pytest.raises(TargetFileRefused, match="larger than the bound"):
            read_target_file(p.pid, str(big), max_bytes=1024)
        assert read_target_file(p.pid, str(big), max_bytes=4096).size == 4096
        with pytest.raises(TargetFileRefused, match="owned by uid 0"):
            read_target_file(p.pid, str(mine), max_bytes=1024)
        assert read_target_file(p.pid, str(mine), max_bytes=1024, owned=False).data \
            == mine.read_bytes()                       # a file it may read (a source file)
    finally:
        _stop(p)


MAPPER = """import mmap, sys, time
f = open(sys.argv[1], 'rb')
m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
print('READY', flush=True)
while True: time.sleep(1)
"""


def test_a_mapped_file_is_read_as_mapped_not_by_its_name(world: Path) -> None:
    """The symbols of a mapped library are read through /proc/PID/map_files (the inode mapped):
    a FIFO or a link to /dev/zero put where maps names the file (it was unlinked after the
    mmap) never blocks nor is read, and the real ELF's symbols still come."""
    from tracer.record.probes.elfsyms import read_maps, symbols
    lib = world / "libpython3.99.so.1.0"
    shutil.copyfile(os.path.realpath(sys.executable), lib)
    p = subprocess.Popen([sys.executable, "-c", MAPPER, str(lib)], stdout=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "READY"
        lib.unlink()
        os.mkfifo(lib)                              # maps now names a FIFO
        mine = [m for m in read_maps(p.pid) if m.path == str(lib)]
        assert mine and mine[0].file.startswith(f"/proc/{p.pid}/map_files/")
        t0 = time.monotonic()
        table = symbols(mine[0].path, mine[0].file)
        assert time.monotonic() - t0 < 5
        assert table.names and not table.why, table.why   # the python binary's own symbols
        assert "not a regular file" in symbols(str(lib)).why      # the name alone: refused
        lib.unlink()
        os.symlink("/dev/zero", lib)
        assert "not a regular file" in symbols(str(lib)).why
    finally:
        _stop(p)


def test_open_mapped_file_refuses_fifos_devices_and_large_files(world: Path) -> None:
    from tracer.linux.target_files import open_mapped_file
    fifo = world / "fifo"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        with pytest.raises(TargetFileRefused, match="not a regular file"):
            open_mapped_file(path, max_bytes=1 << 20)
    big = world / "big"
    big.write_bytes(b"x" * 4096)
    with pytest.raises(TargetFileRefused, match="larger than the bound"):
        open_mapped_file(str(big), max_bytes=100)
    with open_mapped_file(str(big), max_bytes=4096) as f:
        assert f.read() == b"x" * 4096
