"""The progress predicates of hangtrace watch (tracer/analysis/watch_rules.py): tables of looks."""
from __future__ import annotations

import pytest

from tracer import events as ev
from tracer.analysis.watch_rules import ProcessLook, TreeLook, progress_signals
from tracer.analysis.accumulate.traffic import SMALL as KEEPALIVE_MAX_BYTES
from tracer.linux.tcpdiag import TcpSock

PID = 100


def io(wchar=0, syscw=0, rchar=0, syscr=0, read_bytes=0):
    return ev.ProcessIO(ts=0.0, pid=PID, rchar=rchar, wchar=wchar, syscr=syscr, syscw=syscw,
                        read_bytes=read_bytes)


def proc(cpu=0, start=7, **kw):
    return ProcessLook(pid=PID, start_time=start, cpu_ticks=cpu, io=io(**kw), ticks_hz=100,
                       comm="server")


def kinds(a, b):
    return [s.kind for s in progress_signals(a, b)]


# --------------------------------------------------------------------------- /proc counters
@pytest.mark.parametrize("before, after, want", [
    # eventfd pokes once a second: 8-byte writes are wake-ups, not output (the analyzer's rule)
    (proc(wchar=800, syscw=100), proc(wchar=808, syscw=101), []),
    # a self-pipe wake-up of 1 byte
    (proc(wchar=800, syscw=100), proc(wchar=801, syscw=101), []),
    # a log line
    (proc(wchar=800, syscw=100), proc(wchar=921, syscw=101), ["output"]),
    # a log line among a hundred eventfd writes still shows
    (proc(wchar=0, syscw=0), proc(wchar=800 + 120, syscw=101), ["output"]),
    # a busy spin: CPU, no input, no output
    (proc(cpu=0), proc(cpu=100), []),
    # a poll loop reading eventfds: CPU and 8-byte reads only
    (proc(cpu=0, rchar=0, syscr=0), proc(cpu=30, rchar=8000, syscr=1000), []),
    # loading weights: CPU while reading 64 MiB from the page cache
    (proc(cpu=0, rchar=0, syscr=0), proc(cpu=60, rchar=64 << 20, syscr=64), ["work"]),
    # ... or from storage
    (proc(cpu=0, read_bytes=0), proc(cpu=60, read_bytes=8 << 20), ["work"]),
    # input without running (less than 1% of a CPU): not work
    (proc(cpu=0, rchar=0), proc(cpu=0, rchar=64 << 20, syscr=1), []),
    # a monitoring loop reading a few KiB of /proc a second
    (proc(cpu=0, rchar=0, syscr=0), proc(cpu=3, rchar=6000, syscr=20), []),
    # a reused pid is another process: no deltas
    (proc(wchar=0, syscw=0), proc(start=99, wchar=10_000, syscw=1), []),
])
def test_process_rules(before, after, want):
    a = TreeLook(ts=0.0, processes={PID: before})
    b = TreeLook(ts=1.0, processes={PID: after})
    assert kinds(a, b) == want


def test_evidence_names_pid_and_amount():
    a = TreeLook(ts=0.0, processes={PID: proc(wchar=0, syscw=0)})
    b = TreeLook(ts=1.0, processes={PID: proc(wchar=2048 + 8, syscw=2)})
    (s,) = progress_signals(a, b)
    assert s.pid == PID and "pid 100 (server) wrote 2.0 KiB beyond wake-up writes" in s.text


def test_new_process_has_no_deltas_yet():
    a = TreeLook(ts=0.0)
    b = TreeLook(ts=1.0, processes={PID: proc(wchar=10_000, syscw=1)})
    assert kinds(a, b) == []


# --------------------------------------------------------------------------- TCP
LISTEN = TcpSock(1, 500, "LISTEN", ("0.0.0.0", 8000), ("0.0.0.0", 0), 0, 0, 0)


def sock(cookie, inode, acked, segs, state="ESTABLISHED", local=("10.0.0.1", 40000),
         remote=("10.0.0.2", 9000)):
    return TcpSock(cookie, inode, state, local, remote, acked, 0, segs)


def look(ts, *socks, owners=None, listening=frozenset({("0.0.0.0", 8000)})):
    return TreeLook(ts=ts, sockets={s.cookie: s for s in (LISTEN,) + socks},
                    owners={500: PID, 600: PID} if owners is None else owners,
                    listening=listening)


@pytest.mark.parametrize("a, b, want", [
    # a heartbeat: one 40-byte segment a second is keep-alive chatter
    (look(0, sock(2, 600, 1000, 50)), look(1, sock(2, 600, 1040, 51)), []),
    (look(0, sock(2, 600, 1000, 50)), look(10, sock(2, 600, 1000 + 20 * 40, 70)), []),
    # a response: 30 KiB in a few segments
    (look(0, sock(2, 600, 1000, 50)), look(1, sock(2, 600, 1000 + 30_000, 53)), ["sent"]),
    # small messages, but more often than a keep-alive
    (look(0, sock(2, 600, 1000, 50)), look(1, sock(2, 600, 1000 + 10 * 40, 60)), ["sent"]),
    # one segment larger than chatter
    (look(0, sock(2, 600, 0, 0)), look(1, sock(2, 600, KEEPALIVE_MAX_BYTES + 1, 1)), ["sent"]),
    # a socket of another process (inode not the tree's): not ours
    (look(0, sock(2, 777, 1000, 50)), look(1, sock(2, 777, 90_000, 60)), []),
    # a new connection of the tree that sent a request (its SYN counts as one byte acked)
    (look(0), look(1, sock(3, 600, 1 + 5000, 2)), ["sent"]),
    (look(0), look(1, sock(3, 600, 1, 0)), []),
    # no sock_diag in one of the looks: nothing about sockets can be said
    (TreeLook(ts=0), look(1, sock(3, 600, 90_000, 9)), []),
])
def test_socket_rules(a, b, want):
    assert kinds(a, b) == want


