"""linux/target_files.py without openat2: the fallback walk follows no link and no ``..``, and
the credentials of a process come from its status file (tests/live/test_target_files.py has
the hostile files with real processes of another user)."""
from __future__ import annotations

import errno
import os

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
