"""Thread rules about what a thread has to show: output written, output of its process seen
through /proc and the kernel's counters, connections served or made, varied work.

Contract: as threads/thread.py (pure functions of a ``ThreadContext``, each verdict naming its
rule and evidence; THREAD_RULES there orders them). ``process_output`` is the /proc rule of
output by channel (io_class.proc_output_bytes less the TCP bytes the sockets' own counters
judge; TCP; files whose position advanced), shared with watch's rules; a stream its timers could
have written is no progress there (progress/reports.py); ``socket_traffic`` judges a process's
TCP sockets by the keep-alive rule.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Set, Tuple

from ..accumulate.io_class import is_old_news, proc_output_bytes
from ..accumulate.stats import ProcessStats, ThreadStats
from ..accumulate.traffic import FdTraffic, keepalive
from ..accumulate.traffic import from_counters as counters_traffic
from ..job.roles import helper_kind
from ..progress.gpu import stalled_sync
from ..progress.log_lines import heartbeat_fds, news_by_fd
from ..progress.memory import loading
from ..progress.reports import MAX_HZ, periodic_report, timer_reports
from ..progress.stacks import code_moves
from ..vocab.verdict import BUSY, PROGRESSING, SPIN_CPU, WAIT_NAMES, ThreadVerdict
from ..vocab.waits import BLOCKING_CALLS
from .context import ThreadContext
from .device_calls import DEVICE_WAIT_MIN_S, on_a_device, others_went_on
from .state import sampled_timer, timed_wakeups

REPORT_RULE = "periodic-report"          # a ticking rule: its timer, not its work, writes


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


_LABEL_FD = re.compile(r"fd (\d+)\b")


def _output_fds(t: ThreadStats) -> Optional[Set[int]]:
    """The fds the thread's output went to, None when one is not known by number."""
    fds = set()
    for label in t.output_targets:
        m = _LABEL_FD.match(label)
        if m is None:
            return None
        fds.add(int(m.group(1)))
    return fds


def heartbeat_output(c: ThreadContext) -> Optional[str]:
    """The evidence, when all that the thread wrote went to log files whose lines in the window
    are a heartbeat (progress/log_lines.py), else None."""
    beats = heartbeat_fds(c.proc.log_lines.values())
    fds = _output_fds(c.t) if beats and c.t.output_targets else None
    if not fds or not fds <= beats.keys():
        return None
    return "; ".join(beats[fd].text for fd in sorted(fds))


def _log_news(c: ThreadContext) -> List[str]:
    """What the log lines the thread wrote say that is new (progress/log_lines.py)."""
    news = news_by_fd(c.proc.log_lines.values())
    fds = _output_fds(c.t) if news else None
    return [f"its log lines say something new: {news[fd].text}" for fd in sorted(fds or ())
            if fd in news and not news[fd].heartbeat]


# With times, the wait the thread ends in must have lasted this long, and half the window
ENDING_WAIT_MIN_S = 1.0


def ends_in_a_wait(c: ThreadContext) -> bool:
    """The recording ends with the thread inside a call without a time limit: the end decides
    (issue 32: the call it was in when the log was cut; issue 44 item 6: a client that wrote
    its start-up and then waits for a reply that never comes is blocked, whatever it wrote
    before). Without times, or where nothing in the recording came after the call began (a
    log that ends in it), how long it has been there cannot be told; otherwise the wait must
    fill half the window and ``ENDING_WAIT_MIN_S``: all its output came before it."""
    if c.t.ongoing is None or c.wait is None or c.wait.timeout is not None \
            or c.wait.call not in BLOCKING_CALLS:
        return False
    waited = c.rec.end - c.t.ongoing.ts
    if not c.timed or waited <= 0.0:   # nothing came after it: as long as is unknown
        return True
    if on_a_device(c.wait) and others_went_on(c):       # issue 44 item 7: threads/device_calls
        return waited >= DEVICE_WAIT_MIN_S
    return waited >= max(ENDING_WAIT_MIN_S, 0.5 * c.rec.window)


def rule_wrote_output(c: ThreadContext) -> Optional[ThreadVerdict]:
    t = c.t
    if t.output_bytes <= 0 or t.output_stale or heartbeat_output(c) or ends_in_a_wait(c):
        return None
    where = ", ".join(k for k, _ in t.output_targets.most_common(3))
    ev_ = [f"wrote {_bytes(t.output_bytes)} in {t.output_writes} writes "
           f"({c.rate(t.output_writes)}) to {where}"] + _log_news(c)
    return ThreadVerdict(PROGRESSING, "wrote-output", ev_)


