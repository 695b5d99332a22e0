"""The analyzer: events in, ``Report`` out.

Contract: ``Analyzer`` is fed events one at a time (``feed``), from a trace file (``analyze_trace``)
or from the live recording's queue (session.py): the same code for replay and live. ``report()``
runs the thread, process and tree rules over what was accumulated and builds the report with
counters and the notes on what could not be judged. Memory is bounded by threads, not events.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional

from .. import events as ev
from ..report import ProcessReport, Report, ThreadReport
from ..tracefile.format import TraceReader
from .accumulate import Accumulator, Recording, ThreadStats
from .gpu_rules import GpuAccumulator, GpuStats, gpu_findings
from .process_rules import ProcessVerdict, judge_process
from .thread_rules import NV_RM_CONTROL, ThreadVerdict, current_call_text, judge_thread
from .collective import apply_stragglers, find_stragglers, straggler_summary
from .tree_rules import RootCause, TreeVerdict, judge_tree
from .verdict import BUSY
from .waitgraph import WaitFacts, build_wait_graph


class StackTable:
    """Python stacks (``PyStack`` events) by (pid, tid), and the ones that could not be taken."""

    def __init__(self) -> None:
        self.by_thread: Dict[tuple, List[str]] = {}
        self.failures: List[ev.PyStack] = []

    def feed(self, e: ev.PyStack) -> None:
        if e.error:
            self.failures.append(e)
        else:
            self.by_thread[(e.pid, e.tid)] = list(e.frames)

    def notes(self) -> List[str]:
        from ..record.pystacks import failure_notes
        return failure_notes(self.failures)


class Analyzer:
    def __init__(self, *, start: Optional[float] = None, backends: Optional[List[str]] = None,
                 capabilities: Optional[Dict[str, bool]] = None,
                 processes: Optional[List[ev.ProcessInfo]] = None,
                 roots: Optional[List[int]] = None, source: str = "attach") -> None:
        self.acc = Accumulator(start=start, backends=backends, capabilities=capabilities,
                               processes=processes, roots=roots)
        self.gpu = GpuAccumulator()
        self.stacks = StackTable()
        self.facts = WaitFacts()      # what the end-of-recording probes found (wait graph)
        self.source = source

    def feed(self, event: ev.Event) -> None:
        if type(event) is ev.GpuSample:
            self.gpu.feed(event)
        elif type(event) is ev.PyStack:
            self.stacks.feed(event)  # type: ignore[arg-type]
        elif type(event) in _FACTS:
            self.facts.feed(event)
        else:
            self.acc.feed(event)

    def feed_all(self, events: Iterable[ev.Event]) -> None:
        route = {ev.GpuSample: self.gpu.feed, ev.PyStack: self.stacks.feed}
        route.update({cls: self.facts.feed for cls in _FACTS})
        self.acc.feed_many(events, route)     # type: ignore[arg-type]

    def report(self, *, end: Optional[float] = None, trace_path: Optional[str] = None,
               truncated: bool = False, extra_notes: Iterable[str] = ()) -> Report:
        rec = self.acc.finish(end, truncated=truncated)
        return build_report(rec, source=self.source, trace_path=trace_path,
                            extra_notes=list(extra_notes), gpus=self.gpu.gpus,
                            stacks=self.stacks, facts=self.facts)


_FACTS = (ev.FutexOwner, ev.SocketPeers)


def analyzer_for(reader: TraceReader) -> Analyzer:
    """An Analyzer set up from a trace's header (start, backends, capabilities, processes)."""
    h = reader.info.header
    opts = h.get("options") or {}
    return Analyzer(start=h.get("start"), backends=h.get("backends"),
                    capabilities=opts.get("capabilities"), processes=reader.info.processes,
                    roots=h.get("targets"), source=h.get("source", "attach"))


def analyze_trace(path: str) -> Report:
    """Read a trace file (streaming) and analyze it. Raises trace.TraceError on bad files."""
    reader = TraceReader(path)
    an = analyzer_for(reader)
    an.feed_all(reader.events())
    info = reader.info
    end = info.end.ts if info.end is not None else None
    opts = info.header.get("options") or {}
    notes = list(opts.get("errors", [])) + list(opts.get("notes", []))
    if info.bad_lines:
        notes.append(f"{info.bad_lines} corrupt lines in the trace were skipped")
    return an.report(end=end, trace_path=path, truncated=info.truncated, extra_notes=notes)


# --------------------------------------------------------------------------- building
def _gpu_ioctls(t: ThreadStats) -> Dict[str, int]:
    """ioctls on /dev/nvidia* fds by decoded name: {"RM_CONTROL on /dev/nvidiactl": 8, ...}."""
    from ..gpu.nvidia import describe_ioctl
    out: Dict[str, int] = {}
    for (kind, req, name), n in t.ioctls.items():
        d = describe_ioctl(kind, req, name or None)
        if d is not None:
            out[str(d)] = out.get(str(d), 0) + n
    return out


def thread_counters(t: ThreadStats, v: ThreadVerdict, rec: Recording) -> Dict[str, float]:
    w = rec.window if rec.capabilities.get("timestamps", True) else 0.0
    n = t.total_syscalls
    out: Dict[str, float] = {}
    if rec.has_syscalls:
        gpu = _gpu_ioctls(t)
        out.update(syscalls=n, eventfd_writes=t.eventfd_writes, futex_waits=t.futex_waits,
                   gpu_ioctls=sum(gpu.values()), bytes_written=t.output_bytes,
                   poll_timeouts=t.poll_timeouts)
        # Per decoded name ("gpu_ioctls[RM_CONTROL on /dev/nvidiactl]"): summed per process too.
        out.update({f"gpu_ioctls[{k}]": v for k, v in sorted(gpu.items())})
        if w > 0:
            out["syscalls_per_s"] = round(n / w, 2)
    if v.cpu is not None:
        out["cpu_pct"] = round(v.cpu.fraction * 100, 1)
    return out


