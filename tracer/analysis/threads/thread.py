"""Thread rules: pure functions from one thread's statistics to a verdict with its evidence.

Contract: ``judge_thread(ctx)`` runs the rules in ``THREAD_RULES`` order and returns the first
verdict; every verdict names the rule that fired and the evidence a person would cite. Rules
never look at a scenario's name, pid or comm, except ``roles.helper_kind`` which recognises
library threads (libcuda, NCCL, PyTorch, ZeroMQ) so that they never decide a verdict alone.

Verdicts of a thread: progressing, busy-waiting, blocked (without a time limit: the process and
tree rules decide whether that is a deadlock), idle, exited, unknown.
"""
from __future__ import annotations

from collections import Counter
from typing import Callable, List, Optional

from ... import events as ev
from ...gpu.nvidia import NV_ESCAPES, escape_by_number, is_nv_escape
from ...linux.syscall_table import parse_proc_syscall
from ..accumulate.accumulator import ProcessStats, Recording, ThreadStats
from .gpu import (rule_gpu_computes, rule_gpu_sync_wait, rule_gpu_work_completes,
                  rule_gpu_yield_wait)
from ..accumulate.log_owners import in_fault_handler
from .device_calls import lower_bound, on_a_device
from .ended import rule_exited, rule_stopped
from .empty_polls import rule_empty_polls
from .observed import rule_not_observed
from ..job.roles import helper_kind
from ..accumulate.io_class import STALE_CALLS_MIN, WAKEUP_MAX_BYTES
from ..accumulate.traffic import describe as describe_traffic
from ..progress.retries import retrying
from .state import blocking_wait, cpu_use, sampled_timer, timed_wakeups
from ..vocab.verdict import (BLOCKED, BUSY, IDLE, PERIODIC_MIN_RATE, PERIODIC_MIN_WAKEUPS,
                             POLL_MIN_RATE, SPIN_CPU, UNKNOWN, YIELD_MIN_RATE, ThreadVerdict)
from .context import ThreadContext
from .output import (REPORT_RULE, _bytes, ends_in_a_wait, heartbeat_output, rule_code_moves,
                     rule_loads_memory, rule_made_connections, rule_periodic_report,
                     rule_process_output, rule_reads_files, rule_served_connections,
                     rule_varied_work, rule_wrote_output, socket_traffic)

# A thread in a periodic loop with nothing to show ticks: it shows its process is alive, not that
# it progresses (a watchdog, a heartbeat, an idle event loop); it decides its process only when
# nothing else does (verdicts/process.py), and a chain of waits never ends at it otherwise.
TICKING_RULE = "periodic-wakeups"
TICKING_RULES = frozenset({TICKING_RULE, REPORT_RULE})
NV_RM_CONTROL = next(nr for nr, name in NV_ESCAPES.items() if name == "RM_CONTROL")


def _no_output(c: ThreadContext) -> bool:
    """Nothing to show now: no output (or only long ago: output_is_stale), no connection."""
    t = c.t
    return (t.output_bytes == 0 or t.output_stale or heartbeat_output(c) is not None) \
        and t.accepts == 0 and t.connects == 0


def _stale_evidence(t: ThreadStats) -> List[str]:
    if not t.output_stale:
        return []
    return [f"its output ({_bytes(t.output_bytes)} in {t.output_writes} writes) all came "
            f"early: nothing in its last {t.ncalls - t.output_at} calls"]


def _keepalive_evidence(t: ThreadStats) -> List[str]:
    """Heartbeats the thread exchanged (traffic.keepalive), said not to be output."""
    if not t.keepalives:
        return []
    first = describe_traffic(t.keepalives[0])
    more = f" and {len(t.keepalives) - 1} more" if len(t.keepalives) > 1 else ""
    return [f"keep-alive traffic, not output: {first}{more}"]


def _spin_evidence(c: ThreadContext) -> List[str]:
    out = [c.cpu.describe(c.rec.window)] if c.cpu else []
    n = c.t.total_syscalls
    if c.rec.has_syscalls:
        out.append("no syscalls" if n == 0 else f"{n} syscalls ({c.rate(n)})")
    return out


# --------------------------------------------------------------------------- rules
def _is_rm_control(kind: Optional[str], req: int) -> bool:
    """An RM_CONTROL escape on an NVIDIA fd, or known by its number on an fd never seen
    opened (kind "?" or None)."""
    return (kind in ("nvidiactl", "nvidia") and (req & 0xFF) == NV_RM_CONTROL
            and is_nv_escape(req)) or (kind in ("?", None)
                                       and escape_by_number(req) == "RM_CONTROL")


