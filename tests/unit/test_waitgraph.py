"""Wait-for graph and proofs from synthetic events, and the futex owner decoding."""
from __future__ import annotations

import struct

from tracer import events as ev
from tracer.analysis.vocab.facts import WaitFacts
from tracer.render.export.dot import render_dot
from tracer.record.probes.futex_owner import decode_futex, parse_futex_syscall

from test_rules import T0, end_minus, fd, futex_block, info, run


def mutex_bytes(lock, owner, nusers=1, kind=0):
    return struct.pack("=IIiIi", lock, 0, owner, nusers, kind) + bytes(4)


# --------------------------------------------------------------------------- futex decoding
def test_normal_mutex_owner_from_owner_field():
    k, owner, _ = decode_futex(mutex_bytes(2, 101), op="WAIT", val=2, private=True,
                               same_process=lambda t: t in (100, 101))
    assert (k, owner) == ("mutex", 101)


def test_private_mutex_owner_must_be_a_thread_of_the_process():
    k, owner, why = decode_futex(mutex_bytes(2, 555), op="WAIT", val=2, private=True,
                                 same_process=lambda t: t in (100, 101))
    assert (k, owner) == ("unknown", None) and "no thread" in why


def test_process_shared_mutex_needs_the_pshared_kind_bit():
    k, owner, _ = decode_futex(mutex_bytes(2, 777, kind=128), op="WAIT", val=2, private=False,
                               same_process=lambda t: False)
    assert (k, owner) == ("mutex", 777)
    k, _, _ = decode_futex(mutex_bytes(2, 777, kind=0), op="WAIT", val=2, private=False,
                           same_process=lambda t: False)
    assert k == "unknown"


def test_python_lock_is_a_semaphore_without_holder():
    sem = struct.pack("=QiI", 1 << 32, 0, 0) + bytes(8)   # value 0, one waiter
    k, owner, why = decode_futex(sem, op="WAIT_BITSET", val=0, private=True,
                                 same_process=lambda t: True)
    assert (k, owner) == ("unknown", None) and "semaphore" in why


def test_join_and_pi_and_unreadable():
    word = struct.pack("=I", 4242) + bytes(20)
    assert decode_futex(word, op="WAIT_BITSET", val=4242, private=False,
                        same_process=lambda t: t == 4242)[:2] == ("join", 4242)
    pi = struct.pack("=I", 0x80000000 | 4243) + bytes(20)
    assert decode_futex(pi, op="LOCK_PI", val=None, private=True,
                        same_process=lambda t: True)[:2] == ("pi-mutex", 4243)
    assert decode_futex(None, op="WAIT", val=2, private=True,
                        same_process=lambda t: True)[:2] == ("unknown", None)


def test_proc_syscall_line_of_a_futex_wait():
    assert parse_futex_syscall("202 0x560c729a40a0 0x80 0x2 0x0 0x0 0x0 0x7f 0x7f") == \
        (0x560c729a40a0, "WAIT", 2, True)
    assert parse_futex_syscall("202 0x7f2138bea990 0x109 0x69bd 0x0 0x0 0xffffffff 0x1 0x2") \
        == (0x7f2138bea990, "WAIT_BITSET", 0x69bd, False)
    assert parse_futex_syscall("202 0x1 0x81 0x1 0 0 0 0 0") is None     # FUTEX_WAKE
    assert parse_futex_syscall("0 0x3 0x1 0x40 0 0 0 0 0") is None
    # aarch64 numbers futex 98 (and 202 is accept there)
    assert parse_futex_syscall("98 0x560c729a40a0 0x80 0x2 0x0 0x0 0x0 0x7f 0x7f", "aarch64") \
        == (0x560c729a40a0, "WAIT", 2, True)
    assert parse_futex_syscall("202 0x560c729a40a0 0x80 0x2 0 0 0 0x7f 0x7f", "aarch64") is None


def test_socket_peers_keys_survive_json():
    f = WaitFacts()
    f.feed(ev.SocketPeers(ts=T0, pid=1, peers={"10": 11}, outside={"11": [7]}))  # as read back
    assert f.unix_peers == {10: 11} and f.outside == {11: [7]}


# --------------------------------------------------------------------------- proofs
def owner(pid, addr, tid, kind="mutex", owner_pid=None, shared=False):
    return ev.FutexOwner(ts=T0 + 5.0, pid=pid, addr=addr, word=2, owner_tid=tid, kind=kind,
                         owner_pid=pid if owner_pid is None else owner_pid, shared=shared)


