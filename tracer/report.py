"""The report: what the analyzer concluded, as plain data, and its JSON form.

Contract: a ``Report`` holds verdicts, evidence, counters and notes; it never reads /proc or a
trace. ``to_json()`` gives the documented ``hangtrace.report/1`` document (its JSON schema is
tracer/data/report.schema.json); ``exit_code`` maps the tree verdict to the command's exit
status (README): 0 progressing or idle, 1 error, 2 usage, 3 busy-waiting, 4 deadlocked, 5 exited,
6 blocked on something outside the traced tree that is still working (the GPU).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

REPORT_FORMAT = "hangtrace.report/1"
EXIT_CODES = {"progressing": 0, "idle": 0, "busy-waiting": 3, "deadlocked": 4, "exited": 5,
              "blocked": 6, "unknown": 7}


@dataclass
class ThreadReport:
    tid: int
    name: str
    state: str
    verdict: str
    rule: str
    evidence: List[str]
    helper: Optional[str] = None
    parked: bool = False
    current: str = ""
    counters: Dict[str, float] = field(default_factory=dict)
    # Python stack from py-spy at the end of the recording: "func (file:line)", innermost first.
    stack: List[str] = field(default_factory=list)
    last_output_ts: Optional[float] = None     # when it last wrote output (epoch seconds)
    # /proc/PID/task/TID/stack at the end ("func+0x1a/0x2b0", innermost first), when read
    kernel_stack: List[str] = field(default_factory=list)
    # native frames (attach --native: py-spy, or a stack scan), "func (library)", innermost first
    native_stack: List[str] = field(default_factory=list)

    def to_json(self) -> Dict[str, Any]:
        return {"tid": self.tid, "name": self.name, "state": self.state,
                "verdict": self.verdict, "rule": self.rule, "evidence": self.evidence,
                "helper": self.helper, "parked": self.parked, "current": self.current,
                "counters": self.counters, "stack": self.stack,
                "last_output_ts": self.last_output_ts, "kernel_stack": self.kernel_stack,
                "native_stack": self.native_stack}


@dataclass
class ProcessReport:
    pid: int
    ppid: int
    role: str
    comm: str
    cmdline: List[str]
    verdict: str
    rule: str
    evidence: List[str]
    waits_on: List[Dict[str, Any]]
    threads: List[ThreadReport]
    exit_status: Optional[str] = None
    counters: Dict[str, float] = field(default_factory=dict)
    # True: ``pid`` is the tid of one thread whose process the recording does not show
    # (strace -p A -p B logs have no fork records); it is reported on its own.
    pid_unknown: bool = False
    # Merged traces (hangtrace merge): the node it ran on and its pid there; ``pid`` is then
    # a key unique across nodes (node i's pid p is i * 10,000,000 + p), as are tids.
    node: Optional[str] = None
    node_pid: Optional[int] = None
    # Its pid in its own pid namespace when that lies below the recording's (a container's
    # process seen from the host: NSpid), else None.
    ns_pid: Optional[int] = None

    def to_json(self) -> Dict[str, Any]:
        return {"pid": self.pid, "ppid": self.ppid, "role": self.role, "comm": self.comm,
                "cmdline": self.cmdline, "verdict": self.verdict, "rule": self.rule,
                "evidence": self.evidence, "waits_on": self.waits_on,
                "exit_status": self.exit_status, "counters": self.counters,
                "pid_unknown": self.pid_unknown,
                "threads": [t.to_json() for t in self.threads],
                "node": self.node, "node_pid": self.node_pid, "ns_pid": self.ns_pid}


@dataclass
class Report:
    verdict: str
    rule: str
    root_cause: Dict[str, Any]
    processes: List[ProcessReport]
    window: Dict[str, float]
    backends: List[str]
    source: str = "attach"
    trace_path: Optional[str] = None
    notes: List[str] = field(default_factory=list)
    lost: int = 0
    truncated: bool = False
    # {"nodes", "edges", "cycle", "proof"} (tracer/analysis/waitgraph/graph.py), None when not built
    wait_graph: Optional[Dict[str, Any]] = None
    # ranks grouped by their main thread's Python stack (analysis/job/stack_groups.py)
    rank_stacks: List[Dict[str, Any]] = field(default_factory=list)
    # logs, ports, GPU health, versions, CUDA graph capture (tracer/analysis/evidence/build.py)
    evidence: Optional[Dict[str, Any]] = None
    # What the backends could not observe, one line each (tracer/analysis/threads/observed.py): the
    # verdict line shows them, since the verdict rests on the rest.
    unobserved: List[str] = field(default_factory=list)
    # Set by ``hangtrace watch`` (tracer/record/watch.py): {"silent_since", "recorded_from",
    # "silent_for", "last_progress", "summary"}; None for every other report.
    watch: Optional[Dict[str, Any]] = None
    # threads stuck all window on one object while the tree goes on (analysis/verdicts/partial.py)
    partial_hangs: List[Dict[str, Any]] = field(default_factory=list)
    # Set by ``hangtrace merge``/``cluster`` (load/merged.py): one entry per node, {"name",
    # "hostname", "netns", "trace", "key_offset", "clock_offset", "clock", "window", "error"};
    # None for a single trace.
    nodes: Optional[List[Dict[str, Any]]] = None
    # PyTorch Flight Recorder dumps read (analysis/job/flight_recorder.py): {"dumps", "groups",
    # "findings", "notes"}; None when there were none.
    flight_recorder: Optional[Dict[str, Any]] = None

    @property
    def exit_code(self) -> int:
        """The verdict's exit status; but a trace cut short proves no idle tree (what came after
        its end is unknown): 7, unknown. Progress it recorded is progress (issue 43 item 3)."""
        code = EXIT_CODES.get(self.verdict, EXIT_CODES["unknown"])
        if self.truncated and self.verdict == "idle":
            return EXIT_CODES["unknown"]
        return code

    def cut_short_text(self) -> str:
        """Where a trace cut short ends: "the trace ends at 1.2 s of 5 s" (of the seconds asked,
        ``window["asked"]``, where known); "" for a whole trace."""
        if not self.truncated:
            return ""
        asked = self.window.get("asked")
        at = f"{self.window.get('duration', 0.0):.1f} s"
        return f"the trace ends at {at} of {asked:g} s" if asked else \
            f"the trace was cut short at {at}"

    def process(self, pid: int) -> Optional[ProcessReport]:
        return next((p for p in self.processes if p.pid == pid), None)

    def to_json(self) -> Dict[str, Any]:
        return {"format": REPORT_FORMAT, "verdict": self.verdict, "rule": self.rule,
                "root_cause": self.root_cause, "window": self.window,
                "backends": self.backends, "source": self.source, "trace": self.trace_path,
                "notes": self.notes, "unobserved": self.unobserved,
                "lost_events": self.lost, "truncated": self.truncated,
                "exit_code": self.exit_code,
                "processes": [p.to_json() for p in self.processes],
                "wait_graph": self.wait_graph, "rank_stacks": self.rank_stacks,
                "evidence": self.evidence, "watch": self.watch,
                "partial_hangs": self.partial_hangs, "nodes": self.nodes,
                "flight_recorder": self.flight_recorder}
