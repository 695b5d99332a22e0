"""/proc/locks parsed (linux/file_locks.py) and read by the end-of-recording probe: a real
file read on this VM (tests/data/proc_locks/vm-2026-12-01.txt: an OFD lock, a POSIX lock
(lockf), a flock held by 12848 and waited for by 12900), plus lines the kernel also writes."""
from __future__ import annotations

from pathlib import Path

from tracer.linux.file_locks import LockLine, parse_locks
from tracer.record.probes.file_locks import file_locks_probe

DATA = Path(__file__).resolve().parents[1] / "data" / "proc_locks"
REAL = (DATA / "vm-2026-12-01.txt").read_text()


def test_real_proc_locks():
    assert parse_locks(REAL) == [
        LockLine(1, False, "OFDLCK", "ADVISORY", "WRITE", -1, "fe:00", 2146844),
        LockLine(2, False, "POSIX", "ADVISORY", "WRITE", 12848, "fe:00", 2146843),
        LockLine(3, False, "FLOCK", "ADVISORY", "WRITE", 12848, "fe:00", 2146842),
        LockLine(3, True, "FLOCK", "ADVISORY", "WRITE", 12900, "fe:00", 2146842)]


def test_other_kernel_lines_and_junk():
    text = ("4: LEASE  ACTIVE    READ  2381 00:14:9512 0 EOF\n"
            "5: POSIX  ADVISORY  READ 77 08:01:123 128 255\n"
            "garbage line\n" + "6: FLOCK ADVISORY WRITE ²5 fe:00:1 0 EOF\n" + "9" * 5000 + "\n")
    got = parse_locks(text)
    assert [(x.lock_id, x.kind, x.pid, x.inode) for x in got] == [(4, "LEASE", 2381, 9512),
                                                                 (5, "POSIX", 77, 123)]


def test_probe_keeps_the_tree_and_the_holders_it_waits_for(tmp_path):
    (tmp_path / "locks").write_text(REAL)
    evs = file_locks_probe([12900], None, root=str(tmp_path))
    assert [(e.pid, e.waiting, e.inode) for e in evs] == [(12848, False, 2146842),
                                                          (12900, True, 2146842)]
    assert file_locks_probe([4242], None, root=str(tmp_path)) == []
    assert file_locks_probe([1], None, root=str(tmp_path / "none")) == []
