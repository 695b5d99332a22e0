"""The timeline of a saved trace, whatever the file format: what the Perfetto exports show
(perfetto.py writes it as Chrome trace event JSON, perfetto_proto.py as Perfetto's protobuf).

Contract:
- ``walk(trace_path, sink, progress=None) -> Report`` reads the trace once (its end first:
  window.py), feeding the same analyzer ``analyze`` uses, and calls the sink (``Sink`` below;
  times in microseconds since the epoch) as it goes; memory is bounded by threads, not events.
- What it draws (tracks, slices, instants, counters: rates.py, flows): ``walk``'s docstring.
- Times: every time drawn is clamped to the recording window first (window.py), and the
  counters' buckets widen for a long window: one timestamp at 1 (1970) or at 2**63 s is drawn
  at the window's edge, never a bucket per second since 1970. The analyzer is fed the events
  as they are.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Protocol, Set, Tuple

from ... import events as ev
from ...analysis.accumulate.io_class import IoClass, write_class
from ...analysis.accumulate.stats import syscall_backends
from ...load.trace import analyzer_for, trace_notes
from ...gpu.nvidia import describe_ioctl
from ...report import Report
from ...tracefile.format import TraceReader, trace_end
from ..fold import cut
from .rates import GPU_PID, Rates
from .window import Window

__all__ = ["walk", "Sink", "VERDICT_TID_BASE", "TREE_TID", "GPU_PID"]

VERDICT_TID_BASE = 1 << 22          # pid_max is at most 2**22: no real tid reaches this
TREE_TID = GPU_PID + 1              # the tree verdict's track in the "hangtrace" process
_GPU_KINDS = ("nvidia", "nvidia-uvm", "nvidiactl")
_EDGE_US = 1.0                      # a thread's verdict slice reaches 1 µs past its slices

Key = Tuple[int, int]
Args = Dict[str, Any]


class Sink(Protocol):
    def process(self, pid: int, name: str, sort_index: int) -> None: ...
    def thread(self, pid: int, tid: int, name: str) -> None: ...
    def slice(self, pid: int, tid: int, ts: float, dur: float, name: str, cat: str,
              args: Args) -> None: ...
    def instant(self, pid: int, tid: int, ts: float, name: str, cat: str, args: Args,
                scope: str = "t") -> None: ...
    def counter(self, pid: int, name: str, ts: float, value: float) -> None: ...
    def flow(self, flow_id: int, name: str, src: Tuple[int, int, float],
             dst: Tuple[int, int, float], args: Args) -> None: ...


def _us(t: float) -> float:
    return round(t * 1e6, 3)


class _Tracks:
    """Slices of each thread track as they are written: never overlapping, their extent."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.first: Dict[Key, float] = {}
        self.last_end: Dict[Key, float] = {}
        self.ongoing: Dict[Key, ev.Syscall] = {}
        self.max_ts = 0.0

    def slice(self, e: ev.Syscall, end_s: Optional[float] = None) -> None:
        key = (e.pid, e.tid)
        start = _us(e.ts)
        stop = _us(end_s) if end_s is not None else start + (e.dur or 0.0) * 1e6
        prev = self.last_end.get(key)
        if prev is not None and start < prev:
            start = prev
        dur = round(max(0.0, stop - start), 3)
        self.first.setdefault(key, start)
        self.last_end[key] = start + dur
        name, cat, args = _describe(e)
        self.sink.slice(e.pid, e.tid, start, dur, name, cat, args)

    def feed(self, e: ev.Event, is_internal: Callable[[int, Optional[str]], bool]) -> None:
        if e.ts and e.ts > self.max_ts:
            self.max_ts = e.ts
        if isinstance(e, ev.Syscall):
            if e.ongoing:
                self.ongoing[(e.pid, e.tid)] = e     # written at the end, to the window's end
                return
            self.slice(e)
            if type(e) is ev.WriteCall and e.err is None:
                self._write(e, is_internal)  # type: ignore[arg-type]
            if e.dur is not None and e.ts + e.dur > self.max_ts:
                self.max_ts = e.ts + e.dur
        elif type(e) is ev.ThreadExit:
            self.sink.instant(e.pid, e.tid, _us(e.ts), "thread exit", "exit", {})  # type: ignore[attr-defined]
        elif type(e) is ev.ProcessExit:
            what = f"exit status {e.status}" if e.status is not None else f"killed by {e.signal}"  # type: ignore[attr-defined]
            self.sink.instant(e.pid, e.pid, _us(e.ts), f"process exit: {what}", "exit", {})  # type: ignore[attr-defined]
        elif type(e) is ev.SignalDelivered:
            self.sink.instant(e.pid, e.tid, _us(e.ts), f"signal {e.signal}", "signal",  # type: ignore[attr-defined]
                              {"sender": e.sender})  # type: ignore[attr-defined]
        elif type(e) is ev.Lost:
            self.sink.instant(0, 0, _us(e.ts), f"{e.count} events lost", "lost",  # type: ignore[attr-defined]
                              {"reason": e.reason}, scope="g")  # type: ignore[attr-defined]

    def _write(self, e: ev.WriteCall, is_internal: Callable[[int, Optional[str]], bool]) -> None:
        if e.fd_kind == "eventfd":
            self.sink.instant(e.pid, e.tid, _us(e.ts), "eventfd write", "eventfd", {"fd": e.fd})
        elif write_class(e.fd_kind, e.nbytes, lambda: is_internal(e.pid, e.fd_target)) in (
                IoClass.OUTPUT, IoClass.SOCKET):       # the analyzer's own rule (io_class)
            self.sink.instant(e.pid, e.tid, _us(e.ts), f"output {e.nbytes} B", "output",
                              {"fd": e.fd, "target": e.fd_target, "bytes": e.nbytes})

    def finish_ongoing(self, end: float) -> None:
        for e in self.ongoing.values():
            self.slice(e, end_s=max(end, e.ts + (e.dur or 0.0)))
        self.ongoing.clear()


