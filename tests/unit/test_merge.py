"""hangtrace merge on synthetic traces of two nodes whose pids collide: node names, keys, the
wait between nodes over TCP, objects that stay on their node, NCCL RAS for every node, clock
offsets from send/receive pairs, and the CLI's errors."""
from __future__ import annotations

import json
import subprocess
import sys
from typing import List, Optional

import pytest

import report_schema
from tracer import events as ev
from tracer.load.merged import analyze_merged
from tracer.tracefile.format import TraceWriter, make_header
from tracer.tracefile.nodes.merge import ID_STRIDE, open_nodes
from cli_run import hangtrace as cli  # noqa: E402  (tests/cli_run.py)

T0 = 1000.0
A_SIDE = "TCP:[192.0.2.1:40110->192.0.2.2:29500]"
B_SIDE = "TCP:[192.0.2.2:29500->192.0.2.1:40110]"
PID = 4242                      # the same pid on both nodes


def info(pid, threads=None, fds=(), rank: Optional[int] = 0, cmd="train.py"):
    return ev.ProcessInfo(ts=T0, pid=pid, ppid=1, comm="python3", cmdline=["python3", cmd],
                          threads=threads or {pid: "python3"}, fds=list(fds), state="S",
                          environ_rank=None if rank is None else f"RANK={rank}")


def fd(n, kind, target, mode="rw", inode=None):
    return ev.FdInfo(n, kind, target, mode, None, inode)


def write(path, infos: List[ev.ProcessInfo], events: List[ev.Event], *, host="a",
          netns: Optional[int] = 4026531840, netns_name="", addrs=(), start=T0,
          end=T0 + 5.0, node=True, backends=("strace",)):
    ident = {"hostname": host, "netns": netns, "netns_name": netns_name,
             "addrs": list(addrs)} if node else None
    h = make_header(backends=list(backends), source="attach", targets=[i.pid for i in infos],
                    start=start, processes=infos, node=ident)
    with TraceWriter(str(path), h) as w:
        for e in sorted(events, key=lambda e: e.ts):
            w.write(e)
        w.close(end_ts=end)
    return str(path)


def recv_block(pid, tid, fdn, target, ts=T0 + 0.01, end=T0 + 5.0):
    return ev.ReadCall(ts=ts, pid=pid, tid=tid, name="recvfrom", fd=fdn, fd_kind="tcp",
                       fd_target=target, ongoing=True, dur=end - ts)


def futex_block(pid, tid, addr, ts=T0 + 0.01, end=T0 + 5.0):
    return ev.FutexCall(ts=ts, pid=pid, tid=tid, name="futex", op="WAIT_BITSET", addr=addr,
                        ongoing=True, dur=end - ts)


def pipe_block(pid, tid, fdn=0, target="pipe:[9]", ts=T0 + 0.01, end=T0 + 5.0):
    return ev.ReadCall(ts=ts, pid=pid, tid=tid, name="read", fd=fdn, fd_kind="pipe",
                       fd_target=target, ongoing=True, dur=end - ts)


def two_nodes(tmp_path, *, b_events=None, b_threads=None, **kw):
    """Rank 0 on node a waits in recvfrom for rank 1 on node b (the same pid on both), which
    waits for a pipe no traced process writes (its stdin, say)."""
    a = write(tmp_path / "a.htrace.gz", [info(PID, fds=[fd(5, "tcp", A_SIDE)], rank=0)],
              [recv_block(PID, PID, 5, A_SIDE)], host="a", addrs=["192.0.2.1"])
    b = write(tmp_path / "b.htrace.gz",
              [info(PID, threads=b_threads, fds=[fd(0, "pipe", "pipe:[9]", "r"),
                                                 fd(7, "tcp", B_SIDE)], rank=1)],
              b_events if b_events is not None else [pipe_block(PID, PID)],
              host="b", addrs=["192.0.2.2"], **kw)
    return a, b