def graph(r):
    return r.wait_graph


def test_abba_cycle_names_both_mutexes_and_threads():
    threads = {10: "main", 11: "w1", 12: "w2"}
    evs = [futex_block(10, 10, 0x900), futex_block(10, 11, 0xA0), futex_block(10, 12, 0xB0),
           owner(10, 0x900, 11, kind="join"), owner(10, 0xA0, 12), owner(10, 0xB0, 11)]
    r = run(evs, [info(10, threads=threads)])
    assert r.verdict == "deadlocked"
    p = graph(r)["proof"]
    assert p["kind"] == "cycle" and set(graph(r)["cycle"]) == {"T11", "T12"}
    assert "thread 11 of python3 (pid 10) waits for mutex 0xa0 held by thread 12" in p["text"]
    assert "thread 12 of python3 (pid 10) waits for mutex 0xb0 held by thread 11" in p["text"]
    assert "pthread_join" in p["text"]
    assert "Proof, " in r.root_cause["summary"] and "mutex 0xa0" in r.root_cause["summary"]
    dot = render_dot(graph(r))
    assert '"T11" -> "T12"' in dot and "color=red" in dot


def test_abba_cycle_while_main_progresses_is_a_note_not_the_verdict():
    threads = {10: "main", 11: "w1", 12: "w2"}
    writes = [ev.WriteCall(ts=T0 + i * 0.5, pid=10, tid=10, name="write", fd=1, fd_kind="file",
                           fd_target="/var/log/x", ret=40, nbytes=40, dur=1e-5) for i in range(8)]
    evs = writes + [futex_block(10, 11, 0xA0), futex_block(10, 12, 0xB0),
                    owner(10, 0xA0, 12), owner(10, 0xB0, 11)]
    r = run(evs, [info(10, threads=threads)])
    assert r.verdict == "progressing"
    assert graph(r)["proof"]["kind"] == "cycle"
    assert any("deadlocked although the tree goes on" in n for n in r.notes)


def test_unknown_holder_is_a_closed_set_not_a_cycle():
    evs = [futex_block(10, 10, 0x900), futex_block(10, 11, 0xA0)]
    r = run(evs, [info(10, threads={10: "m", 11: "w"})])
    p = graph(r)["proof"]
    assert r.verdict == "deadlocked" and p["kind"] == "closed"
    assert "unknown holder" in p["text"] and "no thread of python3 (pid 10) runs" in p["text"]


def test_mutex_held_by_a_killed_process_is_a_dead_end():
    parent = info(20, threads={20: "p"})
    child = info(21, ppid=20, threads={21: "c"}, state="Z", exit_code=9)   # killed, zombie
    evs = [futex_block(20, 20, 0x7000), owner(20, 0x7000, 21, owner_pid=21, shared=True)]
    r = run(evs, [parent, child])
    assert r.verdict == "deadlocked" and r.root_cause["pid"] == 21
    p = graph(r)["proof"]
    assert p["kind"] == "dead-end"
    assert "process-shared mutex 0x7000 held by python3 (pid 21), which was killed by SIGKILL" \
        in p["text"]
    assert r.process(20).waits_on[0]["pids"] == [21]


def test_holder_thread_gone_is_a_dead_end():
    evs = [futex_block(20, 20, 0x7000), owner(20, 0x7000, 99999, owner_pid=None)]
    evs[-1].owner_pid = None
    r = run(evs, [info(20)])
    assert r.verdict == "deadlocked"
    assert "thread 99999, which no longer exists" in graph(r)["proof"]["text"]


def test_pipe_cycle_and_wait4_cycle():
    a = info(30, fds=[fd(3, "pipe", "pipe:[1]", "r"), fd(4, "pipe", "pipe:[2]", "w")])
    b = info(31, ppid=30, fds=[fd(3, "pipe", "pipe:[2]", "r"), fd(4, "pipe", "pipe:[1]", "w")])
    evs = [ev.ReadCall(ts=T0 + 0.01, pid=p, tid=p, name="read", fd=3, fd_kind="pipe",
                       fd_target=t, ongoing=True) for p, t in ((30, "pipe:[1]"), (31, "pipe:[2]"))]
    r = run(evs, [a, b])
    p = graph(r)["proof"]
    assert r.verdict == "deadlocked" and p["kind"] == "cycle"
    assert "reads pipe:[1] whose only writer is" in p["text"] and "(pid 31)" in p["text"]
    assert "reads pipe:[2] whose only writer is" in p["text"] and "(pid 30)" in p["text"]


