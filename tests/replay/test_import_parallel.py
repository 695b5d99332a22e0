"""Sharded import (tracer/tracefile/strace_parallel.py): exactly the sequential import, whatever the log.

The sharded path is forced with ``import_strace(..., workers=N)`` and tiny batches, then
compared with ``workers=1``: same trace bytes (rows in the same order), hence the same multiset
of events, header process table and analysis report (checked explicitly too).
"""
from __future__ import annotations

import gzip
import json
import multiprocessing
import os
import random
import sys

import pytest

from tracer.strace import parallel as import_parallel
from tracer.tracefile import format as trace
from tracer.load.trace import analyze_trace
from tracer.strace.parallel import classify
from tracer.strace.ff import SingleLog
from tracer.strace.importer import ImportError_, import_strace
from tracer.strace.lines import parse_line

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tests/
FIXTURES = os.path.join(HERE, "..", "fixtures", "gpu-h200")
DATA = os.path.join(HERE, "data", "strace")
sys.path.insert(0, os.path.join(HERE, "..", "bench"))

import import_speed  # noqa: E402

_SPECIAL = {"clone", "clone3", "fork", "vfork", "execve", "execveat", "exit_group", "epoll_ctl",
            "prctl"}
_THREAD_FLAGS = ("flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM"
                 "|CLONE_SETTLS|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID")
_FORK_FLAGS = "flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD"
_POLL = ("[{fd=16<anon_inode:[eventfd]>, events=POLLIN}, {fd=18</dev/nvidia0<char 195:0>>, "
         "events=POLLIN}]")