# --------------------------------------------------------------------------- the headline
def test_blocked_rank_on_another_node_is_named_with_node_rank_and_pid(tmp_path):
    r = analyze_merged(two_nodes(tmp_path))
    report_schema.check(r.to_json())
    kb = ID_STRIDE + PID                          # node b's pid 4242
    assert r.root_cause["pid"] == kb
    s = r.root_cause["summary"]
    assert s.startswith("node b, rank 1 (pid 4242) is idle: reads pipe:[9]; no traced process "
                        "holds its write end; the chain: node a, rank 0 (pid 4242) reads "
                        f"{A_SIDE} whose peer is node b, rank 1 (pid 4242)"), s
    a0, b1 = r.process(PID), r.process(kb)
    assert (a0.node, a0.node_pid, b1.node, b1.node_pid) == ("a", PID, "b", PID)
    assert a0.verdict == "blocked" and a0.rule == "waits-on-peers"
    # the wait between nodes, resolved by the one wait-for graph from the reversed 4-tuple
    assert [w["pids"] for w in a0.waits_on] == [[kb]] and a0.waits_on[0]["kind"] == "socket"
    assert any(e["src"] == f"T{PID}" and e["dst"] == f"P{kb}" and e["object"] == A_SIDE
               and "whose peer is node b, rank 1 (pid 4242)" in e["text"]
               for e in r.wait_graph["edges"])
    assert [n["name"] for n in r.nodes] == ["a", "b"] and r.nodes[1]["key_offset"] == ID_STRIDE


def test_pid_bearing_fields_carry_the_node_and_its_pid(tmp_path):
    """What a script reads of merge --json: the root cause, each waits_on's pids and partial
    hangs carry the node and the node's own pid beside the key (a key exists nowhere)."""
    doc = analyze_merged(two_nodes(tmp_path)).to_json()
    report_schema.check(doc)
    kb = ID_STRIDE + PID
    rc = doc["root_cause"]
    assert (rc["pid"], rc["node"], rc["node_pid"], rc["node_tid"]) == (kb, "b", PID, PID)
    a0 = next(p for p in doc["processes"] if p["pid"] == PID)
    (w,) = a0["waits_on"]
    assert w["node_tid"] == PID
    assert w["node_pids"] == [{"pid": kb, "node": "b", "node_pid": PID}]
    for h in doc["partial_hangs"]:
        assert h["node"] in ("a", "b") and h["node_pid"] == h["pid"] % ID_STRIDE


def test_a_single_trace_has_the_node_fields_null(tmp_path):
    from tracer.load.trace import analyze_trace
    a, _ = two_nodes(tmp_path)
    doc = analyze_trace(a).to_json()
    report_schema.check(doc)
    assert (doc["root_cause"]["node"], doc["root_cause"]["node_pid"]) == (None, None)
    for p in doc["processes"]:
        for w in p["waits_on"]:
            assert w["node_tid"] is None and w["node_pids"] == []


def test_ranks_waiting_for_each_other_across_nodes_are_a_cycle(tmp_path):
    # rank 1's threads all wait in futexes while it is connected to rank 0: the analyzer reads
    # that as a collective waiting for rank 0, which waits for rank 1 over TCP.
    r = analyze_merged(two_nodes(tmp_path, b_threads={PID: "python3", PID + 1: "worker"},
                                 b_events=[futex_block(PID, PID, 0x10),
                                           futex_block(PID, PID + 1, 0x20)]))
    kb = ID_STRIDE + PID
    assert r.verdict == "deadlocked" and r.rule == "wait-cycle"
    assert {p.verdict for p in r.processes} == {"deadlocked"}
    assert r.process(PID).waits_on[0]["pids"] == [kb]
    assert r.process(kb).waits_on[0]["pids"] == [PID]
    assert "node b, rank 1 (pid 4242)" in r.root_cause["summary"]
    assert "node a, rank 0 (pid 4242)" in r.root_cause["summary"]
    assert {t.tid for t in r.process(kb).threads} == {kb, kb + 1}      # tids are keys too
    assert all(str(kb) not in line for line in r.process(kb).evidence)