def _rm_controls(t: ThreadStats) -> int:
    """RM_CONTROL escapes on NVIDIA fds, or known by their number on fds never seen opened."""
    return sum(n for (kind, req, _), n in t.ioctls.items() if _is_rm_control(kind, req))


def rule_gpu_spin_wait(c: ThreadContext) -> Optional[ThreadVerdict]:
    if c.cpu is None or c.cpu.demand < SPIN_CPU or not _no_output(c) or ends_in_a_wait(c):
        return None
    n = _rm_controls(c.t)
    if n == 0 or n / c.rec.window > 20:
        return None
    others = c.t.total_syscalls - n
    ev_ = [f"{c.rate(n)} RM_CONTROL on /dev/nvidiactl ({n}{c.span()})"
           + (f" and {others} other syscalls" if others else " and no other syscall")
           + ": spin-sync wait, the host spin-waits for the GPU (device/stream synchronize "
           "under the default spin schedule) and the GPU work it waits for has not finished",
           c.cpu.describe(c.rec.window), "no output"]
    return ThreadVerdict(BUSY, "gpu-spin-wait", ev_, cpu=c.cpu, gpu_wait=True)


# A thread that makes nothing but sched_yield spins, however few an untimed log shows (issue 44)
YIELD_MIN_CALLS, YIELD_ONLY_MIN_CALLS = 20, 3


def rule_yield_loop(c: ThreadContext) -> Optional[ThreadVerdict]:
    t = c.t
    timed = c.rec.capabilities.get("timestamps", True)
    least = YIELD_ONLY_MIN_CALLS if not timed and t.yields == t.ncalls \
        and c.wait is None else YIELD_MIN_CALLS
    if t.yields < least or not _no_output(c):
        return None
    if timed and t.yields / c.rec.window < YIELD_MIN_RATE:
        return None
    return ThreadVerdict(BUSY, "yield-loop",
                         [f"sched_yield {c.rate(t.yields)} ({t.yields} calls)", "no output"],
                         cpu=c.cpu)


def rule_cpu_spin(c: ThreadContext) -> Optional[ThreadVerdict]:
    if c.cpu is None or c.cpu.demand < SPIN_CPU or not _no_output(c) or ends_in_a_wait(c):
        return None
    if c.t.samples and c.t.states.get("R", 0) == 0 and c.cpu.source == "samples" \
            and c.cpu.demand < 0.8:
        return None
    return ThreadVerdict(BUSY, "cpu-spin", _spin_evidence(c) + ["no output"], cpu=c.cpu)


# Calls that return at once and do nothing a loop could be waiting for: a thread that makes
# nothing else spins (the clock polled through syscall(2), a no-op loop).
_NO_WAIT_CALLS = frozenset({"clock_gettime", "gettimeofday", "time", "clock_getres", "getpid",
                            "gettid", "getppid", "getrusage", "times", "sched_yield",
                            "sched_getaffinity", "getcpu", "getuid", "geteuid"})


def rule_call_spin(c: ThreadContext) -> Optional[ThreadVerdict]:
    """A long run of calls that never wait, at the end of what was seen, with nothing to show:
    the evidence of a spin where the log has no times (its rate is the order of the lines: it
    makes nothing but these calls), or where strace timing shows it on CPU."""
    t = c.t
    if not _no_output(c) or c.wait is not None:
        return None
    if c.cpu is not None and c.cpu.demand < SPIN_CPU:
        return None
    after = t.ncalls - t.calls_at_output
    spins = sum(t.syscalls.get(n, 0) for n in _NO_WAIT_CALLS)
    if after < STALE_CALLS_MIN or spins < 0.9 * after:
        return None
    names = ", ".join(n for n, _ in Counter({n: t.syscalls[n] for n in _NO_WAIT_CALLS
                                             if t.syscalls.get(n)}).most_common(3))
    return ThreadVerdict(BUSY, "call-spin",
                         [f"spins: its last {after} calls are {names} (calls that never wait), "
                          "one after the other"] + _stale_evidence(t) + ["no output"],
                         cpu=c.cpu)


# The length of the run of one call, returning at once, that a log must end in to be a spin
# whatever the thread did before it (start-up's many kinds of calls, its log lines).
TAIL_SPIN_MIN = 100
# ... or, untimed, only one NVIDIA RM_CONTROL request back to back: it polls the driver (44 5b)
GPU_POLL_MIN = 5


