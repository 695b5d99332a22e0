"""``hangtrace export FILE --format perfetto``: a timeline in Chrome trace event JSON.

Perfetto (ui.perfetto.dev) and chrome://tracing open the file. Contract:
- One JSON object ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``.
  Times are microseconds since the epoch (``ts``, ``dur``: floats), pids and tids as in the
  trace; one track per thread, grouped by process (``process_name``, ``thread_name``,
  ``process_sort_index`` metadata events, "M").
- Every syscall is a complete slice ("X", cat ``syscall``), futex waits cat ``futex``, ioctls
  on NVIDIA fds and polls on them cat ``gpu`` (named by the decoded ioctl). Calls still blocked
  when the recording ended ("ongoing") run to the end of the window. Slices of one thread never
  overlap: a slice that would start inside the previous one starts at its end (timestamps of
  one thread may overlap by clock rounding).
- Instant events ("i", thread scope): eventfd writes, output writes (bytes and target), thread
  and process exits, signals; lost events are global instants.
- Analysis, from the same streaming pass through the analyzer that ``analyze`` uses: per
  process a slice over the whole window named by its verdict on an extra track "hangtrace
  verdict" (tid = VERDICT_TID_BASE + pid: above any real tid), with rule, evidence and waits
  in ``args``; per thread an instant at the window's end with its verdict, evidence and Python
  stack; one global instant with the tree verdict, root cause and notes.
- Streamed: the trace is read once and events are written as they come; memory is bounded by
  threads (per-thread last slice end, at most one ongoing call per thread), not events.
Returns the number of trace events written.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Set, TextIO, Tuple

from ... import events as ev
from ...analysis.accumulate.io_class import IoClass, write_class
from ...analysis.analyzer import analyzer_for
from ...gpu.nvidia import describe_ioctl
from ...report import Report
from ...tracefile.format import TraceReader

# pid_max is at most 2**22 on Linux: no real tid reaches this.
VERDICT_TID_BASE = 1 << 22
_GPU_KINDS = ("nvidia", "nvidia-uvm", "nvidiactl")
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode

Key = Tuple[int, int]


def _us(t: float) -> float:
    return round(t * 1e6, 3)


class _Out:
    """Writes the traceEvents array one event at a time."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.count = 0
        out.write('{"displayTimeUnit":"ms","traceEvents":[\n')

    def emit(self, event: Dict[str, Any]) -> None:
        self.out.write((",\n" if self.count else "") + _ENCODE(event))
        self.count += 1

    def close(self, other: Dict[str, Any]) -> None:
        self.out.write('\n],"otherData":' + _ENCODE(other) + "}\n")


class _Timeline:
    def __init__(self, out: _Out) -> None:
        self.out = out
        self.last_end: Dict[Key, float] = {}
        self.ongoing: Dict[Key, ev.Syscall] = {}
        self.seen: Set[Key] = set()
        self.max_ts = 0.0

    def slice(self, e: ev.Syscall, end_s: Optional[float] = None) -> None:
        key = (e.pid, e.tid)
        start = _us(e.ts)
        stop = _us(end_s) if end_s is not None else start + (e.dur or 0.0) * 1e6
        prev = self.last_end.get(key)
        if prev is not None and start < prev:
            start = prev
        dur = round(max(0.0, stop - start), 3)
        self.last_end[key] = start + dur
        name, cat, args = _describe(e)
        self.out.emit({"ph": "X", "name": name, "cat": cat, "ts": start, "dur": dur,
                       "pid": e.pid, "tid": e.tid, "args": args})

    def instant(self, name: str, cat: str, ts: float, pid: int, tid: int,
                args: Optional[Dict[str, Any]] = None, scope: str = "t") -> None:
        d: Dict[str, Any] = {"ph": "i", "name": name, "cat": cat, "ts": _us(ts), "s": scope,
                             "pid": pid, "tid": tid}
        if args:
            d["args"] = args
        self.out.emit(d)

    def feed(self, e: ev.Event, acc_internal: Any) -> None:
        if e.ts and e.ts > self.max_ts:
            self.max_ts = e.ts
        if isinstance(e, ev.Syscall):
            self.seen.add((e.pid, e.tid))
            if e.ongoing:
                self.ongoing[(e.pid, e.tid)] = e     # written at the end, to the window's end
                return
            self.slice(e)
            if type(e) is ev.WriteCall and e.err is None:
                self._write(e, acc_internal)  # type: ignore[arg-type]
            if e.dur is not None and e.ts + e.dur > self.max_ts:
                self.max_ts = e.ts + e.dur
        elif type(e) is ev.ThreadExit:
            self.instant("thread exit", "exit", e.ts, e.pid, e.tid)  # type: ignore[attr-defined]
        elif type(e) is ev.ProcessExit:
            what = f"exit status {e.status}" if e.status is not None else f"killed by {e.signal}"  # type: ignore[attr-defined]
            self.instant(f"process exit: {what}", "exit", e.ts, e.pid, e.pid)  # type: ignore[attr-defined]
        elif type(e) is ev.SignalDelivered:
            self.instant(f"signal {e.signal}", "signal", e.ts, e.pid, e.tid,  # type: ignore[attr-defined]
                         {"sender": e.sender})  # type: ignore[attr-defined]
        elif type(e) is ev.Lost:
            self.instant(f"{e.count} events lost", "lost", e.ts, 0, 0,  # type: ignore[attr-defined]
                         {"reason": e.reason}, scope="g")  # type: ignore[attr-defined]

    def _write(self, e: ev.WriteCall, is_internal: Any) -> None:
        if e.fd_kind == "eventfd":
            self.instant("eventfd write", "eventfd", e.ts, e.pid, e.tid, {"fd": e.fd})
        elif write_class(e.fd_kind, e.nbytes, lambda: is_internal(e.pid, e.fd_target)) in (
                IoClass.OUTPUT, IoClass.SOCKET):       # the analyzer's own rule (io_class)
            self.instant(f"output {e.nbytes} B", "output", e.ts, e.pid, e.tid,
                         {"fd": e.fd, "target": e.fd_target, "bytes": e.nbytes})

    def finish_ongoing(self, end: float) -> None:
        for e in self.ongoing.values():
            self.slice(e, end_s=max(end, e.ts + (e.dur or 0.0)))
        self.ongoing.clear()