def test_accepted_connections():
    queued = sock(5, 0, 0, 0, local=("127.0.0.1", 8000), remote=("127.0.0.1", 5555))
    taken = sock(5, 901, 0, 0, local=("127.0.0.1", 8000), remote=("127.0.0.1", 5555))
    closed = sock(6, 0, 0, 0, state="TIME_WAIT", local=("127.0.0.1", 8000),
                  remote=("127.0.0.1", 5556))
    client = sock(7, 600, 1, 0, local=("127.0.0.1", 41000), remote=("127.0.0.1", 8000))
    other_port = sock(8, 902, 0, 0, local=("127.0.0.1", 9999), remote=("127.0.0.1", 5557))
    # waiting in the accept queue (no file refers to it): the tree did not take it (yet)
    assert kinds(look(0), look(1, queued)) == []
    # taken out of the queue since: accepted, even though the fd tables were not read again
    got = progress_signals(look(0, queued), look(1, taken))
    assert [s.kind for s in got] == ["accepted"]
    assert got[0].text == "the tree accepted 1 new connection on port 8000"
    assert kinds(look(0, taken), look(1, taken)) == []          # the same one is not new
    assert kinds(look(0), look(1, closed)) == ["accepted"]      # served and closed meanwhile
    assert kinds(look(0), look(1, client, other_port)) == []    # its own client side; not ours
    # a listener bound to one address: connections to it only
    assert kinds(look(0, listening=frozenset({("127.0.0.2", 8000)})),
                 look(1, taken, listening=frozenset({("127.0.0.2", 8000)}))) == []


# --------------------------------------------------------------------------- GPU
def gpu(util, pids=(PID,), index=0):
    return ev.GpuSample(ts=0.0, gpu=index, util_pct=util, pids=list(pids))


def glook(ts, *gpus):
    return TreeLook(ts=ts, processes={PID: proc()}, gpus=list(gpus))


@pytest.mark.parametrize("u0, u1, pids, want", [
    (100, 100, (PID,), []),          # pinned: a kernel that does not finish is not progress
    (0, 0, (PID,), []),              # idle
    (100, 45, (PID,), ["gpu"]),      # part of the period busy: kernels start and finish
    (100, 0, (PID,), ["gpu"]),       # a swing from busy to idle
    (0, 97, (PID,), ["gpu"]),
    (30, 50, (4242,), []),           # a GPU someone else uses
    (30, 50, (), ["gpu"]),           # NVML shows no pids (a container): every GPU counts
    (None, None, (PID,), []),        # NVML could not say
])
def test_gpu_rules(u0, u1, pids, want):
    assert kinds(glook(0, gpu(u0, pids)), glook(1, gpu(u1, pids))) == want


def pgpu(util, watts, active=None, pids=(PID,)):
    return ev.GpuSample(ts=0.0, gpu=0, util_pct=util, pids=list(pids), power_mw=int(watts * 1000),
                        power_limit_mw=700_000, sm_active_pct=active)


# The H200's readings (reference/progress-signals.md): utilization says "busy" for both a
# warm-up and a kernel that never ends; power and GPM's SM activity tell them apart.
@pytest.mark.parametrize("s0, s1, want", [
    (pgpu(95, 688), pgpu(97, 690), ["gpu"]),               # bf16 matmuls, 98% of the limit
    (pgpu(100, 121), pgpu(100, 121), []),                  # a spinning kernel: idle power
    (pgpu(100, 118, 0.8), pgpu(100, 118, 0.9), []),        # the same with GPM
    (pgpu(98, 647, 93.6), pgpu(98, 650, 93.0), ["gpu"]),
    (pgpu(22, 195), pgpu(22, 195), ["gpu"]),               # CUDA graph capture
    (pgpu(95, 688, pids=(4242,)), pgpu(97, 690, pids=(4242,)), []),   # someone else's GPU
])
def test_gpu_work_by_power_and_sm_activity(s0, s1, want):
    assert kinds(glook(0, s0), glook(1, s1)) == want


# --------------------------------------------------------------------------- memory
def mproc(faults, rss_mib, read_bytes=0):
    p = proc(read_bytes=read_bytes)
    return ProcessLook(pid=PID, start_time=p.start_time, cpu_ticks=0, io=p.io, ticks_hz=100,
                       comm="server", faults=faults, rss_bytes=rss_mib << 20)


@pytest.mark.parametrize("before, after, want", [
    (mproc(1000, 500), mproc(1600, 540), ["memory"]),            # mmap loading: RSS grows
    (mproc(1000, 500, 0), mproc(1400, 500, 40 << 20), ["memory"]),   # faults read storage
    (mproc(1000, 500), mproc(1005, 540), []),                    # RSS grew without faults
    # large folios (Linux 6.18): 9 faults brought 14 MiB in from storage; 512 KiB is too little
    (mproc(1000, 500, 0), mproc(1009, 500, 14 << 20), ["memory"]),
    (mproc(1000, 500, 0), mproc(1009, 500, 512 << 10), []),
    (mproc(1000, 500), mproc(5000, 500), []),                    # faults, nothing came in
])
def test_memory_coming_in(before, after, want):
    a = TreeLook(ts=0.0, processes={PID: before})
    b = TreeLook(ts=1.0, processes={PID: after})
    assert kinds(a, b) == want
