"""Reports a timer makes (analysis/progress/reports.py, the thread rule periodic-report and the
/proc and watch judgement of a process's stream output): a stats line printed to a pipe after
each timed wake-up ticks, beside a runner that spins; a worker that writes as it works, a log
file's lines, a metrics pusher's socket and a stream faster than reports do not tick."""
from __future__ import annotations

from tracer import events as ev
from tracer.analysis.progress.reports import REPORT_MAX_RATE, stream_is_report
from tracer.analysis.watch_rules import ProcessLook, _output
from tracer.events.evidence import MemoryProgress

from test_rules import T0, end_minus, fd, info, run, thread

STATS = ("[2026-12-06 03:10:01 TP0] Decode batch. #running-req: 0, #token: 0, token usage: "
         "0.00, gen throughput (token/s): 0.00, #queue-req: 0\n")
PIPE = "pipe:[9001]"


def _stats_thread(pid: int, tid: int, period: float = 2.0, n: int = 3, target: str = PIPE,
                  kind: str = "pipe", split: bool = True) -> list:
    """clock_nanosleep(period), then the line: two writes (unbuffered print: text, "\\n")."""
    out: list = []
    for i in range(n):
        ts = T0 + 0.1 + i * period
        out.append(ev.Syscall(ts=ts, pid=pid, tid=tid, name="clock_nanosleep", ret=0,
                              dur=period - 0.01))
        parts = [STATS[:-1], "\n"] if split else [STATS]
        for k, text in enumerate(parts):
            out.append(ev.WriteCall(ts=ts + period - 0.005 + k * 1e-4, pid=pid, tid=tid,
                                    name="write", fd=1, fd_kind=kind, fd_target=target,
                                    ret=len(text), nbytes=len(text), dur=1e-5))
    return out


def _spinner(pid: int, tid: int) -> list:
    return [ev.ThreadSample(ts=T0 + i, pid=pid, tid=tid, comm="python3", state="R",
                            utime=100 * i, stime=0, syscall="running", run_count=50 + i)
            for i in range(6)]


def test_a_stats_line_to_a_pipe_ticks_and_the_spinner_is_the_root_cause():
    evs = _stats_thread(5, 6) + _spinner(5, 7) + [
        ev.FutexCall(ts=T0 + 0.01, pid=5, tid=5, name="futex", op="WAIT_BITSET", addr=0x10,
                     ongoing=True, dur=end_minus(T0 + 0.01))]
    r = run(evs, [info(5, threads={5: "python3", 6: "python3", 7: "python3"},
                       fds=[fd(1, "pipe", PIPE, "w")])])
    stats = thread(r, 5, 6)
    assert (stats.verdict, stats.rule) == ("busy-waiting", "periodic-report")
    assert "from a loop of 3 timed wake-ups (one every 1.7 s)" in stats.evidence[0]
    assert (r.verdict, r.root_cause["tid"]) == ("busy-waiting", 7)


def test_what_is_not_a_timer_s_report():
    procs = [info(5, fds=[fd(1, "pipe", PIPE, "w")])]
    one = run(_stats_thread(5, 5, n=1), procs)                   # one wake-up: too few
    assert thread(one, 5, 5).rule == "wrote-output"
    log = run(_stats_thread(5, 5, target="/var/log/s.log", kind="file"),
              [info(5, fds=[fd(1, "file", "/var/log/s.log", "w")])])
    assert thread(log, 5, 5).rule != "periodic-report"          # log_lines.py judges a file
    # a worker that writes as it works: no timed wake-up at all
    work = [ev.WriteCall(ts=T0 + i * 0.1, pid=5, tid=5, name="write", fd=1, fd_kind="pipe",
                         fd_target=PIPE, ret=120, nbytes=120, dur=1e-5) for i in range(40)]
    assert thread(run(work, procs), 5, 5).rule == "wrote-output"
    # a loop that logs a line every 50 ms: a rate limit on work, not a report's timer
    fast = _stats_thread(5, 5, period=0.05, n=90)
    assert thread(run(fast, procs), 5, 5).rule == "wrote-output"
    # a loop that sleeps but writes a lot each time (a batch of results, not a line)
    big = _stats_thread(5, 5)
    for e in big:
        if isinstance(e, ev.WriteCall):
            e.nbytes = e.ret = 64 << 10
    assert thread(run(big, procs), 5, 5).rule == "wrote-output"


def _ends(pid: int, ran: dict) -> list:
    """The memory probe's start and end readings of ``pid``: ``{tid: CPU seconds between}``
    (what /proc's task stat counted at the window's ends, 4.6 s apart)."""
    faults = {t: (1, 0) for t in ran}
    return [MemoryProgress(ts=T0 - 0.1, pid=pid, phase="start", faults=faults,
                           cpu={t: 1.0 for t in ran}),
            MemoryProgress(ts=T0 + 4.5, pid=pid, phase="end", faults=faults,
                           cpu={t: 1.0 + s for t, s in ran.items()})]