def returns_at_once(e: Optional[ev.Syscall]) -> bool:
    """A call that never waits: the clock or an id (``_NO_WAIT_CALLS``), a poll with a zero
    timeout, a non-blocking call that found nothing (EAGAIN)."""
    if e is None:
        return False
    return e.name in _NO_WAIT_CALLS or e.err == "EAGAIN" or (
        isinstance(e, ev.PollCall) and e.timeout == 0)


def rule_tail_spin(c: ThreadContext) -> Optional[ThreadVerdict]:
    """The end decides: the thread's calls end in a run of at least ``TAIL_SPIN_MIN`` of one
    call with one result that returns at once, with no output in it: a spin, whatever came
    before (start-up's log lines, its kinds of calls, the bytes it read are old news). Without
    times the order of the calls decides; with times the run must fill half the window (and,
    with -T, keep the thread on CPU). A call it is still in must not wait either. A spin rule
    that names the loop better (GPU, yield, CPU, clock calls) answers first."""
    t, rec = c.t, c.rec
    run = t.tail_run
    last = t.last_call
    gpu_poll = isinstance(last, ev.IoctlCall) and _is_rm_control(last.fd_kind, last.request)
    least = GPU_POLL_MIN if gpu_poll and run == t.ncalls and not c.timed else TAIL_SPIN_MIN
    if run < least or t.calls_at_output > t.ncalls - run:
        return None
    if not (returns_at_once(last) or gpu_poll) or (c.wait is not None and c.wait.timeout != 0):
        return None
    if rec.capabilities.get("timestamps", True) and rec.end - t.tail_since < 0.5 * rec.window:
        return None
    if c.cpu is not None and c.cpu.demand < SPIN_CPU:
        return None
    for rule in (rule_gpu_spin_wait, rule_gpu_yield_wait, rule_yield_loop, rule_cpu_spin,
                 rule_call_spin):
        v = rule(c)
        if v is not None and v.verdict == BUSY:
            return v
    ret = "" if t.tail_ret is None else f" = {t.tail_ret}"
    if gpu_poll:                   # an untimed log: the order says what the rate cannot
        return ThreadVerdict(BUSY, "gpu-spin-wait", [
            f"polls the GPU: its last {run} calls are RM_CONTROL ioctls{ret} on /dev/nvidiactl, "
            "one after the other, and nothing else: a host that waits for GPU work that has "
            "not finished", "no output since"], cpu=c.cpu, gpu_wait=True)
    before = [f"its output ({_bytes(t.plain_bytes)} in {t.plain_writes} writes) all came "
              "before that run"] if t.plain_writes else []
    return ThreadVerdict(BUSY, "tail-spin",
                         [f"spins: its last {run} calls are {t.tail_name}{ret}, returning at "
                          "once, one after the other"] + before + ["no output since"],
                         cpu=c.cpu)


def _waits_for_connections(c: ThreadContext) -> Optional[str]:
    w = c.wait
    listening = c.listening
    if w is None:
        return None
    if w.call.startswith("accept"):
        return f"waits for connections in {w.describe()}"
    if w.fd_kind == "tty" and w.call != "ioctl":     # an ioctl: the device's wait (44 item 7)
        return f"waits for terminal input in {w.describe()}"
    if listening and w.call in ("poll", "ppoll", "select", "pselect6", "epoll_wait",
                                "epoll_pwait", "epoll_pwait2"):
        return f"waits in {w.describe()} while listening on {', '.join(listening[:3])}"
    return None


def rule_waits_for_input(c: ThreadContext) -> Optional[ThreadVerdict]:
    why = _waits_for_connections(c)
    if why is None:
        return None
    return ThreadVerdict(IDLE, "waits-for-input", [why], wait=c.wait)


def _sampled_timed_wait(c: ThreadContext) -> Optional[str]:
    """From /proc samples: mostly in one timed wait, and woke up repeatedly (schedstat)."""
    found = sampled_timer(c.t, c.fds)
    if found is None:
        return None
    w, woke, n = found
    if woke < PERIODIC_MIN_WAKEUPS or woke / c.rec.window < PERIODIC_MIN_RATE:
        return None
    return f"in {w.describe()} in {n}/{c.t.samples} samples, woke {woke} times ({c.rate(woke)})"