def _thread_state(t: ThreadStats, v: ThreadVerdict) -> str:
    if t.exited_at is not None:
        return "exited"
    if t.last_sample is not None:
        return t.last_sample.state
    if t.ongoing is not None:
        return "S"
    if v.cpu is not None and v.cpu.fraction > 0.5:
        return "R"
    return "?"


def _process_counters(threads: List[ThreadReport]) -> Dict[str, float]:
    out: Dict[str, float] = {}
    for t in threads:
        for k, val in t.counters.items():
            out[k] = round(out.get(k, 0) + val, 2)
    return out


def _notes(rec: Recording) -> List[str]:
    caps = rec.capabilities
    notes = []
    if caps.get("timestamps") is False:
        notes.append("the log has no timestamps: rates, periodic loops and time on CPU could "
                     "not be judged")
    if caps.get("durations") is False:
        notes.append("the log has no syscall durations (-T): time on CPU could not be inferred")
    if caps.get("fd_paths") is False:
        small = sum(t.unjudged_writes for t in rec.threads.values())
        notes.append("the log has no fd paths (-y): output was judged only from writes larger "
                     f"than 8 bytes; {small} small writes could be eventfd or wake-up writes")
    if caps.get("pids") is False:
        notes.append("the log has no pid column: all lines were taken as one thread")
    if rec.lost:
        notes.append(f"{rec.lost} events were lost or could not be parsed "
                     f"({'; '.join(rec.lost_reasons)}): evidence may be incomplete")
    if rec.truncated:
        notes.append("the trace was cut short; it was analyzed up to its last complete event")
    if not rec.has_syscalls and rec.has_samples:
        notes.append("no syscall backend: verdicts rest on /proc samples alone")
    return notes


def build_report(rec: Recording, *, source: str = "attach", trace_path: Optional[str] = None,
                 extra_notes: Optional[List[str]] = None,
                 gpus: Optional[Dict[int, GpuStats]] = None,
                 stacks: Optional[StackTable] = None,
                 facts: Optional[WaitFacts] = None) -> Report:
    pvs: Dict[int, ProcessVerdict] = {}
    thread_reports: Dict[int, List[ThreadReport]] = {}
    for pid in sorted(rec.processes):
        p = rec.processes[pid]
        tvs: Dict[int, ThreadVerdict] = {}
        reports: List[ThreadReport] = []
        for t in rec.threads_of(pid):
            v = judge_thread(t, rec, p)
            tvs[t.tid] = v
            reports.append(ThreadReport(
                tid=t.tid, name=t.comm, state=_thread_state(t, v), verdict=v.verdict,
                rule=v.rule, evidence=v.evidence, helper=v.helper, parked=v.parked,
                current=current_call_text(t), counters=thread_counters(t, v, rec),
                stack=stacks.by_thread.get((pid, t.tid), []) if stacks else []))
        pvs[pid] = judge_process(pid, rec, tvs, facts)
        thread_reports[pid] = reports
    stragglers = find_stragglers(rec, pvs, gpus or {})   # NCCL: who stopped joining
    apply_stragglers(stragglers, pvs)
    graph = build_wait_graph(rec, pvs, facts)   # before judge_tree: it proves the deadlock
    tree = judge_tree(pvs, rec, graph)
    if stragglers and tree.verdict == BUSY:
        st = stragglers[0]
        tree = TreeVerdict(BUSY, "collective-straggler",
                           RootCause(st.pid, pvs[st.pid].key_tid, straggler_summary(st, pvs)))
    gpu_notes = gpu_findings(gpus or {}, {pid: pv.verdict for pid, pv in pvs.items()},
                             rec.window)
    processes = []
    for pid, pv in pvs.items():
        threads = thread_reports[pid]
        processes.append(ProcessReport(
            pid=pid, ppid=pv.ppid, role=pv.role.label, comm=pv.comm, cmdline=pv.cmdline,
            verdict=pv.verdict, rule=pv.rule, evidence=pv.evidence,
            waits_on=[{"tid": e.tid, "kind": e.kind, "what": e.what, "pids": e.pids}
                      for e in pv.waits_on],
            threads=threads, exit_status=pv.exit_status, counters=_process_counters(threads),
            pid_unknown=pv.pid_unknown))
    return Report(
        verdict=tree.verdict, rule=tree.rule,
        root_cause={"pid": tree.root_cause.pid, "tid": tree.root_cause.tid,
                    "summary": tree.root_cause.summary},
        processes=processes,
        window={"start": rec.start, "end": rec.end, "duration": round(rec.end - rec.start, 3)},
        backends=rec.backends, source=source, trace_path=trace_path,
        notes=gpu_notes + _notes(rec) + (stacks.notes() if stacks else [])
        + [e for e in tree.evidence if e.startswith("some threads")]
        + list(extra_notes or []), lost=rec.lost,
        truncated=rec.truncated, wait_graph=graph.to_json())


__all__ = ["Analyzer", "analyze_trace", "build_report", "NV_RM_CONTROL"]