def test_console_names_node_and_pid_not_keys(tmp_path):
    from io import StringIO
    from rich.console import Console
    from tracer.render.console import render_report
    r = analyze_merged(two_nodes(tmp_path, b_threads={PID: "python3", PID + 1: "worker"},
                                 b_events=[futex_block(PID, PID, 0x10),
                                           futex_block(PID, PID + 1, 0x20)]))
    out = StringIO()
    render_report(r, Console(file=out, width=200), verbose=True)
    text = out.getvalue()
    assert "node b" in text and "pid 4242" in text and "4243" in text
    assert str(ID_STRIDE + PID) not in text and str(ID_STRIDE + PID + 1) not in text


def test_a_single_trace_merges_to_what_analyze_says(tmp_path):
    from tracer.load.trace import analyze_trace
    _, b = two_nodes(tmp_path)
    m, one = analyze_merged([b]), analyze_trace(b)
    assert (m.verdict, m.rule, m.root_cause["summary"].replace("node b, ", "")) == \
        (one.verdict, one.rule, one.root_cause["summary"])


# --------------------------------------------------------------------------- node-local objects
def test_pipes_eventfds_and_loopback_never_link_nodes(tmp_path):
    # The same pipe inode, eventfd id and loopback 4-tuple exist on both nodes: node a's reader
    # must not be given node b's writer.
    pipe, efd = "pipe:[777]", "eventfd:[3]"
    lo_a, lo_b = "TCP:[127.0.0.1:5000->127.0.0.1:6000]", "TCP:[127.0.0.1:6000->127.0.0.1:5000]"
    a = write(tmp_path / "a.htrace", [info(10, threads={10: "m", 11: "e", 12: "l"}, fds=[
        fd(3, "pipe", pipe, "r"), fd(4, "eventfd", efd), fd(5, "tcp", lo_a)])],
        [ev.ReadCall(ts=T0 + 0.01, pid=10, tid=10, name="read", fd=3, fd_kind="pipe",
                     fd_target=pipe, ongoing=True),
         ev.ReadCall(ts=T0 + 0.01, pid=10, tid=11, name="read", fd=4, fd_kind="eventfd",
                     fd_target=efd, ongoing=True),
         recv_block(10, 12, 5, lo_a)], host="a")
    b = write(tmp_path / "b.htrace", [info(20, fds=[fd(4, "pipe", pipe, "w"), fd(5, "eventfd", efd),
                                                    fd(6, "tcp", lo_b)], rank=1)],
              [ev.WriteCall(ts=T0 + i, pid=20, tid=20, name="write", fd=9, fd_kind="file",
                            fd_target="/log", ret=10, nbytes=10) for i in range(4)], host="b")
    r = analyze_merged([a, b])
    assert all(w["pids"] == [] for w in r.process(10).waits_on), r.process(10).waits_on
    # within one node they do link: the same holders on node a's own side
    assert r.process(ID_STRIDE + 20).verdict == "progressing"


def test_unix_socket_inodes_are_scoped_to_their_node(tmp_path):
    a = write(tmp_path / "a.htrace", [info(10, fds=[fd(3, "unix", "UNIX-STREAM:[100->200]",
                                                       inode=100)])],
              [ev.ReadCall(ts=T0 + 0.01, pid=10, tid=10, name="recvmsg", fd=3, fd_kind="unix",
                           fd_target="UNIX-STREAM:[100->200]", ongoing=True)], host="a")
    b = write(tmp_path / "b.htrace", [info(20, fds=[fd(3, "unix", "UNIX-STREAM:[200->100]",
                                                       inode=200)], rank=1)], [], host="b")
    r = analyze_merged([a, b])
    assert ID_STRIDE + 20 not in r.process(10).waits_on[0]["pids"]


