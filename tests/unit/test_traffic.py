"""Output means output; keep-alives are not progress (issue: NCCL's unnamed RAS threads).

The event shapes are those the strace and eBPF backends produce for real programs
(fixtures/scenarios/chatty_client.py and heartbeat_hang.py are the live versions)."""
from __future__ import annotations

import pytest

from tracer import events as ev
from tracer.analysis.accumulate.traffic import FdTraffic, keepalive

from test_rules import T0, fd, info, run, thread

SOCK = "TCP:[127.0.0.1:40110->127.0.0.1:29500]"


def sends(pid, tid, sizes, every=0.5, fdn=5, target=SOCK, name="sendto", kind="tcp", t0=0.1):
    return [ev.WriteCall(ts=T0 + t0 + i * every, pid=pid, tid=tid, name=name, fd=fdn,
                         fd_kind=kind, fd_target=target, ret=n, nbytes=n, dur=1e-5)
            for i, n in enumerate(sizes)]


def recvs(pid, tid, sizes, every=0.5, fdn=5, target=SOCK):
    return [ev.ReadCall(ts=T0 + 0.12 + i * every, pid=pid, tid=tid, name="recvfrom", fd=fdn,
                        fd_kind="tcp", fd_target=target, ret=n, nbytes=n, dur=1e-5)
            for i, n in enumerate(sizes)]


def naps(pid, tid, n, every=0.5):
    return [ev.Syscall(ts=T0 + 0.2 + i * every, pid=pid, tid=tid, name="clock_nanosleep",
                       ret=0, dur=every - 0.01) for i in range(n)]


def _tr(sends_, sizes, receives, period, jitter=0.0):
    tr = FdTraffic(5, SOCK, "tcp")
    for i in range(sends_):
        tr.send(T0 + i * period + (jitter if i % 2 else 0.0), sizes[i % len(sizes)])
    for _ in range(receives):
        tr.receive(30)
    return tr


@pytest.mark.parametrize("tr,window,beat", [
    (_tr(10, [30], 10, 0.5), 5.0, True),                 # NCCL RAS: 30 B each way, 2/s
    (_tr(5, [1], 5, 1.0), 5.0, True),                    # TCPStore check: 1-byte replies
    (_tr(10, [30], 0, 0.5), 5.0, True),                  # one way, unanswered: still a beat
    (_tr(10, [120, 260], 0, 0.5), 5.0, False),           # one way, sizes vary: a pusher's output
    (_tr(50, [40], 50, 0.1), 5.0, False),                # 10/s small chunks: a token stream
    (_tr(10, [200, 400], 10, 0.5), 5.0, False),          # sizes vary: requests
    (_tr(10, [4096], 10, 0.5), 5.0, False),              # large messages
    (_tr(500, [30], 500, 0.01), 5.0, False),             # 100/s: a busy protocol
    (_tr(5, [60], 5, 1.0), 5.0, True),                   # NCCL RAS: 4+56 B once a second
    (_tr(10, [30], 10, 0.5, jitter=0.35), 5.0, False),   # irregular: not a steady period
])
def test_keepalive_table(tr, window, beat):
    assert keepalive(tr, window) is beat


def test_sends_on_a_socket_are_output():
    evs = sends(10, 10, [300, 220, 380, 260, 340]) + naps(10, 10, 5)
    r = run(evs, [info(10, fds=[fd(5, "tcp", SOCK)])])
    t = thread(r, 10, 10)
    assert (t.verdict, t.rule) == ("progressing", "wrote-output")
    assert "to fd 5 (TCP:[" in t.evidence[0]


def test_writes_to_dev_null_are_not_output():
    evs = sends(10, 10, [4096] * 20, every=0.2, fdn=1, target="/dev/null", name="write",
                kind="null") + naps(10, 10, 20, every=0.2)
    r = run(evs, [info(10)])
    assert thread(r, 10, 10).verdict != "progressing"


def test_a_connection_made_is_progress():
    evs = [ev.Syscall(ts=T0 + 0.5, pid=10, tid=10, name="connect", fd=5, fd_kind="tcp",
                      fd_target=SOCK, ret=0, dur=1e-4)] + naps(10, 10, 8)
    r = run(evs, [info(10)])
    t = thread(r, 10, 10)
    assert (t.verdict, t.rule) == ("progressing", "made-connections")
    refused = [ev.Syscall(ts=T0 + 0.5 + i, pid=10, tid=10, name="connect", fd=5, fd_kind="tcp",
                          fd_target="TCP:[1]", ret=-1, err="ECONNREFUSED", dur=1e-4)
               for i in range(4)] + naps(10, 10, 8)
    assert thread(run(refused, [info(10)]), 10, 10).verdict != "progressing"