def _describe(e: ev.Syscall) -> Tuple[str, str, Dict[str, Any]]:
    args: Dict[str, Any] = {"args": e.args}
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


def _metadata(out: _Out, report: Report, seen: Set[Key], names: Dict[Key, str]) -> None:
    for i, p in enumerate(report.processes):
        label = " ".join(p.cmdline)[:120] or p.comm
        role = f"{p.role}: " if p.role != "other" else ""
        out.emit({"ph": "M", "name": "process_name", "pid": p.pid, "tid": p.pid,
                  "args": {"name": f"{role}{label}"}})
        out.emit({"ph": "M", "name": "process_sort_index", "pid": p.pid, "tid": p.pid,
                  "args": {"sort_index": i}})
        out.emit({"ph": "M", "name": "thread_name", "pid": p.pid,
                  "tid": VERDICT_TID_BASE + p.pid, "args": {"name": "hangtrace verdict"}})
        for t in p.threads:
            names[(p.pid, t.tid)] = t.name or names.get((p.pid, t.tid), "")
    for (pid, tid) in sorted(seen | set(names)):
        out.emit({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                  "args": {"name": names.get((pid, tid)) or f"thread {tid}"}})


def _annotations(tl: _Timeline, report: Report) -> None:
    start, end = report.window["start"], report.window["end"]
    for p in report.processes:
        tl.out.emit({"ph": "X", "name": f"verdict: {p.verdict}", "cat": "verdict",
                     "ts": _us(start), "dur": round(_us(end) - _us(start), 3), "pid": p.pid,
                     "tid": VERDICT_TID_BASE + p.pid,
                     "args": {"verdict": p.verdict, "rule": p.rule, "role": p.role,
                              "evidence": p.evidence, "waits_on": p.waits_on,
                              "exit_status": p.exit_status}})
        for t in p.threads:
            args: Dict[str, Any] = {"verdict": t.verdict, "rule": t.rule,
                                    "evidence": t.evidence, "state": t.state}
            if t.stack:
                args["python_stack"] = t.stack
            if t.helper:
                args["helper"] = t.helper
            tl.instant(f"verdict: {t.verdict}", "verdict", end, p.pid, t.tid, args)
    tl.instant(f"tree verdict: {report.verdict}", "verdict", end, 0, 0,
               {"rule": report.rule, "root_cause": report.root_cause, "notes": report.notes},
               scope="g")


def export(trace_path: str, out: TextIO) -> int:
    reader = TraceReader(trace_path)
    h = reader.info.header
    analyzer = analyzer_for(reader)
    o = _Out(out)
    tl = _Timeline(o)
    feed, is_internal = analyzer.feed, analyzer.is_internal
    names: Dict[Key, str] = {}
    for p in reader.info.processes:
        for tid, comm in p.threads.items():
            names[(p.pid, tid)] = comm
    for e in reader.events():
        feed(e)
        tl.feed(e, is_internal)
    info = reader.info
    end = info.end.ts if info.end is not None else max(tl.max_ts, float(h.get("start") or 0))
    tl.finish_ongoing(end)
    notes: List[str] = []
    if info.bad_lines:
        notes.append(f"{info.bad_lines} corrupt lines in the trace were skipped")
    report = analyzer.report(end=end, trace_path=trace_path, truncated=info.truncated,
                             extra_notes=notes)
    _metadata(o, report, tl.seen, names)
    _annotations(tl, report)
    o.close({"source": "hangtrace", "trace": trace_path, "start_s": h.get("start"),
             "end_s": end, "backends": h.get("backends"), "host": h.get("host"),
             "verdict": report.verdict, "rule": report.rule, "truncated": info.truncated})
    return o.count