# --------------------------------------------------------------------------- a rich log
def complex_log(path: str, *, style: str = "o", seed: int = 7, steps: int = 6000) -> None:
    """Processes and threads that clone (threads and processes, complete and split calls, the
    child's first line before the parent's result), exec, name threads, register epoll fds,
    block in split calls across shards, get signals, exit, exit_group and are killed; a few
    garbage and blank lines; calls still pending at the end, several with the same start.

    style: "o" (-f -o: "1234  ts ..."), "pid" ("[pid  1234] ts ..."), "nots" (no timestamps).
    """
    rnd = random.Random(seed)
    ts = 1795950000.0
    procs = {100: [100, 101, 102]}          # pid -> live tids
    pid_of = {100: 100, 101: 100, 102: 100}
    pending = {}                            # tid -> (name, resumed text)
    next_tid = [103]
    out = []

    def emit(tid, body):
        if style == "o":
            out.append(f"{tid:<5} {ts:.6f} {body}")
        elif style == "pid":
            out.append(f"[pid {tid:>5}] {ts:.6f} {body}")
        else:
            out.append(f"{tid:<5} {body}")

    def new_tid():
        next_tid[0] += rnd.randint(1, 3)
        return next_tid[0]

    def free_tids():
        return [t for ts_ in procs.values() for t in ts_ if t not in pending]

    def d():
        return f"<{rnd.random() * 0.001:.6f}>"

    def start_child(parent, thread):
        """A clone of ``parent``: complete, or split with the child speaking in between."""
        pid = pid_of[parent]
        child = new_tid()
        kind = "thread" if thread else rnd.choice(["clone", "fork", "vfork", "clone3"])
        if kind == "thread":
            call, args = "clone", f"child_stack=0x7f0000, {_THREAD_FLAGS}, parent_tid=[{child}]"
        elif kind == "clone3":
            call, args = "clone3", "{flags=CLONE_VM|CLONE_VFORK, exit_signal=SIGCHLD}, 88"
        elif kind == "clone":
            call, args = "clone", f"child_stack=NULL, {_FORK_FLAGS}, child_tidptr=0x7f00"
        else:
            call, args = kind, ""
        if thread:
            procs[pid].append(child)
            pid_of[child] = pid
        else:
            procs[child] = [child]
            pid_of[child] = child
        if rnd.random() < 0.5:
            emit(parent, f"{call}({args}) = {child} {d()}")
        else:
            emit(parent, f"{call}({args}{', ' if args else ''}<unfinished ...>")
            if rnd.random() < 0.6:           # the child runs before the parent's clone returns
                emit(child, f"getpid() = {pid_of[child]} {d()}")
            emit(parent, f"<... {call} resumed>) = {child} {d()}")

    for _ in range(steps):
        ts += rnd.random() * 0.0005
        r = rnd.random()
        free = free_tids()
        if pending and (not free or r < 0.2):
            t = rnd.choice(sorted(pending))
            name, tail = pending.pop(t)
            emit(t, f"<... {name} resumed>{tail} {d()}")
            continue
        if not free:
            break
        t = rnd.choice(free)
        pid = pid_of[t]
        if r < 0.45:
            emit(t, rnd.choice([
                f'write(1</srv/out.log>, "step 1\\n", 7) = 7 {d()}',
                f"ioctl(8</dev/nvidiactl<char 195:255>>, _IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2a, "
                f"0x20), 0x7ffed3135b90) = 0 {d()}",
                f"futex(0x55d0c0a0{t:04x}, FUTEX_WAKE_PRIVATE, 1) = 1 {d()}",
                f"read(12<TCP:[127.0.0.1:8000->127.0.0.1:47550]>, \"GET\", 65536) = 3 {d()}",
                f"poll({_POLL}, 2, 100) = 0 (Timeout) <0.100123>",
                "epoll_wait(6<anon_inode:[eventpoll]>, [], 1024, 50) = 0 <0.050100>",
            ]))
        elif r < 0.70:
            name, head, tail = rnd.choice([
                ("futex", f"futex(0x55d0c0a0{t:04x}, FUTEX_WAIT_PRIVATE, 2, NULL", ") = 0"),
                ("poll", f"poll({_POLL}, 2, 100", ") = 0 (Timeout)"),
                ("epoll_wait", "epoll_wait(6<anon_inode:[eventpoll]>, ",
                 "[{events=EPOLLIN, data={u32=12, u64=12}}], 1024, 50) = 1"),
                ("wait4", "wait4(-1, ", "0x7ffd, 0, NULL) = -1 ECHILD (No child processes)"),
            ])
            emit(t, f"{head} <unfinished ...>")
            pending[t] = (name, tail)
        elif r < 0.76:
            start_child(t, thread=True)
        elif r < 0.785:
            start_child(t, thread=False)
        elif r < 0.80:
            emit(t, f'execve("/usr/bin/python3", ["python3", "w{t}.py", "--x"], '
                    f"0x7ffd /* 3 vars */) = 0 {d()}")
            for other in procs[pid]:
                if other != t:
                    pending.pop(other, None)
                    pid_of.pop(other, None)
            procs[pid] = [pid]
            pid_of[pid] = pid                   # the exec'ing thread becomes the leader
            if t != pid:
                emit(t, f"+++ superseded by execve in pid {pid} +++")
                pending.pop(t, None)
                pid_of.pop(t, None)
        elif r < 0.82:
            emit(t, f'prctl(PR_SET_NAME, "worker-{t}") = 0 {d()}')
        elif r < 0.84:
            emit(t, f"epoll_ctl(6<anon_inode:[eventpoll]>, EPOLL_CTL_ADD, "
                    f"{rnd.choice(['12<TCP:[1.2.3.4:80->5.6.7.8:9]>', '9<pipe:[77]>'])}, "
                    f"{{events=EPOLLIN, data={{u32=9, u64=9}}}}) = 0 {d()}")
        elif r < 0.85:
            emit(t, "--- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=4242, si_uid=0, "
                    "si_status=0} ---")
        elif r < 0.86 and t != pid:             # a thread ends (maybe inside a call)
            if rnd.random() < 0.3:
                emit(t, "futex(0x7f00, FUTEX_WAIT_PRIVATE, 0, NULL <unfinished ...>")
            emit(t, "+++ exited with 0 +++")
            procs[pid].remove(t)
            pending.pop(t, None)
        elif r < 0.865 and pid != 100:          # a whole process ends
            if rnd.random() < 0.5:
                emit(t, "exit_group(3) = ?")
                for other in [x for x in procs[pid] if x != pid] + [pid]:
                    emit(other, "+++ exited with 3 +++")
            else:
                for other in procs[pid]:
                    emit(other, "+++ killed by SIGKILL +++")
            for other in procs.pop(pid):
                pending.pop(other, None)
        elif r < 0.87:
            out.append(rnd.choice(["", "garbage that is not strace", "   "]))
    # Still blocked at the end: several calls with the very same start (ties across shards).
    for t in free_tids()[:6]:
        emit(t, f"futex(0x55d0c0b0{t:04x}, FUTEX_WAIT_PRIVATE, 2, NULL <unfinished ...>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


# --------------------------------------------------------------------------- helpers
def _content(path: str) -> bytes:
    data = open(path, "rb").read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _report(path: str) -> dict:
    rep = analyze_trace(path).to_json()
    rep.pop("trace", None)
    return rep


def _compare(log: str, tmp_path, workers: int = 2, out_name: str = "t.htrace.gz"):
    seq = str(tmp_path / ("seq-" + out_name))
    par = str(tmp_path / ("par-" + out_name))
    r1 = import_strace(log, seq, workers=1)
    r2 = import_strace(log, par, workers=workers)
    a, b = _content(seq), _content(par)
    rows_a, rows_b = a.split(b"\n")[1:], b.split(b"\n")[1:]
    assert sorted(rows_a) == sorted(rows_b)                 # the same multiset of events
    ha, hb = json.loads(a.split(b"\n")[0]), json.loads(b.split(b"\n")[0])
    assert ha["processes"] == hb["processes"] and ha["targets"] == hb["targets"]
    assert a == b                                           # ... even the same order
    assert _report(seq) == _report(par)
    assert (r1.events, r1.lines, r1.unparsed, r1.truncated, r1.start, r1.end) == \
           (r2.events, r2.lines, r2.unparsed, r2.truncated, r2.start, r2.end)
    assert r1.capabilities == r2.capabilities and r1.warnings == r2.warnings
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".hangtrace-import-")]
    assert not multiprocessing.active_children()
    return r1, r2


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(import_parallel, "BATCH_LINES", 97)   # many cuts, odd size