def rule_retrying(c: ThreadContext) -> Optional[ThreadVerdict]:
    """Periodic wake-ups that each carry the same failing call: a retry loop, where the chain
    of waits ends (progress/retries.py), never a heartbeat."""
    if not _no_output(c):
        return None
    text = retrying(c.t, timed_wakeups(c.t), c.rec.window, c.timed)
    if text is None:
        return None
    return ThreadVerdict(BUSY, "retrying", [text, "no output"], cpu=c.cpu)


def rule_periodic_wakeups(c: ThreadContext) -> Optional[ThreadVerdict]:
    t = c.t
    if not _no_output(c):
        return None
    n = timed_wakeups(c.t)
    signals = t.eventfd_writes + t.wakeup_writes
    evidence: List[str] = []
    # Three timeouts, or two when each round also signals an eventfd/wake-up fd (a short
    # recording of a 1 Hz loop sees two rounds).
    enough = n >= PERIODIC_MIN_WAKEUPS or (n >= 2 and signals >= 2)
    if enough and (not c.rec.capabilities.get("timestamps", True)
                   or n / c.rec.window >= PERIODIC_MIN_RATE):
        parts = []
        if t.poll_timeouts:
            vals = ", ".join(f"{v * 1000:.0f} ms" for v, _ in t.poll_timeout_values.most_common(2))
            parts.append(f"{t.poll_timeouts} poll/epoll timeouts ({vals})")
        if t.futex_timeouts:
            parts.append(f"{t.futex_timeouts} futex wait timeouts")
        if t.sleeps:
            parts.append(f"{t.sleeps} sleeps")
        evidence.append(f"{' + '.join(parts)}{c.span()}" + (f" ({c.rate(n)})" if c.timed else ""))
    else:
        sampled = _sampled_timed_wait(c)
        if sampled is None:
            return None
        evidence.append(sampled)
    if t.eventfd_writes:
        evidence.append(f"{t.eventfd_writes} eventfd writes ({c.rate(t.eventfd_writes)}), "
                        "signalling a loop that never produces output")
    if t.wakeup_writes:
        evidence.append(f"{t.wakeup_writes} wake-up writes to its own pipe/socketpair")
    evidence += _keepalive_evidence(t)
    beat = heartbeat_output(c)
    if beat:
        evidence.append(f"wrote {_bytes(t.output_bytes)} in {t.output_writes} writes, only "
                        f"log lines that say nothing new: {beat}")
    if not c.rec.has_syscalls:
        beats = socket_traffic(c.proc, c.rec.window)[2]
        if beats:
            evidence.append("the process exchanged keep-alives, not output: "
                            + describe_traffic(beats[0]))
    a, b = c.proc.first_io, c.proc.last_io
    if not c.rec.has_syscalls and a is not None and b is not None and b.syscw > a.syscw:
        evidence.append(f"the process made {b.syscw - a.syscw} write calls of at most "
                        f"{WAKEUP_MAX_BYTES} bytes "
                        "each (eventfd or wake-up sized, /proc io)")
    evidence.append("no output")
    return ThreadVerdict(BUSY, TICKING_RULE, evidence, cpu=c.cpu, polls=_polls(c, n))


def _polls(c: ThreadContext, wakeups: int) -> bool:
    """A ticking loop that only looks again: ``POLL_MIN_RATE`` timed wake-ups a second or more
    (schedstat's wake-ups from /proc samples), with no eventfd or wake-up write, no keep-alive
    and no output: a thread polling a flag, not a watchdog that signals (waitgraph/chain.py)."""
    t = c.t
    if t.eventfd_writes or t.wakeup_writes or t.keepalives or t.output_bytes:
        return False
    if not c.rec.has_syscalls:
        a, b = t.first_sample, t.last_sample
        if a is None or b is None or a.run_count is None or b.run_count is None:
            return False
        wakeups = b.run_count - a.run_count
    return c.timed and wakeups / c.rec.window >= POLL_MIN_RATE


def rule_blocked(c: ThreadContext) -> Optional[ThreadVerdict]:
    w = c.wait
    if w is None or (w.timeout is not None and w.call != "futex"):
        return None
    if w.timeout is not None:      # a futex wait with a time limit that did not expire yet
        return None
    how = "throughout the recording" if w.whole_window else \
        f"since {max(0.0, (w.since or c.rec.start) - c.rec.start):.1f} s into it"
    # A thread blocked all along is the first suspect: only pools of identical waits are folded
    # (threads/pools.py, once every thread of the process is judged).
    bound = lower_bound(c) if on_a_device(w) else None
    fault = in_fault_handler(c.t)
    if fault is not None:          # issue 44 item 9: a handler waiting for what its fault held
        bound = f"inside its {fault[0]} handler ({fault[1]}), which never returned"
    return ThreadVerdict(BLOCKED, "blocked-without-timeout",
                         [f"blocked in {w.describe()} {how} ({w.source})"]
                         + ([bound] if bound else []), wait=w, cpu=c.cpu)