def test_a_report_the_tracer_slowed_is_judged_by_the_cpu_it_ran():
    """Each call strace stops twice; on a busy machine its stops wait for a CPU too, and the
    time between a stats line's text and its newline counted as the thread's (a live run beside
    the suite: 70 ms twice, 6% of the window outside syscalls, against 5% a report may use:
    "progressing" where the truth is busy-waiting). The ticks /proc counted between the window's
    ends measure what it ran; what strace inferred stays its demand."""
    slowed, ts = [], T0 + 0.05
    for _ in range(3):                          # sleep 1.3 s, the text, 100 ms, the newline
        slowed.append(ev.Syscall(ts=ts, pid=5, tid=6, name="clock_nanosleep", ret=0, dur=1.3))
        for k, text in enumerate([STATS[:-1], "\n"]):
            slowed.append(ev.WriteCall(ts=ts + 1.301 + k * 0.1, pid=5, tid=6, name="write", fd=1,
                                       fd_kind="pipe", fd_target=PIPE, ret=len(text),
                                       nbytes=len(text), dur=1e-5))
        ts += 1.402
    slowed.append(ev.Syscall(ts=ts, pid=5, tid=6, name="clock_nanosleep", ongoing=True,
                             dur=end_minus(ts)))
    procs = [info(5, threads={5: "python3", 6: "python3"}, fds=[fd(1, "pipe", PIPE, "w")])]
    inferred = thread(run(slowed, procs), 5, 6)
    assert inferred.rule == "wrote-output" and inferred.counters["cpu_pct"] >= 5
    measured = thread(run(slowed + _ends(5, {6: 0.02}), procs), 5, 6)
    assert (measured.verdict, measured.rule) == ("busy-waiting", "periodic-report")
    assert measured.counters["cpu_pct"] < 1
    # a loop that computes between its lines is no report, whatever the tracer's timing says
    worked = thread(run(_stats_thread(5, 6) + _ends(5, {6: 0.9}), procs), 5, 6)
    assert worked.rule == "wrote-output" and worked.counters["cpu_pct"] > 15


# /proc/PID/task/TID/syscall of a thread in time.sleep() (the H200's stats thread)
SLEEP = "230 0x1 0x1 0x7f857cffca20 0x0 0x0 0x0 0x7f857cffc990 0x7f88818ecbdf"


def _sleeper(pid: int, tid: int, woke_every: float = 2.0) -> list:
    """/proc samples of a thread in clock_nanosleep, scheduled in once per ``woke_every``."""
    return [ev.ThreadSample(ts=T0 + i * 0.5, pid=pid, tid=tid, comm="python3", state="S",
                            utime=0, stime=0, wchan="hrtimer_nanosleep", syscall=SLEEP,
                            run_count=int(i * 0.5 / woke_every)) for i in range(11)]


def test_a_process_stream_its_timers_could_write_is_no_progress():
    # the proc backend: the process wrote two stats lines (250 B) while its runner spun and
    # its stats thread woke every 2 s
    io = [ev.ProcessIO(ts=T0 + 0.05, pid=5, rchar=0, wchar=240, syscr=0, syscw=5),
          ev.ProcessIO(ts=T0 + 5.0, pid=5, rchar=0, wchar=240 + 250 + 5 * 8, syscr=0, syscw=12)]
    procs = [info(5, threads={5: "python3", 6: "python3", 7: "python3"})]
    r = run(io + _spinner(5, 7) + _sleeper(5, 6), procs, backends=("proc",))
    assert (thread(r, 5, 7).rule, r.verdict) == ("cpu-spin", "busy-waiting")
    # no timer in the process: the spinning thread wrote them, as it works
    r = run(io + _spinner(5, 7), procs, backends=("proc",))
    assert thread(r, 5, 7).rule == "process-output"
    # a thread that wakes 20 times a second is no report's timer: a worker's loop
    r = run(io + _spinner(5, 7) + _sleeper(5, 6, woke_every=0.05), procs, backends=("proc",))
    assert thread(r, 5, 7).rule == "process-output"
    # more than its timers could write: a worker's output
    fast = [io[0], ev.ProcessIO(ts=T0 + 5.0, pid=5, rchar=0, wchar=240 + 100_000, syscr=0,
                                syscw=900)]
    r = run(fast + _spinner(5, 7) + _sleeper(5, 6), procs, backends=("proc",))
    assert thread(r, 5, 7).rule == "process-output"


def test_watch_s_stream_rate():
    assert stream_is_report(250, 5.0) and stream_is_report(REPORT_MAX_RATE * 5, 5.0)
    assert not stream_is_report(REPORT_MAX_RATE * 5 + 1, 5.0)


def _look(ts: float, wchar: int, syscw: int) -> ProcessLook:
    return ProcessLook(pid=5, start_time=1, cpu_ticks=0, comm="python3",
                       io=ev.ProcessIO(ts=ts, pid=5, rchar=0, wchar=wchar, syscr=0,
                                       syscw=syscw))


def test_watch_takes_a_stats_line_for_no_output():
    assert _output(_look(0.0, 0, 0), _look(2.0, 125, 1)) is None
    sig = _output(_look(0.0, 0, 0), _look(2.0, 40_000, 300))
    assert sig is not None and sig.kind == "output"