# --------------------------------------------------------------------------- tests
@pytest.mark.parametrize("style", ["o", "pid", "nots"])
@pytest.mark.parametrize("workers", [2, 3])
def test_complex_log_sharded_equals_sequential(tmp_path, small_batches, style, workers):
    log = str(tmp_path / "complex.strace")
    complex_log(log, style=style)
    r1, _ = _compare(log, tmp_path, workers)
    assert r1.unparsed > 0 and len(r1.processes) > 3        # the log did what it should
    info = trace.open_trace(str(tmp_path / "seq-t.htrace.gz"))
    evs = list(info.events())
    tags = {type(e).__name__ for e in evs}
    assert {"ThreadStart", "ProcessExec", "ThreadExit", "ProcessExit", "Lost",
            "SignalDelivered", "PollCall"} <= tags
    ongoing = [e for e in evs if getattr(e, "ongoing", False)]
    assert len(ongoing) >= 6 and len({e.ts for e in ongoing}) < len(ongoing)   # ties


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_other_seeds(tmp_path, small_batches, seed):
    log = str(tmp_path / "complex.strace")
    complex_log(log, seed=seed, steps=3000)
    _compare(log, tmp_path, 2, "t.htrace")


def test_bench_log_sharded_equals_sequential(tmp_path):
    log = str(tmp_path / "bench.strace")
    import_speed.generate(log, 50_000)
    r1, _ = _compare(log, tmp_path, 2)
    assert r1.lines == 50_000 and r1.events > 40_000


def test_single_process_log_without_pid_column(tmp_path, small_batches):
    src = [ln for ln in open(os.path.join(DATA, "attach_p_ttt_T_yy.log"))]
    assert all(not ln[:1].isdigit() or "." in ln.split(" ")[0] for ln in src if ln.strip())
    log = tmp_path / "nopid.log"
    log.write_text("".join(src * 50))
    _compare(str(log), tmp_path, 2)


def test_fds_of_a_process_alive_at_the_end_without_y(tmp_path, small_batches):
    """Without -y, the fds a process opened and kept are in its ProcessInfo whichever path
    imported the log (the sharded one took its process table before finish() filled them)."""
    log = tmp_path / "alive.log"
    log.write_text('7 openat(AT_FDCWD, "/tmp/app.log", O_WRONLY|O_CREAT, 0644) = 3\n'
                   '7 pipe2([4, 5], 0) = 0\n'
                   + '7 poll([{fd=4, events=POLLIN}], 1, 0) = 0 (Timeout)\n' * 300)
    _compare(str(log), tmp_path, 2)
    procs = trace.open_trace(str(tmp_path / "par-t.htrace.gz")).info.processes
    assert [f.fd for f in procs[0].fds] == [3, 4, 5]


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(DATA) if n.endswith(".log")))
def test_data_logs(tmp_path, small_batches, name):
    _compare(os.path.join(DATA, name), tmp_path, 2)


@pytest.mark.parametrize("name", ["startup.strace.gz", "blocking_event.strace.gz",
                                  "progress.strace.gz", "spin.strace.gz"])
