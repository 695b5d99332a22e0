"""The analysis pipeline that turns an accumulated recording into a ``Report``.

Contract: ``build_report(rec, ...)`` is pure and runs the stages (analysis/__init__.py numbers
them) in this order: 4 threads (threads.thread.judge_thread for every thread); 3 job (roles,
labels, exits, a rank's connected peers, and the collective stragglers, which take NVML and the
thread verdicts); 5 waitgraph, built and settled once: the one model of who waits on whom and
who is stuck; 6 verdicts of processes and the tree, which read the graph and never resolve waits
themselves (merged traces, ``nodes``: the same pipeline over keys); 7 evidence; then the report:
verdicts, counters, the graph as JSON, typed notes rendered as text.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import events as ev
from ..report import ProcessReport, Report, ThreadReport
from .accumulate.accumulator import Recording, ThreadStats
from .job.collective import collective_peers, find_stragglers
from .job.ras import read_ras
from .job.nccl_ras import rank_of_pid
from .threads.observed import unobserved_lines
from .verdicts.observed import explain_unknown, qualify_tree
from .verdicts.merged import qualify_for_unrecorded
from .verdicts.view import VIEW_NOTE, view_lacks
from .verdicts.partial import partial_hangs
from .threads.pools import Pool, find_pools
from .vocab.facts import WaitFacts
from .accumulate.gpu import GpuStats
from .threads.gpu import gpu_findings
from .vocab.nodes import NodeMap, locate, locate_partial, locate_wait, real_id
from .job.ras import localize_ras
from .waitgraph.build import GraphInput, build_wait_graph
from .waitgraph.chain import Chains
from .job.process_facts import process_facts
from .job.ranks import mark_ranks, thread_set_suspects
from .verdicts.process import ProcessVerdict, judge_process
from .job.stack_groups import group_ranks, suspects
from .job.flight_recorder import recorder_for
from .accumulate.stacks import StackTable
from .accumulate.io_class import WAKEUP_MAX_BYTES
from .threads.thread import current_call_text, judge_thread
from .verdicts.tree import judge_tree
from .threads.stacks import apply_stack_facts
from .vocab.verdict import EXITED, IDLE, PROGRESSING, Note, NoteKind, ThreadVerdict
from .progress.still import still_signals


def _gpu_ioctls(t: ThreadStats) -> Dict[str, int]:
    """ioctls on /dev/nvidia* fds by decoded name: {"RM_CONTROL on /dev/nvidiactl": 8, ...}."""
    if not t.ioctls:            # most threads: no import lookup, no dict
        return {}
    from ..gpu.nvidia import describe_ioctl
    out: Dict[str, int] = {}
    for (kind, req, name), n in t.ioctls.items():
        d = describe_ioctl(kind, req, name or None)
        if d is not None:
            out[str(d)] = out.get(str(d), 0) + n
    return out


def window_of(rec: Recording) -> Dict[str, Any]:
    """The recording's window. A log without times says so (``timed`` False: its duration is
    not 0 s but unknown), with the least it lasted where -T durations tell (``at_least``: the
    most time one thread spent inside its calls; ``by_clock``: what the program's own
    clock_gettime/gettimeofday results span, of ``clock``)."""
    out: Dict[str, Any] = {"start": rec.start, "end": rec.end,
                           "duration": round(rec.end - rec.start, 3)}
    if rec.capabilities.get("timestamps", True) is False:
        out["timed"] = False
        if rec.capabilities.get("durations"):
            out["at_least"] = round(max((t.syscall_time for t in rec.threads.values()),
                                        default=0.0), 3)
        if rec.program_clock is not None:      # the program's own clock readings span
            out["by_clock"], out["clock"] = round(rec.program_clock[0], 3), rec.program_clock[1]
    return out


def thread_counters(t: ThreadStats, v: ThreadVerdict, rec: Recording) -> Dict[str, float]:
    w = rec.window if rec.capabilities.get("timestamps", True) else 0.0
    n = t.total_syscalls
    out: Dict[str, float] = {}
    if rec.has_syscalls:
        gpu = _gpu_ioctls(t)
        out = {"syscalls": n, "eventfd_writes": t.eventfd_writes, "futex_waits": t.futex_waits,
               "gpu_ioctls": sum(gpu.values()), "bytes_written": t.written_bytes,
               "output_bytes": t.output_bytes, "poll_timeouts": t.poll_timeouts}
        # Per decoded name ("gpu_ioctls[RM_CONTROL on /dev/nvidiactl]"): summed per process too.
        for k, val in sorted(gpu.items()):
            out[f"gpu_ioctls[{k}]"] = val
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


def input_notes(rec: Recording) -> List[Note]:
    """What the log or the backends could not show (typed notes)."""
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
                     f"than {WAKEUP_MAX_BYTES} bytes; {small} small writes could be eventfd or wake-up writes")
    if caps.get("pids") is False:
        notes.append("the log has no pid column: all lines were taken as one thread")
    lacks = view_lacks(caps)
    if lacks:
        notes.append(VIEW_NOTE.format("; ".join(lacks)))
    if rec.lost:
        notes.append(f"{rec.lost} events were lost or could not be parsed "
                     f"({'; '.join(rec.lost_reasons)}): evidence may be incomplete")
    if rec.truncated:
        notes.append("the trace was cut short; it was analyzed up to its last complete event")
    if not rec.has_syscalls and rec.has_samples:
        notes.append("no syscall backend: verdicts rest on /proc samples alone")
    return [Note(NoteKind.INPUT, n) for n in notes]


def _gpu_of(gpus: Dict[int, GpuStats]) -> Dict[int, int]:
    """{pid: GPU index} of the compute processes NVML listed (a pid on one GPU only)."""
    seen: Dict[int, List[int]] = {}
    for g in gpus.values():
        for pid in g.pids:
            seen.setdefault(pid, []).append(g.gpu)
    return {pid: gs[0] for pid, gs in seen.items() if len(gs) == 1}


def _frames_by_pid(stacks: Optional[StackTable]) -> Dict[int, Dict[int, Any]]:
    """{pid: {tid: Python frames}} of the stacks sampled (one pass: the pools' lookup per
    process had scanned every sampled thread for each process)."""
    out: Dict[int, Dict[int, Any]] = {}
    for (pid, tid), f in (stacks.by_thread.items() if stacks else ()):
        out.setdefault(pid, {})[tid] = f
    return out


def build_report(rec: Recording, *, source: str = "attach", trace_path: Optional[str] = None,
                 extra_notes: Optional[List[str]] = None,
                 gpus: Optional[Dict[int, GpuStats]] = None,
                 stacks: Optional[StackTable] = None,
                 facts: Optional[WaitFacts] = None,
                 ras: Optional[List[ev.NcclRasStatus]] = None,
                 nodes: Optional[NodeMap] = None,
                 unrecorded_nodes: Sequence[Tuple[str, str]] = (),
                 dumps: Sequence[ev.Event] = ()) -> Report:
    gpus = gpus or {}
    rec.gpus = gpus                      # GPU work for the thread rules (progress/gpu.py)
    tvs: Dict[int, Dict[int, ThreadVerdict]] = {}
    pools: Dict[int, List[Pool]] = {}
    for pid in sorted(rec.processes):
        tvs[pid] = {t.tid: judge_thread(t, rec, rec.processes[pid]) for t in rec.threads_of(pid)}
    facts = facts or WaitFacts()
    apply_stack_facts(tvs, rec, facts.stacks)    # issue 24: the GIL, the GPU driver, D state
    frames = _frames_by_pid(stacks)
    for pid in sorted(rec.processes):
        pools[pid] = find_pools(pid, tvs[pid], frames.get(pid, {}))
    job = read_ras(ras or [])
    if job.status is not None and nodes is not None:     # RAS speaks for every node
        job.status = localize_ras(job.status, nodes, rec.processes)
    procs = process_facts(rec, rank_of_pid(job.status) if job.status else None, _gpu_of(gpus),
                          nodes)
    mark_ranks(procs, rec)                   # ranks without RANK: titled or connected siblings
    peers = {pid: collective_peers(rec, pid) for pid, pf in procs.items() if pf.is_rank}
    located = stacks.located() if stacks else {}     # frames with their files' full paths
    groups = group_ranks({pid: located[(pid, pid)] for pid, pf in procs.items()
                          if pf.is_rank and pf.gone is None and (pid, pid) in located})
    odd = thread_set_suspects({pid: pf.label for pid, pf in procs.items()
                               if pf.is_rank and pf.gone is None}, tvs)
    recorder, recorder_lags = recorder_for(dumps, procs, rec.start)     # Flight Recorder
    stragglers = find_stragglers(rec, procs, tvs, gpus, peers, job.status,
                                 suspects(groups, {pid: pf.label for pid, pf in procs.items()}),
                                 odd, recorder_lags)
    built = build_wait_graph(GraphInput(rec, procs, tvs, facts, peers, stragglers, located))
    labels = {pid: pf.label for pid, pf in procs.items()}
    late = {s.pid: s for s in stragglers}
    chains = Chains(built.graph)
    pvs: Dict[int, ProcessVerdict] = {
        pid: judge_process(procs[pid], tvs[pid], built.graph, built.waits.get(pid, []),
                           late.get(pid), labels, chains) for pid in sorted(rec.processes)}
    explain_unknown(pvs)                    # not observed: say so, not "no data"
    tree = judge_tree(pvs, rec, built.graph, stragglers, chains)
    qualify_tree(tree, pvs)                 # an unseen process: never "fine"
    qualify_for_unrecorded(tree, unrecorded_nodes)     # nor a node that was not recorded
    partial = partial_hangs(tree.verdict, pvs, built.waits, built.graph)
    notes = [Note(NoteKind.GPU, n) for n in gpu_findings(
        gpus, {pid: pv.verdict for pid, pv in pvs.items()}, rec.window)]
    notes += input_notes(rec)
    notes += [Note(NoteKind.STACKS, n) for n in (stacks.notes() if stacks else [])]
    notes += [Note(NoteKind.STACKS, n) for n in facts.stacks.notes()]
    notes += job.notes
    notes += [Note(NoteKind.JOB, n) for n in (recorder.notes if recorder else [])]
    notes += tree.notes
    still = still_signals(rec) if tree.verdict not in (PROGRESSING, IDLE, EXITED) else None
    notes += [Note(NoteKind.PROGRESS, still)] if still else []
    notes += [Note(NoteKind.RECORDING, n) for n in extra_notes or []]
    return Report(
        verdict=tree.verdict, rule=tree.rule,
        root_cause={"pid": tree.root_cause.pid or None, "tid": tree.root_cause.tid or None,
                    "summary": tree.root_cause.summary, **locate(tree.root_cause.pid, nodes),
                    "node_tid": real_id(tree.root_cause.tid)
                    if nodes is not None and tree.root_cause.tid else None},
        processes=[_process_report(pv, rec, stacks, nodes, facts) for pv in pvs.values()],
        window=window_of(rec),
        backends=rec.backends, source=source, trace_path=trace_path,
        notes=[n.text for n in notes], lost=rec.lost, truncated=rec.truncated,
        wait_graph=built.graph.to_json(),
        rank_stacks=[dict(g.to_json(), labels=[labels[p] for p in g.pids]) for g in groups],
        unobserved=unobserved_lines(rec),
        partial_hangs=[locate_partial(p.to_json(), nodes) for p in partial],
        flight_recorder=recorder.to_json() if recorder else None)


def _process_report(pv: ProcessVerdict, rec: Recording, stacks: Optional[StackTable],
                    nodes: Optional[NodeMap] = None,
                    facts: Optional[WaitFacts] = None) -> ProcessReport:
    threads = []
    sf = (facts or WaitFacts()).stacks
    pid, verdicts = pv.pid, pv.threads
    sampled = stacks.by_thread if stacks else {}
    for t in rec.threads_of(pid):
        v = verdicts[t.tid]
        threads.append(ThreadReport(
            tid=t.tid, name=t.comm, state=_thread_state(t, v), verdict=v.verdict,
            rule=v.rule, evidence=v.evidence, helper=v.helper, parked=v.parked,
            current=current_call_text(t), counters=thread_counters(t, v, rec),
            stack=sampled.get((pid, t.tid), []), last_output_ts=t.last_output_ts,
            kernel_stack=sf.kernel_frames(pid, t.tid),
            native_stack=sf.native_frames(pid, t.tid)[0]))
    return ProcessReport(
        pid=pv.pid, ppid=pv.ppid, role=pv.facts.role_label, comm=pv.facts.comm,
        cmdline=pv.facts.cmdline, verdict=pv.verdict, rule=pv.rule, evidence=pv.evidence,
        waits_on=[locate_wait(w.to_json(), nodes) for w in pv.waits_on], threads=threads,
        exit_status=pv.exit_status, counters=_process_counters(threads),
        pid_unknown=pv.facts.pid_unknown, node=pv.facts.node,
        node_pid=real_id(pv.pid) if nodes is not None else None, ns_pid=pv.facts.ns_pid)