# --------------------------------------------------------------------------- naming
def test_node_names(tmp_path):
    p = [write(tmp_path / "x1.htrace", [info(1)], [], host="vm", netns=11, netns_name="htA"),
         write(tmp_path / "x2.htrace", [info(1)], [], host="vm", netns=12),
         write(tmp_path / "gpu07.htrace.gz", [info(1)], [], node=False),
         write(tmp_path / "x4.htrace", [info(1)], [], host="solo"),
         write(tmp_path / "x5.htrace", [info(1)], [], host="twin", netns=5),
         write(tmp_path / "x6.htrace", [info(1)], [], host="twin", netns=5)]
    names = [n.name for n in open_nodes(p)]
    assert names == ["vm/htA", "vm/netns:12", "gpu07", "solo", "twin/netns:5/x5",
                     "twin/netns:5/x6"]
    assert len(set(names)) == len(names)


def test_the_same_trace_twice_is_refused(tmp_path):
    from tracer.errors import UsageError
    a, _ = two_nodes(tmp_path)
    with pytest.raises(UsageError):
        open_nodes([a, a])


# --------------------------------------------------------------------------- NCCL RAS
RAS = {"nccl_version": "2.28.9", "communicators": [{"hash": "0xabc", "size": 2, "ranks": [
    {"rank": 0, "host": "192.0.2.1", "pid": PID, "cuda_dev": 0,
     "collective_counts": {"AllReduce": 6}},
    {"rank": 1, "host": "192.0.2.2", "pid": PID, "cuda_dev": 0,
     "collective_counts": {"AllReduce": 5}}], "missing_ranks": []}]}


def test_one_ras_answer_names_the_ranks_of_every_node(tmp_path):
    ras = ev.NcclRasStatus(ts=T0 + 4.9, pid=PID, host="192.0.2.1", port=28028,
                           text=json.dumps(RAS))
    a = write(tmp_path / "a.htrace", [info(PID, fds=[fd(5, "tcp", A_SIDE)], rank=None)],
              [recv_block(PID, PID, 5, A_SIDE), ras], host="a", addrs=["192.0.2.1"])
    b = write(tmp_path / "b.htrace", [info(PID, fds=[fd(7, "tcp", B_SIDE)], rank=None,
                                           threads={PID: "python3", PID + 1: "w"})],
              [futex_block(PID, PID, 0x10), futex_block(PID, PID + 1, 0x20)], host="b",
              addrs=["192.0.2.2"])
    r = analyze_merged([a, b])
    kb = ID_STRIDE + PID
    # pid 4242 is on both nodes: only RAS's host tells which is rank 1
    assert r.process(PID).role == "rank 0 (GPU 0)" and r.process(kb).role == "rank 1 (GPU 0)"
    # rank 1 launched fewer AllReduce operations (RAS): its futex wait is its own, not the
    # collective's, and rank 0 waits for it
    assert r.root_cause["pid"] == kb and r.process(kb).rule == "all-threads-blocked"
    assert r.root_cause["summary"].startswith("node b, rank 1 (pid 4242, GPU 0) futex")
    assert r.process(PID).waits_on[0]["pids"] == [kb]
    assert any("AllReduce operations launched differ: rank 0 up to 6, rank 1 up to 5" in n
               for n in r.notes)