def _describe(e: ev.Syscall) -> Tuple[str, str, Args]:
    args: Args = {"args": e.args}
    if e.ret is not None:
        args["ret"] = e.ret
    if e.err:
        args["err"] = e.err
    if e.fd_target:
        args["fd"] = f"{e.fd} ({e.fd_target})"
    if e.ongoing:
        args["ongoing"] = True
    kind = type(e)
    if kind is ev.FutexCall:
        args["timeout"] = e.timeout  # type: ignore[attr-defined]
        args["addr"] = hex(e.addr)  # type: ignore[attr-defined]
        return f"futex {e.op}", "futex", args  # type: ignore[attr-defined]
    if kind is ev.IoctlCall and e.fd_kind in _GPU_KINDS:
        d = describe_ioctl(e.fd_kind, e.request, e.request_name, e.fd_target)  # type: ignore[attr-defined]
        return (str(d) if d is not None else "ioctl"), "gpu", args
    if kind is ev.PollCall:
        args["timeout"] = e.timeout  # type: ignore[attr-defined]
        if any(k in _GPU_KINDS for k in e.fd_kinds):  # type: ignore[attr-defined]
            return f"{e.name} (GPU fds)", "gpu", args
    return e.name, "syscall", args


def _names(sink: Sink, report: Report, seen: Set[Key], names: Dict[Key, str]) -> None:
    sink.process(GPU_PID, "hangtrace", -1)
    sink.thread(GPU_PID, TREE_TID, "tree verdict")
    for i, p in enumerate(report.processes):
        label = cut(" ".join(p.cmdline), 120) or p.comm
        role = f"{p.role}: " if p.role != "other" else ""
        sink.process(p.pid, f"{role}{label}", i)
        sink.thread(p.pid, VERDICT_TID_BASE + p.pid, "hangtrace verdict")
        for t in p.threads:
            names[(p.pid, t.tid)] = t.name or names.get((p.pid, t.tid), "")
    for (pid, tid) in sorted(seen | set(names)):
        sink.thread(pid, tid, names.get((pid, tid)) or f"thread {tid}")


def _window_us(report: Report, window: Window) -> Tuple[float, float]:
    """The report's window (µs), clamped to the recording's (window.py)."""
    return (_us(window.clamp(report.window["start"])),
            _us(window.clamp(report.window["end"])))


def _verdicts(sink: Sink, tracks: _Tracks, report: Report, window: Window) -> None:
    start, end = _window_us(report, window)
    waits = _waits_by_thread(report)
    for p in report.processes:
        sink.slice(p.pid, VERDICT_TID_BASE + p.pid, start, round(end - start, 3),
                   f"verdict: {p.verdict}", "verdict",
                   {"verdict": p.verdict, "rule": p.rule, "role": p.role, "evidence": p.evidence,
                    "waits_on": p.waits_on, "exit_status": p.exit_status})
        for t in p.threads:
            key = (p.pid, t.tid)
            lo = min(start, tracks.first.get(key, start)) - _EDGE_US
            hi = max(end, tracks.last_end.get(key, end)) + _EDGE_US
            args: Args = {"verdict": t.verdict, "rule": t.rule, "evidence": t.evidence,
                          "state": t.state}
            if t.stack:
                args["python_stack"] = t.stack
            if t.helper:
                args["helper"] = t.helper
            if waits.get(t.tid):
                args["waits_for"] = [e["text"] for e in waits[t.tid]]
            sink.slice(p.pid, t.tid, round(lo, 3), round(hi - lo, 3), f"verdict: {t.verdict}",
                       "verdict", args)
    sink.slice(GPU_PID, TREE_TID, start, round(end - start, 3),
               f"tree verdict: {report.verdict}", "verdict",
               {"rule": report.rule, "root_cause": report.root_cause, "notes": report.notes,
                "not_observed": report.unobserved})


