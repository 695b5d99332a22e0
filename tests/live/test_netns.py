"""Node identity as attach records it (linux/netns.py): the parsers on real /proc/net files of
this VM (tests/data/netns: the root namespace with 192.0.2.2 and fd00::2, and a namespace with
loopback only), and the reader on a fake /proc and /run/netns."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tracer.linux import netns
from tracer.tracefile.format import make_header
from tracer.tracefile.validate import check_header

DATA = Path(__file__).resolve().parents[1] / "data" / "netns"


@pytest.mark.parametrize("name,addrs", [("fib_trie.vm", ["192.0.2.2"]), ("fib_trie.lo_only", [])])
def test_fib_trie_local_addresses_without_loopback(name, addrs):
    assert netns.parse_fib_trie((DATA / name).read_text()) == addrs


@pytest.mark.parametrize("name,addrs", [("if_inet6.vm", ["fd00::2"]), ("if_inet6.lo_only", [])])
def test_if_inet6_global_addresses_only(name, addrs):
    # the VM's file also has ::1 (scope 10, host) and fe80::fc00:ff:fe00:1 (scope 20, link)
    assert netns.parse_if_inet6((DATA / name).read_text()) == addrs


@pytest.mark.parametrize("text", ["", "garbage\n|-- \n/32 host LOCAL", "zz" * 16 + " 1 2 00 3 x",
                                  "/32 host LOCAL\n"])
def test_parsers_never_raise_on_bad_input(text):
    assert netns.parse_fib_trie(text) == []
    assert netns.parse_if_inet6(text) == []


def test_identity_from_a_fake_proc_and_run_netns(tmp_path):
    proc, run = tmp_path / "proc", tmp_path / "run"
    (proc / "self" / "ns").mkdir(parents=True)
    (proc / "net").mkdir()
    (proc / "self" / "ns" / "net").write_text("")
    (proc / "net" / "fib_trie").write_text((DATA / "fib_trie.vm").read_text())
    (proc / "net" / "if_inet6").write_text((DATA / "if_inet6.vm").read_text())
    run.mkdir()
    (run / "other").write_text("")
    os.link(proc / "self" / "ns" / "net", run / "mine")       # same inode, like a bind mount
    ident = netns.node_identity(str(proc), str(run))
    assert ident["netns"] == os.stat(proc / "self" / "ns" / "net").st_ino
    assert ident["netns_name"] == "mine"
    assert ident["addrs"] == ["192.0.2.2", "fd00::2"]
    assert ident["hostname"]


def test_identity_of_this_process_and_in_a_header():
    ident = netns.node_identity()
    assert ident["netns"] == os.stat("/proc/self/ns/net").st_ino
    assert netns.netns_name(None) == "" and netns.netns_name(ident["netns"], "/nonexistent") == ""
    h = make_header(backends=["proc"], source="attach", targets=[1], start=1.0, processes=[],
                    node=ident)
    assert h["node"] == ident and check_header(h) is None
    assert "node" not in make_header(backends=[], source="import-strace", targets=[],
                                     start=1.0, processes=[])


@pytest.mark.parametrize("node", [[], {"netns": "x"}, {"addrs": [1]}, {"hostname": 3}])
def test_header_with_a_bad_node_record_is_corrupt(node):
    h = make_header(backends=[], source="attach", targets=[], start=1.0, processes=[])
    h["node"] = node
    assert "node" in (check_header(h) or "")