def test_a_helper_s_keepalives_do_not_make_a_spinning_rank_progress():
    # rank 0: the main thread spins (strace timing: never in a syscall); an unnamed thread
    # exchanges 30-byte keep-alives twice a second: NCCL's RAS thread without its name.
    evs = sends(10, 11, [30] * 10) + recvs(10, 11, [30] * 10) + naps(10, 11, 10)
    r = run(evs, [info(10, threads={10: "python3", 11: "python3"},
                       fds=[fd(5, "tcp", SOCK)])], end=T0 + 5.0)
    helper = thread(r, 10, 11)
    assert helper.verdict != "progressing" and helper.helper and "keep-alive" in helper.helper
    assert any("keep-alive traffic, not output" in e for e in helper.evidence)
    assert r.verdict != "progressing"


# ---------------------------------------------------------------- fd lifetimes (issue 32 item 3)
def _close(pid, tid, fdn, ts):
    return ev.Syscall(ts=ts, pid=pid, tid=tid, name="close", args=str(fdn), fd=fdn, ret=0,
                      dur=1e-6)


def _traffic_of(evs, **kw):
    from tracer.analysis.accumulate.accumulator import Accumulator
    acc = Accumulator(start=T0, backends=["strace"], processes=[info(10)], roots=[10])
    for e in sorted(evs, key=lambda e: e.ts):
        acc.feed(e)
    return acc.threads[(10, 10)]


def test_a_closed_fd_s_traffic_is_its_own_lifetime():
    # fd 5: a bulk transfer on one connection, closed; the number reused by a second
    # connection (the same text without -yy: "TCP:[?]") that only sends keep-alives
    bulk = sends(10, 10, [3000, 1200, 4000, 2500], every=0.01, target="TCP:[?]")
    beats = sends(10, 10, [8] * 6, every=0.5, target="TCP:[?]", t0=1.0)
    t = _traffic_of(bulk + [_close(10, 10, 5, T0 + 0.5)] + beats)
    assert [tr.calls for tr in t.closed_sockets] == [4]
    assert t.sockets[5].calls == 6 and t.sockets[5].max_send == 8
    assert keepalive(t.sockets[5], 5.0) and not keepalive(t.closed_sockets[0], 5.0)


@pytest.mark.parametrize("between", [
    pytest.param(lambda ts: [ev.Syscall(ts=ts, pid=10, tid=11, name="dup2", args="7, 5", fd=7,
                                        ret=5, dur=1e-6)], id="dup2-onto-it"),
    pytest.param(lambda ts: [_close(10, 11, 5, ts)], id="closed-by-another-thread"),
    pytest.param(lambda ts: [], id="another-object-behind-the-number"),
])
def test_an_fd_number_reused_starts_a_new_lifetime(between):
    first = sends(10, 10, [300, 220], every=0.01, target="TCP:[?]")
    again = sends(10, 10, [40], t0=1.0, target="UNIX-STREAM:[?]", kind="unix")
    t = _traffic_of(first + between(T0 + 0.5) + again)
    assert [(tr.target, tr.calls) for tr in t.closed_sockets] == [("TCP:[?]", 2)]
    assert (t.sockets[5].target, t.sockets[5].calls) == ("UNIX-STREAM:[?]", 1)


def test_a_transfer_on_a_connection_long_closed_is_old_news():
    # issue 32's fd_reuse: 40 KiB sent early, then 300 calls of keep-alives and poll timeouts
    bulk = sends(10, 10, [1024 + 397 * i % 3072 for i in range(40)], every=0.002,
                 target="TCP:[?]")
    beats = sends(10, 10, [8] * 100, every=0.3, target="TCP:[?]", t0=0.5)
    polls = [ev.PollCall(ts=T0 + 0.6 + 0.3 * i, pid=10, tid=10, name="poll", ret=0,
                         dur=0.3, timeout=0.3, nfds=1) for i in range(200)]
    evs = bulk + [_close(10, 10, 5, T0 + 0.2)] + beats + polls
    r = run(evs, [info(10)], end=T0 + 31.0)
    t = thread(r, 10, 10)
    assert t.verdict != "progressing", (t.verdict, t.rule, t.evidence)
    # the same transfer at the end of the window is output
    late = sends(10, 10, [1024 + 397 * i % 3072 for i in range(40)], every=0.002,
                 target="TCP:[?]", t0=30.5)
    t = thread(run(beats + polls + late, [info(10)], end=T0 + 31.0), 10, 10)
    assert (t.verdict, t.rule) == ("progressing", "wrote-output")