def socket_traffic(p: ProcessStats, window: float) -> Tuple[int, int, List[FdTraffic]]:
    """(bytes sent on its TCP sockets, of which output, the keep-alive sockets) from the
    kernel's TCP counters (the proc backend's SocketCounters; traffic.keepalive judges)."""
    total = output = 0
    beats: List[FdTraffic] = []
    for tr in p.tcp.values():
        sent = tr.delta("bytes_sent")
        total += sent
        traffic = counters_traffic(tr.fd, tr.target, tr.delta("segs_out"), sent,
                                   tr.delta("segs_in"), tr.delta("bytes_received"))
        if sent and keepalive(traffic, window):
            beats.append(traffic)
        else:
            output += sent
    return total, output, beats


@dataclass(frozen=True)
class ProcessOutput:
    """What a process surely wrote for the outside world, by channel (``process_output``)."""
    stream: int          # /proc/PID/io wchar beyond wake-up writes, less TCP and heartbeat lines
    sockets: int         # TCP bytes sent that are not keep-alives
    files: int           # regular files opened for writing whose position advanced

    @property
    def total(self) -> int:
        return self.stream + self.sockets + self.files


def process_output(p: ProcessStats, window: float = 0.0) -> ProcessOutput:
    """Bytes a process surely wrote for the outside world, from /proc and kernel counters.

    /proc/PID/io counts every write(2): eventfd and wake-up writes move at most 8 bytes each, so
    what exceeds that per write syscall is real output (io_class.proc_output_bytes), less what
    went to TCP sockets (which the sockets' own counters judge: a keep-alive is not output).
    Bytes sent on TCP sockets that are not keep-alives count, and so do regular files opened for
    writing whose position advanced between two fd-table reads.
    """
    stream = files = 0
    sent, socket_output, _ = socket_traffic(p, window)
    beats = heartbeat_fds(p.log_lines.values())
    beat_bytes = sum(p.log_lines[fd].appended for fd in beats)
    a, b = p.first_io, p.last_io
    if a is not None and b is not None:
        stream = max(0, proc_output_bytes(b.wchar - a.wchar, b.syscw - a.syscw) - sent
                     - beat_bytes)
    if p.first_info is not None and p.info is not None:
        before = {f.fd: f for f in p.first_info.fds if f.kind == "file" and "w" in (f.mode or "")
                  and f.fd not in beats}
        for f in p.info.fds:
            old = before.get(f.fd)
            if old is not None and old.target == f.target and f.pos is not None \
                    and old.pos is not None and f.pos > old.pos:
                files += f.pos - old.pos
    return ProcessOutput(stream, socket_output, files)


def process_output_bytes(p: ProcessStats, window: float = 0.0) -> int:
    """All that ``process_output`` counts, in bytes."""
    return process_output(p, window).total


def _ran(c: ThreadContext) -> bool:
    """The thread ran during the window (CPU, or /proc saw it scheduled in twice)."""
    a, b = c.t.first_sample, c.t.last_sample
    return (c.cpu is not None and c.cpu.fraction > 0.01) or (
        a is not None and b is not None and a.run_count is not None
        and b.run_count is not None and b.run_count - a.run_count >= 2)


def _timers_wrote(c: ThreadContext, stream: int) -> bool:
    """The process's stream output (pipes, terminals: /proc io totals) could all be reports of
    its timers (progress/reports.timer_reports): the wake-ups, from /proc samples, of its
    threads that sit in a timed wait no more than ``MAX_HZ`` a second, library helpers aside
    (their pollers wake often and write nothing)."""
    a, b = c.proc.first_io, c.proc.last_io
    if a is None or b is None:
        return False
    writes, wakeups = b.syscw - a.syscw, 0
    for t in c.rec.threads_of(c.proc.pid):
        found = sampled_timer(t, c.fds) if not helper_kind(t.comm) else None
        woke = max(0, found[1]) if found is not None else 0
        wakeups += woke if woke <= MAX_HZ * c.rec.window else 0
        if timer_reports(stream, writes, wakeups):
            return True
    return False


def rule_periodic_report(c: ThreadContext) -> Optional[ThreadVerdict]:
    """Output that a timer makes: a small report after each timed wake-up, to a pipe or a
    terminal whose content is not read (progress/reports.py): the thread ticks."""
    t = c.t
    if t.output_stale or heartbeat_output(c) is not None:
        return None
    text = periodic_report(t, timed_wakeups(t), c.rec.window,
                           c.cpu.fraction if c.cpu is not None else None)
    if text is None:
        return None
    return ThreadVerdict(BUSY, REPORT_RULE, [text], cpu=c.cpu)


def rule_process_output(c: ThreadContext) -> Optional[ThreadVerdict]:
    """Without per-thread syscalls (proc backend only), credit the process's output, and the
    connections it took on its listening ports (served: every backend sees serving), to the
    threads that ran while it happened."""
    if c.rec.has_syscalls or not _ran(c):
        return None
    out = process_output(c.proc, c.rec.window)
    n = out.total
    if out.sockets or out.files or (out.stream and not _timers_wrote(c, out.stream)):
        return ThreadVerdict(PROGRESSING, "process-output",
                             [f"the process wrote {_bytes(n)} beyond wake-up writes (/proc io, "
                              "fd positions) while this thread ran"], cpu=c.cpu)
    served = c.proc.served
    if sum(served.values()) > 0:
        ports = ", ".join(f"{k} on port {p}" for p, k in served.most_common(3))
        return ThreadVerdict(PROGRESSING, "process-served",
                             [f"the process took connections on the ports it listens on "
                              f"({ports}; sock_diag) while this thread ran"], cpu=c.cpu)
    return None


