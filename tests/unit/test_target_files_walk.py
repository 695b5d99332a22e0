"""linux/target_files.py without openat2: the fallback walk follows no link and no ``..``, and
the credentials of a process come from its status file (tests/live/test_target_files.py has
the hostile files with real processes of another user)."""
from __future__ import annotations

import errno
import os
import sys

import pytest

from tracer.linux import target_files as tf


def test_the_walk_without_openat2_follows_no_link(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(b"ok")
    os.symlink(tmp_path / "d", tmp_path / "link")
    root = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    try:
        fd = tf._open_without_links(root, "/d/f", tf._OPEN_FLAGS)
        assert os.read(fd, 10) == b"ok"
        os.close(fd)
        for path, code in (("link/f", errno.ELOOP), ("d/../d/f", errno.EXDEV)):
            with pytest.raises(OSError) as e:
                tf._open_without_links(root, path, tf._OPEN_FLAGS)
            assert e.value.errno in (code, errno.ENOTDIR)
    finally:
        os.close(root)


def test_credentials_of_this_process():
    creds = tf.target_creds(os.getpid())
    assert creds is not None and creds.uids[1] == os.geteuid()
    assert creds.gids[1] == os.getegid() and set(creds.groups) == set(os.getgroups())
    assert tf.target_creds(2 ** 22 + 5) is None            # no such process


def _auxv(pairs, word=8):
    return b"".join(k.to_bytes(word, sys.byteorder) + v.to_bytes(word, sys.byteorder)
                    for k, v in pairs + [(0, 0)])


@pytest.mark.parametrize("data, want", [
    (_auxv([(33, 0x7FFD12345000), (16, 0xBFEBFBFF), (6, 4096), (23, 0), (25, 0x7FFD0000)]),
     False),
    (_auxv([(33, 0x7FFD12345000), (6, 4096), (23, 1), (25, 0x7FFD0000)]), True),
    (_auxv([(32, 0xF7F00000), (33, 0xF7EFF000), (6, 4096), (23, 1)], word=4), True),
    (_auxv([(32, 0xF7F00000), (6, 4096), (23, 0)], word=4), False),
    (b"", None), (b"\xff" * 64, None)])
def test_at_secure_of_an_auxiliary_vector(data, want):
    assert tf.parse_at_secure(data) is want


def test_this_process_s_auxiliary_vector_reads():
    with open("/proc/self/auxv", "rb") as f:
        assert tf.parse_at_secure(f.read()) is False


def _fake_proc(tmp_path, uids, gids, auxv):
    d = tmp_path / "proc" / "77"
    d.mkdir(parents=True)
    (d / "status").write_text(f"Name:\tsu\nUid:\t{uids}\nGid:\t{gids}\nGroups:\t65534 \n")
    (d / "auxv").write_bytes(auxv)
    return str(tmp_path / "proc")


@pytest.mark.parametrize("uids, gids, secure, words", [
    ("65534\t0\t0\t0", "65534\t65534\t65534\t65534", 1, "user ids 65534/0/0/0"),   # exec su
    ("65534\t65534\t65534\t65534", "65534\t0\t0\t0", 1, "group ids 65534/0/0/0"),  # setgid
    ("1000\t1000\t1000\t1000", "1000\t1000\t1000\t1000", 1, "AT_SECURE"),  # file capabilities
    ("0\t1000\t0\t1000", "0\t0\t0\t0", 0, "user ids 0/1000/0/1000"),      # seteuid for a while
])
def test_a_process_whose_ids_differ_or_that_started_secure_is_refused(tmp_path, uids, gids,
                                                                        secure, words):
    """Issue 46, item 3: the effective uid of a setuid program let root read root's files."""
    root = _fake_proc(tmp_path, uids, gids, _auxv([(6, 4096), (23, secure)]))
    why = tf.privilege_refusal(77, tf.target_creds(77, root), root)
    assert why is not None and words in why and "reads no file it names" in why


def test_a_plain_process_is_read_as_its_real_user(tmp_path):
    root = _fake_proc(tmp_path, "65534\t65534\t65534\t65534", "65534\t65534\t65534\t65534",
                      _auxv([(6, 4096), (23, 0)]))
    creds = tf.target_creds(77, root)
    assert creds is not None and tf.privilege_refusal(77, creds, root) is None


@pytest.mark.parametrize("ids", ["\u00b2\t0\t0\t0", "1" * 30 + "\t0\t0\t0", "-1\t0\t0\t0"])
def test_credentials_that_do_not_read_are_none(tmp_path, ids):
    root = _fake_proc(tmp_path, ids, "0\t0\t0\t0", _auxv([]))
    assert tf.target_creds(77, root) is None