def test_h200_logs(tmp_path, small_batches, name):
    _compare(os.path.join(FIXTURES, name), tmp_path, 2)


def test_truncated_gzip_log(tmp_path, small_batches):
    log = str(tmp_path / "complex.strace")
    complex_log(log, steps=20000)
    data = gzip.compress(open(log, "rb").read())
    cut = tmp_path / "cut.strace.gz"
    cut.write_bytes(data[: len(data) * 2 // 3])
    r1, r2 = _compare(str(cut), tmp_path, 2)
    assert r2.truncated and 0 < r2.lines < sum(1 for _ in open(log))
    info = trace.open_trace(str(tmp_path / "par-t.htrace.gz"))
    assert sum(1 for _ in info.events()) == r2.events
    assert info.info.end.reason == "log-truncated"
    assert info.info.header["options"]["log_truncated"] is True


def test_classify_never_misses_state(tmp_path):
    """Every line the converter reads as shared state is global, every half of a call
    stateful, and the tid column classify reads is parse_line's tid."""
    paths = [os.path.join(DATA, n) for n in os.listdir(DATA) if n.endswith(".log")]
    for style in ("o", "pid", "nots"):
        p = str(tmp_path / f"c-{style}.log")
        complex_log(p, style=style, steps=3000)
        paths.append(p)
    odd = ["[pid 12 ] 1.0 clone(x) = 3", "[ Process PID=12 runs in 32 bit mode. ]",
           "strace: Process 77 attached", "12 1.0 strace: Process 77 attached",
           "12  1.0 +++ killed by SIGKILL (core dumped) +++", "1.5 clone3({}, 88) = 5",
           "12  <... execve resumed>) = 0", "12  1.0 --- SIGINT {si_signo=SIGINT} ---"]
    checked = 0
    for text in odd + [ln for p in paths for ln in open(p, newline="")]:
        line = parse_line(text)
        if line is None:
            continue
        key, glob, stateful = classify(text)
        if line.kind in ("exited", "killed", "attached", "detached") or line.name in _SPECIAL:
            assert glob, text
        if key != ("" if line.tid is None else str(line.tid)):    # "" is the tid 0 of a
            assert glob, text                                      # line without a tid
        if line.kind in ("unfinished", "resumed"):
            assert stateful or glob, text
        checked += 1
    assert checked > 5000


def test_plan(tmp_path):
    log = str(tmp_path / "b.strace")
    import_speed.generate(log, 2000)
    first = SingleLog(log).scan()
    kw = dict(size=first.size, membership=first.membership(), base_date=None)
    assert import_parallel.plan_shards(first.tid_lines, first_tod=None, **kw) is None  # small
    plan = import_parallel.plan_shards(first.tid_lines, first_tod=None, workers=2, **kw)
    assert plan is not None and set(plan.assign.values()) == {0, 1}
    assert import_parallel.plan_shards(first.tid_lines, first_tod=3600.0, workers=2,
                                       **kw) is None            # -t/-tt: sequential
    assert import_parallel.plan_shards(first.tid_lines, first_tod=None, workers=1,
                                       **kw) is None


def test_worker_failure_leaves_nothing(tmp_path, monkeypatch):
    log = str(tmp_path / "b.strace")
    import_speed.generate(log, 3000)

    def broken(*a, **k):
        raise RuntimeError("boom")
    monkeypatch.setattr(import_parallel, "_work", broken)       # fork: the children see it
    if import_parallel._context().get_start_method() != "fork":
        pytest.skip("the patch reaches the workers only with fork")
    with pytest.raises(ImportError_, match="boom"):
        import_strace(log, str(tmp_path / "o.htrace"), workers=2)
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".hangtrace-import-")]
    assert not multiprocessing.active_children()


def test_interrupt_terminates_workers(tmp_path, monkeypatch):
    log = str(tmp_path / "b.strace")
    import_speed.generate(log, 20000)
    monkeypatch.setattr(import_parallel, "BATCH_LINES", 500)
    real = import_parallel._recv
    calls = []

    def interrupted(conn, k):
        calls.append(k)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real(conn, k)
    monkeypatch.setattr(import_parallel, "_recv", interrupted)
    with pytest.raises(KeyboardInterrupt):
        import_strace(log, str(tmp_path / "o.htrace"), workers=2)
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".hangtrace-import-")]
    assert not multiprocessing.active_children()