def rule_sleeping(c: ThreadContext) -> Optional[ThreadVerdict]:
    w = c.wait
    if w is None:
        return None
    return ThreadVerdict(IDLE, "timed-wait", [f"waits in {w.describe()}"]
                         + _keepalive_evidence(c.t), wait=w, cpu=c.cpu)


def rule_quiet(c: ThreadContext) -> Optional[ThreadVerdict]:
    t = c.t
    if t.total_syscalls == 0 and t.samples == 0 and t.ongoing is None:
        return ThreadVerdict(UNKNOWN, "no-data", ["nothing recorded for this thread"])
    n = t.total_syscalls
    ev_ = [f"{n} syscalls, no output, no spin" if c.rec.has_syscalls else "no output, no spin"]
    if c.cpu is not None:
        ev_.insert(0, c.cpu.describe(c.rec.window))
    return ThreadVerdict(IDLE, "quiet", ev_ + _keepalive_evidence(t), cpu=c.cpu)


THREAD_RULES: List[Callable[[ThreadContext], Optional[ThreadVerdict]]] = [
    rule_exited, rule_stopped, rule_not_observed, rule_tail_spin, rule_periodic_report,
    rule_wrote_output,
    rule_process_output, rule_served_connections, rule_made_connections, rule_varied_work,
    rule_reads_files,
    rule_loads_memory, rule_code_moves, rule_gpu_work_completes, rule_gpu_computes,
    rule_gpu_sync_wait, rule_gpu_spin_wait, rule_gpu_yield_wait, rule_yield_loop, rule_cpu_spin, rule_call_spin,
    rule_empty_polls, rule_waits_for_input, rule_retrying,
    rule_periodic_wakeups, rule_blocked, rule_sleeping, rule_quiet,
]


KEEPALIVE_HELPER = ("keep-alive thread (exchanges small messages with a peer at a steady "
                    "period, like NCCL's RAS thread)")


def _helper_by_behaviour(c: ThreadContext, v: ThreadVerdict) -> Optional[str]:
    """Logs and unnamed library threads carry no telling names: know a helper by what it does.
    Without per-thread syscalls (proc backend), a thread in a timed-wakeup loop of a process
    whose only socket traffic is keep-alives is taken for the keep-alive thread."""
    t = c.t
    if t.output_bytes or t.accepts or t.connects:
        return None
    if t.poll_fd_kinds.get("nvidia"):
        return "GPU event poller (polls /dev/nvidia* fds, like libcuda's cuda-EvtHandlr)"
    if t.keepalives:
        return KEEPALIVE_HELPER
    if not c.rec.has_syscalls and v.rule == "periodic-wakeups":
        _, socket_output, beats = socket_traffic(c.proc, c.rec.window)
        if beats and not socket_output:
            return KEEPALIVE_HELPER + ", judged from its process's TCP counters"
    return None


def judge_thread(t: ThreadStats, rec: Recording, proc: ProcessStats) -> ThreadVerdict:
    fds = proc.info.fds if proc.info else []
    ctx = ThreadContext(t=t, rec=rec, proc=proc, wait=blocking_wait(t, rec, fds),
                        cpu=cpu_use(t, rec))
    helper = helper_kind(t.comm) if not t.is_main else None
    for rule in THREAD_RULES:
        v = rule(ctx)
        if v is not None:
            if helper is None and not t.is_main and v.verdict in (BUSY, IDLE):
                helper = _helper_by_behaviour(ctx, v)
            v.helper = helper
            v.ticks = v.rule in TICKING_RULES
            if v.wait is None:
                v.wait = ctx.wait
            if v.cpu is None:
                v.cpu = ctx.cpu
            return v
    raise AssertionError("rule_quiet always answers")  # pragma: no cover


def current_call_text(t: ThreadStats) -> str:
    """A short 'what is it doing now' for the report's thread line."""
    if t.ongoing is not None:
        return t.ongoing.name
    if t.last_sample is not None:
        s = t.last_sample.syscall
        if s.startswith("running"):
            return "running"
        cs = parse_proc_syscall(s)
        if cs is not None and cs.name:
            return cs.name
    return t.last_call.name if t.last_call is not None else ""