def test_reader_of_a_live_slow_writer_is_not_stuck():
    a = info(40, fds=[fd(3, "pipe", "pipe:[5]", "r")])
    b = info(41, ppid=40, fds=[fd(4, "pipe", "pipe:[5]", "w")])
    evs = [ev.ReadCall(ts=T0 + 0.01, pid=40, tid=40, name="read", fd=3, fd_kind="pipe",
                       fd_target="pipe:[5]", ongoing=True)]
    evs += [ev.WriteCall(ts=T0 + i * 0.3, pid=41, tid=41, name="write", fd=1, fd_kind="file",
                         fd_target="/log", ret=20, nbytes=20, dur=1e-5) for i in range(10)]
    r = run(evs, [a, b])
    assert r.verdict == "progressing" and graph(r)["proof"] is None
    assert not any(n["stuck"] for n in graph(r)["nodes"])


def test_unix_peer_from_sock_diag_resolves_the_other_process():
    a = info(50, fds=[fd(3, "unix", "UNIX-STREAM:[700]", inode=700)])
    b = info(51, ppid=50, fds=[fd(3, "unix", "UNIX-STREAM:[701]", inode=701)])
    evs = [ev.ReadCall(ts=T0 + 0.01, pid=p, tid=p, name="recvfrom", fd=3, fd_kind="unix",
                       fd_target=f"UNIX-STREAM:[{i}]", ongoing=True)
           for p, i in ((50, 700), (51, 701))]
    evs += [ev.SocketPeers(ts=T0 + 5.0, pid=50, peers={700: 701}),
            ev.SocketPeers(ts=T0 + 5.0, pid=51, peers={701: 700})]
    r = run(evs, [a, b])
    assert r.verdict == "deadlocked" and graph(r)["proof"]["kind"] == "cycle"
    assert "whose peer socket 701 is held by" in graph(r)["proof"]["text"]
    # Without the probe's facts the same waits look like waits on the outside world.
    r2 = run(evs[:2], [a, b])
    assert r2.verdict != "deadlocked"


# --------------------------------------------------------------------------- eventfds
EFD = "anon_inode:[eventfd]"   # what strace -yy prints for every eventfd


def efd_read(pid, tid, n=5):
    return ev.ReadCall(ts=T0 + 0.01, pid=pid, tid=tid, name="read", fd=n, fd_kind="eventfd",
                       fd_target=EFD, ongoing=True)


def test_eventfd_and_pipe_cycle_between_two_processes():
    # parent reads eventfd 7 (shared with the child); the child reads a pipe only the parent
    # writes. The fd tables name the eventfd by its id; strace's decoration does not.
    a = info(60, fds=[fd(4, "pipe", "pipe:[9]", "w"), fd(5, "eventfd", "eventfd:[7]")])
    b = info(61, ppid=60, fds=[fd(3, "pipe", "pipe:[9]", "r"), fd(5, "eventfd", "eventfd:[7]")])
    evs = [efd_read(60, 60),
           ev.ReadCall(ts=T0 + 0.01, pid=61, tid=61, name="read", fd=3, fd_kind="pipe",
                       fd_target="pipe:[9]", ongoing=True)]
    r = run(evs, [a, b])
    p = graph(r)["proof"]
    assert r.verdict == "deadlocked" and p["kind"] == "cycle"
    assert set(graph(r)["cycle"]) == {"T60", "P60", "T61", "P61"}
    assert {e["kind"] for e in p["path"]} == {"eventfd", "pipe"}
    assert "(pid 60) waits in read on eventfd:[7], which python3 (pid 61) holds" in p["text"]
    w = r.process(60).waits_on
    assert [(x["kind"], x["pids"]) for x in w] == [("eventfd", [61])]
    assert "other holders: pid 61" in w[0]["what"]


def test_eventfd_of_another_id_is_no_edge():
    # the child holds an eventfd too, but another one: each waits on an eventfd no other traced
    # process holds, which the kernel (io_uring, aio) may signal: an outside wait, not a deadlock
    a = info(62, fds=[fd(5, "eventfd", "eventfd:[7]")])
    b = info(63, ppid=62, fds=[fd(5, "eventfd", "eventfd:[8]")])
    r = run([efd_read(62, 62), efd_read(63, 63)], [a, b])
    assert r.verdict != "deadlocked" and graph(r)["proof"] is None
    w = r.process(62).waits_on[0]
    assert w["kind"] == "outside" and "only this process holds it" in w["what"]
    assert [e["dst"] for e in graph(r)["edges"] if e["src"] == "T62"] == ["outside"]