# --------------------------------------------------------------------------- clocks
def _exchange(skew: float, rounds: int = 8):
    """Rank 0 (node a) sends 100 bytes, rank 1 (node b, clock ahead by ``skew``) answers 50."""
    a_ev, b_ev = [], []
    for i in range(rounds):
        t = T0 + 0.1 + 0.3 * i
        a_ev.append(ev.WriteCall(ts=t, pid=PID, tid=PID, name="sendto", fd=5, fd_kind="tcp",
                                 fd_target=A_SIDE, ret=100, nbytes=100, dur=1e-5))
        b_ev.append(ev.ReadCall(ts=t + skew - 0.05, pid=PID, tid=PID, name="recvfrom", fd=7,
                                fd_kind="tcp", fd_target=B_SIDE, ret=100, dur=0.05 + 2e-4))
        b_ev.append(ev.WriteCall(ts=t + skew + 1e-3, pid=PID, tid=PID, name="sendto", fd=7,
                                 fd_kind="tcp", fd_target=B_SIDE, ret=50, nbytes=50, dur=1e-5))
        a_ev.append(ev.ReadCall(ts=t + 2e-5, pid=PID, tid=PID, name="recvfrom", fd=5,
                                fd_kind="tcp", fd_target=A_SIDE, ret=50, dur=1e-3 + 3e-4))
    return a_ev, b_ev


@pytest.mark.parametrize("skew", [0.0, 5.0, -2.5, 0.0371])
def test_clock_offset_from_send_receive_pairs(tmp_path, skew):
    a_ev, b_ev = _exchange(skew)
    a = write(tmp_path / "a.htrace", [info(PID, fds=[fd(5, "tcp", A_SIDE)])], a_ev, host="a")
    b = write(tmp_path / "b.htrace", [info(PID, fds=[fd(7, "tcp", B_SIDE)], rank=1)],
              b_ev + [futex_block(PID, PID, 0x10, ts=T0 + 3 + skew, end=T0 + 5 + skew)],
              host="b", start=T0 + skew, end=T0 + 5 + skew)
    r = analyze_merged([a, b])
    nb = r.nodes[1]
    # true one-way latencies: 0.2 ms there, 0.3 ms back: the symmetric estimate is off by
    # half their difference
    assert abs(nb["clock_offset"] - skew) < 1e-4, nb
    assert "both ways" in nb["clock"] and "16 send/receive pairs" in nb["clock"]
    # node b's events were moved onto node a's clock before analysis
    assert abs(r.window["start"] - T0) < 1e-3 and abs(r.window["end"] - (T0 + 5)) < 1e-3
    assert nb["window"]["start"] == pytest.approx(T0, abs=1e-3)


def test_no_pairs_no_offset_and_it_says_why(tmp_path):
    a, b = two_nodes(tmp_path)
    r = analyze_merged([a, b])
    assert r.nodes[1]["clock_offset"] == 0.0
    assert "no send/receive pairs" in r.nodes[1]["clock"]


# --------------------------------------------------------------------------- the command


def test_merge_command_json_and_output_file(tmp_path):
    a, b = two_nodes(tmp_path)
    p = cli("merge", "--json", a, b)
    assert p.returncode == 0, p.stderr            # idle: rank 1 waits outside the tree
    doc = json.loads(p.stdout)
    report_schema.check(doc)
    assert doc["source"] == "merge" and "node b, rank 1 (pid 4242)" in doc["root_cause"]["summary"]
    out = tmp_path / "r.json"
    p = cli("merge", "--json", "-o", str(out), a, b)
    assert p.returncode == 0 and p.stdout == "" and json.loads(out.read_text())["nodes"]
    p = cli("merge", a, b)
    assert p.returncode == 0 and "node b, rank 1 (pid 4242) is idle" in p.stdout
    c = write(tmp_path / "c.htrace", [info(PID, threads={PID: "m", PID + 1: "w"})],
              [futex_block(PID, PID, 0x10), futex_block(PID, PID + 1, 0x20)], host="c")
    assert cli("merge", a, b, c).returncode == 4          # node c deadlocked on its own


@pytest.mark.parametrize("args,words", [
    ((), "give at least one trace"),
    (("/nonexistent.htrace",), "no such file"),
])
def test_merge_command_bad_input_is_one_line(tmp_path, args, words):
    p = cli("merge", *args)
    assert p.returncode in (1, 2) and words in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_merge_command_refuses_a_file_that_is_no_trace(tmp_path):
    bad = tmp_path / "x.htrace"
    bad.write_text("hello\n")
    a, _ = two_nodes(tmp_path)
    p = cli("merge", a, str(bad))
    assert p.returncode == 1 and "not a hangtrace trace" in p.stderr