def _waits_by_thread(report: Report) -> Dict[int, List[Dict[str, Any]]]:
    g = report.wait_graph or {}
    nodes = {n["id"]: n for n in g.get("nodes", [])}
    out: Dict[int, List[Dict[str, Any]]] = {}
    for e in g.get("edges", []):
        src = nodes.get(e["src"], {})
        if src.get("kind") == "thread" and src.get("tid") is not None:
            out.setdefault(src["tid"], []).append(e)
    return out


def _flows(sink: Sink, report: Report, window: Window) -> int:
    """One flow per wait-for edge of the report's wait graph from a thread to a thread or a process
    of the report ("waits: KIND", cat ``wait``, its object and text in ``args``), from the waiting
    thread's track at the end of the window to the thread's (or the process's verdict) track just
    after; edges to what is not a track (the GPU, outside the tree) are in the waiting thread's
    verdict ``args`` only."""
    g = report.wait_graph or {}
    start, end = _window_us(report, window)
    if end - start < 2.0:
        return 0
    nodes = {n["id"]: n for n in g.get("nodes", [])}
    pids = {p.pid for p in report.processes}
    tids = {(p.pid, t.tid) for p in report.processes for t in p.threads}
    proof = {(e["src"], e["dst"], e["object"]) for e in (g.get("proof") or {}).get("path", [])}
    n = 0
    for e in g.get("edges", []):
        src, dst = nodes.get(e["src"], {}), nodes.get(e["dst"], {})
        if src.get("kind") != "thread" or (src.get("pid"), src.get("tid")) not in tids:
            continue
        if dst.get("kind") == "thread" and (dst.get("pid"), dst.get("tid")) in tids:
            to = (dst["pid"], dst["tid"])
        elif dst.get("kind") == "process" and dst.get("pid") in pids:
            to = (dst["pid"], VERDICT_TID_BASE + dst["pid"])
        else:
            continue
        n += 1
        sink.flow(n, f"waits: {e['kind']}", (src["pid"], src["tid"], end - 1.0),
                  (to[0], to[1], end - 0.5),
                  {"object": e["object"], "text": e["text"],
                   "proof": (e["src"], e["dst"], e["object"]) in proof})
    return n


def walk(trace_path: str, sink: Sink,
         progress: Optional[Callable[[int], None]] = None) -> Report:
    """The timeline of the trace at ``trace_path`` into ``sink`` (module doc). Tracks: one per
    thread, grouped by process (named by its role and command line); per process a track "hangtrace
    verdict" (tid ``VERDICT_TID_BASE + pid``: above any real tid); a process "hangtrace" (pid
    ``rates.GPU_PID``) with the tree's verdict and the GPU counters. Slices: every syscall (cat
    ``syscall``; futex waits ``futex``; ioctls on NVIDIA fds and polls on them ``gpu``, named by
    the decoded ioctl); calls still blocked when the recording ended run to the end of the window;
    slices of one thread never overlap. Per thread a slice "verdict: V" that contains all of that
    thread's slices (its rule, evidence, Python stack and what it waits on in ``args``); per
    process a slice over the window on its verdict track; one slice "tree verdict: V" with the root
    cause, the notes (the recording's too: the trace header's errors and notes, as ``analyze``
    shows them) and what was not observed. Instants (thread scope): eventfd writes, output writes
    (io_class.write_class: the analyzer's own rule), thread and process exits, signals; lost events
    are global instants. Counters: rates.py (syscalls/s, written B/s, output B/s per process; GPU
    utilization). The window is the header's start to the trace's end, read before its events.
    Flows: ``_flows``."""
    reader = TraceReader(trace_path, progress)
    h = reader.info.header
    window = Window.of_trace(float(h.get("start") or 0), trace_end(trace_path))
    analyzer = analyzer_for(reader)
    tracks = _Tracks(sink)
    rates = Rates(syscall_backends(h.get("backends") or []), analyzer.is_internal,
                  bucket_s=window.bucket_s())
    drawn = window.event
    feed, is_internal = analyzer.feed, analyzer.is_internal
    names: Dict[Key, str] = {(p.pid, tid): comm for p in reader.info.processes
                             for tid, comm in p.threads.items()}
    for i, p in enumerate(reader.info.processes):     # named now; by role at the end
        sink.process(p.pid, cut(" ".join(p.cmdline), 120) or p.comm, i)
        for tid, comm in p.threads.items():
            sink.thread(p.pid, tid, comm or f"thread {tid}")
    counter = sink.counter
    for e in reader.events():
        feed(e)
        d = drawn(e)
        tracks.feed(d, is_internal)
        rates.feed(d)
        rates.flush(counter)
    info = reader.info
    end = info.end.closed_at() if info.end is not None else max(tracks.max_ts, float(h.get("start") or 0))
    tracks.finish_ongoing(window.clamp(end))
    rates.flush(counter, final=True)
    report = analyzer.report(end=end, trace_path=trace_path, truncated=info.truncated,
                             extra_notes=trace_notes(info))
    seen = set(tracks.first) | set(tracks.last_end)
    _names(sink, report, seen, names)
    _verdicts(sink, tracks, report, window)
    _flows(sink, report, window)
    return report