def test_eventfd_without_id_is_outside_as_before():
    # old traces (or kernels without eventfd-id): every eventfd looks alike, nothing resolves
    a = info(64, fds=[fd(5, "eventfd", EFD)])
    b = info(65, ppid=64, fds=[fd(5, "eventfd", EFD)])
    r = run([efd_read(64, 64), efd_read(65, 65)], [a, b])
    assert r.verdict != "deadlocked"
    assert {x["kind"] for p in (64, 65) for x in r.process(p).waits_on} == {"outside"}


def test_eventfd_reader_with_a_running_thread_of_its_own_is_alive():
    # the parent also holds the eventfd and a helper thread of it keeps running: not stuck
    a = info(66, threads={66: "main", 67: "helper"}, fds=[fd(5, "eventfd", "eventfd:[7]")])
    b = info(68, ppid=66, fds=[fd(3, "pipe", "pipe:[9]", "r"), fd(5, "eventfd", "eventfd:[7]")])
    c = info(69, ppid=66, fds=[fd(4, "pipe", "pipe:[9]", "w")])
    evs = [efd_read(66, 66), efd_read(68, 68, n=5)]
    evs += [ev.WriteCall(ts=T0 + i * 0.3, pid=66, tid=67, name="write", fd=1, fd_kind="file",
                         fd_target="/log", ret=20, nbytes=20, dur=1e-5) for i in range(10)]
    r = run(evs, [a, b, c])
    assert r.verdict != "deadlocked" and graph(r)["proof"] is None
    assert not any(n["stuck"] for n in graph(r)["nodes"])
    edges = [e for e in graph(r)["edges"] if e["src"] == "T66"]
    # the other holder as a process (its deciding threads), then any other thread of its own
    assert [(e["kind"], e["dst"]) for e in edges] == [("eventfd", "P68"), ("eventfd", "A66")]


# --------------------------------------------------------------------------- one model
def test_a_peer_counts_by_its_deciding_threads_not_its_helpers():
    # The launcher waits for its worker in wait4; the worker reads a pipe only the launcher
    # writes. The worker's NCCL-named helper keeps polling with a timeout: it could end a wait
    # inside the worker, but it will not make the worker's main thread exit or write the pipe.
    launcher = info(70, threads={70: "launch"}, fds=[fd(4, "pipe", "pipe:[11]", "w")])
    worker = info(71, ppid=70, threads={71: "worker", 72: "NCCL Service"},
                  fds=[fd(3, "pipe", "pipe:[11]", "r")])
    evs = [ev.WaitChild(ts=T0 + 0.01, pid=70, tid=70, name="wait4", child=71, ongoing=True),
           ev.ReadCall(ts=T0 + 0.01, pid=71, tid=71, name="read", fd=3, fd_kind="pipe",
                       fd_target="pipe:[11]", ongoing=True)]
    evs += [ev.PollCall(ts=T0 + i * 0.5, pid=71, tid=72, name="poll", ret=0, timeout=0.5,
                        timed_out=True, dur=0.5) for i in range(9)]
    r = run(evs, [launcher, worker])
    assert r.verdict == "deadlocked"
    assert {e["kind"] for e in graph(r)["proof"]["path"]} == {"child", "pipe"}
    stuck = {n["id"] for n in graph(r)["nodes"] if n["stuck"]}
    assert stuck == {"T70", "T71"}


def test_a_lock_inside_a_process_counts_any_thread_helpers_included():
    # PyTorch's watchdog (a library helper) wakes the main thread's work.wait(): a futex with no
    # recorded holder inside the process is not stuck while any thread of it runs.
    p = info(80, threads={80: "main", 81: "pt_nccl_watchdg"})
    evs = [futex_block(80, 80, 0xC0)]
    evs += [ev.FutexCall(ts=T0 + i * 0.1, pid=80, tid=81, name="futex", op="WAIT_BITSET",
                         addr=0xD0, timeout=-1.0, ret=-1, err="ETIMEDOUT", dur=0.1)
            for i in range(40)]
    r = run(evs, [p])
    assert r.verdict != "deadlocked" and graph(r)["proof"] is None
    edge = next(e for e in graph(r)["edges"] if e["src"] == "T80")
    assert (edge["kind"], edge["dst"]) == ("futex", "A80")
    assert not any(n["stuck"] for n in graph(r)["nodes"])


