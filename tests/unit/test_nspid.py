"""linux/pidns.py: the NSpid line of /proc/PID/status (real lines, kernels 4.1 to 6.18, a
host, a container seen from the host, two nested namespaces, and what is not one), and the
view that says whose pids /proc shows."""
from __future__ import annotations

import os

import pytest

from tracer.linux import pidns

# Lines as /proc/PID/status writes them (tab after the colon, tabs between numbers).
NSPID_TABLE = [
    # the host, seen from the host
    ("Name:\tsleep\nTgid:\t17545\nPid:\t17545\nNStgid:\t17545\nNSpid:\t17545\n", (17545,)),
    # a process of `unshare --pid --fork` seen from the host: its pid there is 1
    ("Tgid:\t17634\nNgid:\t0\nPid:\t17634\nPPid:\t17633\nNStgid:\t17634\t1\n"
     "NSpid:\t17634\t1\nNSpgid:\t17543\t0\nNSsid:\t17543\t0\n", (17634, 1)),
    # the same, read inside the namespace (/proc mounted there)
    ("Pid:\t1\nNSpid:\t1\nNSpgid:\t0\n", (1,)),
    # a namespace nested in a namespace
    ("NSpid:\t4123\t57\t7\n", (4123, 57, 7)),
    # a kernel before 4.1: no NSpid line
    ("Name:\tbash\nTgid:\t880\nPid:\t880\nPPid:\t1\n", ()),
    # not numbers: refused rather than guessed
    ("NSpid:\t12\tx\n", ()),
    ("NSpid:\n", ()),
    ("NSpid:\t\u0661\u0662\n", ()),            # Arabic-Indic digits pass str.isdigit()
    ("NSpid:\t" + "9" * 40 + "\n", ()),
]


@pytest.mark.parametrize("text,want", NSPID_TABLE)
def test_nspid_is_read_from_real_status_lines(text, want):
    assert pidns.parse_nspid(text) == want


def test_inner_pids_are_nspid_less_its_first(tmp_path):
    (tmp_path / "4123").mkdir()
    (tmp_path / "4123" / "status").write_text("Pid:\t4123\nNSpid:\t4123\t7\n")
    (tmp_path / "5").mkdir()
    (tmp_path / "5" / "status").write_text("Pid:\t5\nNSpid:\t5\n")
    assert pidns.inner_pids(4123, str(tmp_path)) == [7]
    assert pidns.inner_pids(5, str(tmp_path)) == []
    assert pidns.inner_pids(6, str(tmp_path)) == []          # gone


def test_the_host_view_gives_the_bpf_programs_host_pids():
    view = pidns.PidView()
    assert view.host and view.bpf_settings() == {"pidns_dev": 0, "pidns_ino": 0}
    inside = pidns.PidView(dev=os.makedev(0, 4), ino=4026532175, own_ino=4026532175)
    assert not inside.host
    # the kernel compares the nsfs device as it keeps it (MKDEV: major << 20 | minor)
    assert inside.bpf_settings() == {"pidns_dev": 4, "pidns_ino": 4026532175}
    assert pidns.kernel_dev(os.makedev(3, 7)) == 3 << 20 | 7


def test_the_view_of_this_proc_is_this_process_s_namespace():
    view = pidns.pid_view()
    assert view.known and view.proc_is_own
    assert view.ino == os.stat("/proc/self/ns/pid").st_ino


def test_inner_tids_map_a_container_s_thread_ids_to_proc_s(tmp_path):
    """py-spy reads CPython's thread states, which know a container's threads by their tids
    there: {7: 4123, 9: 4125} maps them back to the tids /proc (and the trace) gives."""
    for tid, inner in ((4123, 7), (4125, 9)):
        d = tmp_path / "4123" / "task" / str(tid)
        d.mkdir(parents=True)
        (d / "status").write_text(f"Pid:\t{tid}\nNSpid:\t{tid}\t{inner}\n")
    (tmp_path / "4123" / "status").write_text("Pid:\t4123\nNSpid:\t4123\t7\n")
    assert pidns.inner_tids(4123, str(tmp_path)) == {7: 4123, 9: 4125}
    (tmp_path / "4123" / "status").write_text("Pid:\t4123\nNSpid:\t4123\n")
    assert pidns.inner_tids(4123, str(tmp_path)) == {}          # lives in /proc's namespace