def _stalled_since_input(c: ThreadContext) -> bool:
    calls = c.proc.driver_calls.get(c.t.tid)
    return stalled_sync(calls) and calls is not None and calls.in_sync_since is not None \
        and c.t.input_ts is not None and c.t.input_ts <= calls.in_sync_since


def _old_news(c: ThreadContext, at: Optional[int], ts: Optional[float]) -> bool:
    """What the thread did at its call ``at`` (connections, input) lies well before the end
    and nothing it wrote since is news (io_class.is_old_news): a start-up's, not its doing
    now."""
    t, rec = c.t, c.rec
    return (t.output_bytes == 0 or t.output_stale) and is_old_news(
        t.ncalls, at, ts, rec.window, rec.end, rec.capabilities.get("timestamps", True))


def _connections_are_old_news(c: ThreadContext) -> bool:
    return _old_news(c, c.t.connection_at, c.t.connection_ts)


def rule_served_connections(c: ThreadContext) -> Optional[ThreadVerdict]:
    if c.t.accepts <= 0 or _connections_are_old_news(c):
        return None
    return ThreadVerdict(PROGRESSING, "served-connections",
                         [f"accepted {c.t.accepts} connections"])


def rule_made_connections(c: ThreadContext) -> Optional[ThreadVerdict]:
    t = c.t
    if t.connects <= 0 or _connections_are_old_news(c) or ends_in_a_wait(c):
        return None
    where = ", ".join(k for k, _ in t.connect_targets.most_common(3))
    return ThreadVerdict(PROGRESSING, "made-connections",
                         [f"made {t.connects} connections ({c.rate(t.connects)}) to {where}"])


def rule_loads_memory(c: ThreadContext) -> Optional[ThreadVerdict]:
    """Work that writes nothing but brings memory in: a loader faulting in a mapped file, a
    thread filling buffers (progress/memory.py)."""
    text = loading(c.proc, c.t.tid, c.rec.window)
    if text is None:
        return None
    return ThreadVerdict(PROGRESSING, "loads-memory", [text], cpu=c.cpu)


def rule_code_moves(c: ThreadContext) -> Optional[ThreadVerdict]:
    """A thread on a CPU whose Python frames move through code computes, however little it
    writes (progress/stacks.py): a capture walking layers, a warm-up, a compile."""
    if c.cpu is None or c.cpu.demand < SPIN_CPU:
        return None
    text = code_moves(c.proc.stack_samples.get(c.t.tid))
    if text is None:
        return None
    return ThreadVerdict(PROGRESSING, "code-moves", [text, c.cpu.describe(c.rec.window)],
                         cpu=c.cpu)


FILE_READS_MIN = 3         # reads of files that returned data, for rule_reads_files


def rule_reads_files(c: ThreadContext) -> Optional[ThreadVerdict]:
    """A thread whose reads of files keep returning data loads them (weights from network
    storage, a data set): it progresses, however slowly, by the measure of those reads; unless
    that input is old news (io_class.is_old_news), it has been inside a GPU sync since, or the
    log ends with it inside a call without a time limit (``ends_in_a_wait``)."""
    t = c.t
    if t.file_reads < FILE_READS_MIN or t.input_bytes <= 0 \
            or _old_news(c, t.input_at, t.input_ts) or _stalled_since_input(c) \
            or ends_in_a_wait(c):
        return None
    return ThreadVerdict(PROGRESSING, "reads-files",
                         [f"read files: {t.file_reads} reads ({c.rate(t.file_reads)}) that "
                          f"returned data, {_bytes(t.input_bytes)} of input in all"], cpu=c.cpu)


def rule_varied_work(c: ThreadContext) -> Optional[ThreadVerdict]:
    """A thread that reads input and runs varied syscalls works, unless its input is old news
    or it has been inside a GPU sync since after its last input (progress/gpu.stalled_sync):
    what it read was before the wait it is in now."""
    t = c.t
    work = [n for n in t.syscalls if n not in WAIT_NAMES]
    if len(work) < 4 or (t.input_bytes == 0 and t.file_reads == 0) \
            or _old_news(c, t.input_at, t.input_ts) or _stalled_since_input(c) \
            or ends_in_a_wait(c):
        return None
    if c.cpu is not None and c.cpu.demand < 0.01:
        return None
    return ThreadVerdict(PROGRESSING, "varied-work",
                         [f"{len(work)} kinds of syscalls ({', '.join(sorted(work)[:6])}), "
                          f"read {_bytes(t.input_bytes)}"], cpu=c.cpu)