# --------------------------------------------------------------------------- nodes.py
def test_ras_ranks_go_to_the_node_with_their_address_else_to_the_one_traced_pid():
    from tracer.analysis.job.nccl_ras import RasComm, RasMissing, RasRank, RasStatus
    from tracer.analysis.vocab.nodes import NodeMap
    from tracer.analysis.job.ras import localize_ras
    st = RasStatus("json", comms=[RasComm("0x1", 4, ranks=[
        RasRank(0, 10, "192.0.2.1"), RasRank(1, 10, "[192.0.2.2]"),
        RasRank(2, 33, "10.9.9.9"), RasRank(3, 10, "10.9.9.9")],
        missing=[RasMissing(4, 77, "192.0.2.2", dead=True)])], dead_pids=[33])
    nodes = NodeMap(["a", "b"], [{"192.0.2.1"}, {"192.0.2.2"}])
    known = {10, ID_STRIDE + 10, ID_STRIDE + 33}
    out = localize_ras(st, nodes, known)
    assert [r.pid for r in out.comms[0].ranks] == [10, ID_STRIDE + 10, ID_STRIDE + 33, None]
    assert out.comms[0].missing[0].pid == ID_STRIDE + 77     # not traced: its node is known
    assert out.dead_pids == [ID_STRIDE + 33]
    assert st.comms[0].ranks[1].pid == 10                    # the parsed answer is untouched


@pytest.mark.parametrize("target,crosses", [
    (A_SIDE, True), ("TCPv6:[[2001:db8::1]:5->[2001:db8::2]:6]", True),
    ("TCP:[127.0.0.1:5000->127.0.0.1:6000]", False), ("TCP:[[::1]:5->[::1]:6]", False),
    ("TCP:[[::ffff:127.0.0.1]:5->[::ffff:127.0.0.1]:6]", False),
    ("TCP:[0.0.0.0:29500]", False), ("pipe:[12]", False), ("UNIX-STREAM:[1->2]", False),
    ("UDP:[192.0.2.1:5->192.0.2.2:6]", True), ("/tmp/fifo", False)])
def test_what_may_link_two_nodes(target, crosses):
    from tracer.analysis.vocab.nodes import target_scope
    assert (target_scope(ID_STRIDE + 5, target) is None) == crosses
    assert target_scope(ID_STRIDE + 5, target) in (None, 1)


def test_clock_offset_of_periodic_keepalives_with_a_skew_of_many_periods():
    """Keep-alives every 0.5 s for 30 s, the other clock 7.3 s ahead (14 periods): the true
    alignment is the one most pairs share, and both directions agree on it."""
    from tracer.tracefile.nodes.clock import Messages, estimate, pair_bounds
    a, b = Messages(), Messages()
    for i in range(60):
        t = T0 + 0.5 * i
        a.add_send(t, 30)
        b.add_recv(t + 7.3 + 2e-4, 30)
        b.add_send(t + 7.3 + 3e-4, 30)
        a.add_recv(t + 6e-4, 30)
    off = estimate(pair_bounds(a, b))
    assert off is not None and off.both_ways and abs(off.theta - 7.3) < 1e-3, off


def test_one_pair_alone_is_not_used():
    from tracer.tracefile.nodes.clock import Offset, solve
    assert solve(2, {(0, 1): Offset(5.0, 0.05, 1, False)})[1] is None
    assert solve(2, {(0, 1): Offset(5.0, 0.05, 2, False)})[1][0] == 5.0
    got = solve(3, {(0, 1): Offset(1.0, 0, 9, True), (1, 2): Offset(2.0, 0, 9, True),
                    (0, 2): Offset(9.9, 0, 3, True)})
    assert [g[0] for g in got] == [0.0, 1.0, 3.0]      # along the best-supported estimates