# --------------------------------------------------------------------------- children that exited
def _churn(child_arg: int, live_child: bool = False):
    """A parent blocked in wait4 whose children (91, 92) forked and exited during the window,
    as under process churn; with ``live_child``, a third (93) still reads a terminal."""
    evs = []
    for i, kid in enumerate((91, 92)):
        t = T0 + 0.5 + i
        evs += [ev.ThreadStart(ts=t, pid=kid, tid=kid, parent_tid=90, new_process=True),
                ev.ThreadExit(ts=t + 0.2, pid=kid, tid=kid),
                ev.ProcessExit(ts=t + 0.3, pid=kid, status=0)]
    evs += [ev.Syscall(ts=T0 + 0.4 + i, pid=90, tid=90, name="clone", ret=91 + i, dur=1e-4)
            for i in range(2)]
    evs += [ev.WaitChild(ts=T0 + 0.45 + i, pid=90, tid=90, name="wait4", child=child_arg,
                         ret=91 + i, dur=0.35) for i in range(2)]
    evs.append(ev.WaitChild(ts=T0 + 2.6, pid=90, tid=90, name="wait4", child=child_arg,
                            ongoing=True, dur=end_minus(T0 + 2.6)))
    infos = [info(90, comm="reaper"), info(91, ppid=90), info(92, ppid=90)]
    if live_child:
        infos.append(info(93, ppid=90))
        evs.append(ev.ReadCall(ts=T0 + 0.1, pid=93, tid=93, name="read", fd=0, fd_kind="tty",
                               fd_target="/dev/pts/1", ongoing=True, dur=end_minus(T0 + 0.1)))
    return run(evs, infos, roots=[90])


def test_a_wait_for_children_that_all_exited_ends_it_is_no_dead_end():
    r = _churn(-1)
    assert r.verdict != "deadlocked" and r.exit_code != 4
    assert graph(r)["proof"] is None
    assert not [e for e in graph(r)["edges"] if e["src"] == "T90"]   # nothing left to wait on
    assert not any(n["stuck"] for n in graph(r)["nodes"])
    p = r.process(90)
    assert (p.verdict, p.rule) == ("unknown", "waited-children-exited")
    assert p.waits_on[0]["pids"] == []
    assert "every one has exited (pid 91 exited with status 0; pid 92 exited with status 0): " \
           "the wait returns" in p.waits_on[0]["what"]


def test_a_wait_for_one_child_that_exited_ends():
    r = _churn(92)
    assert r.verdict != "deadlocked" and graph(r)["proof"] is None
    assert "waits for pid 92 in wait4, and it has exited (pid 92 exited with status 0)" \
        in r.process(90).waits_on[0]["what"]


def test_a_wait_for_any_child_waits_for_the_live_ones_only():
    # 91 and 92 were reaped; the wait can end only by 93, which reads a terminal: the parent
    # is blocked on it, and no dead child is on any path.
    r = _churn(-1, live_child=True)
    assert r.verdict != "deadlocked" and graph(r)["proof"] is None
    edges = [(e["kind"], e["dst"]) for e in graph(r)["edges"] if e["src"] == "T90"]
    assert edges == [("child", "P93")]
    p = r.process(90)
    assert p.verdict == "blocked" and p.waits_on[0]["pids"] == [93]


def test_a_wait_for_a_live_child_that_waits_back_is_still_a_cycle():
    # the rule is about children that exited: a child alive and stuck is a deadlock as before
    parent = info(95, fds=[fd(4, "pipe", "pipe:[21]", "w")])
    child = info(96, ppid=95, fds=[fd(3, "pipe", "pipe:[21]", "r")])
    evs = [ev.WaitChild(ts=T0 + 0.01, pid=95, tid=95, name="wait4", child=-1, ongoing=True),
           ev.ReadCall(ts=T0 + 0.01, pid=96, tid=96, name="read", fd=3, fd_kind="pipe",
                       fd_target="pipe:[21]", ongoing=True)]
    r = run(evs, [parent, child], roots=[95])
    assert r.verdict == "deadlocked"
    assert {e["kind"] for e in graph(r)["proof"]["path"]} >= {"child"}
