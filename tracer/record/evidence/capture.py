"""CUDA graph capture seen in Python stacks: which threads are inside a capture, and where.

Contract:
- ``capture_sites(stacks)`` -> one ``CaptureSite`` per thread whose py-spy stack
  (``PyStack`` with ``files``) shows CUDA graph capture, the most telling frame first: its
  kind "capture-call", "with-block", "phase" or "runner" (what each means and how it is
  found: ``capture_sites``). A with-block is found in the frame's source, read as the process
  may read it (linux/target_files.py, at most ``MAX_SOURCE`` bytes) and parsed with ``ast``.
- ``with_capture_sites(probe)`` wraps an end probe giving ``PyStack`` events (pystacks.py):
  the capture sites found from the same stacks, which pass through as they come.
- Never raises (but linux/cancel.py's ``Cancelled`` on a stop, inside the source's walk): an
  unreadable or unparsable source file only loses that frame's check.
"""
from __future__ import annotations

import ast
import re
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from ...events import PyStack
from ...linux import cancel
from ...linux.intparse import parse_uint
from ...linux.target_files import TargetFileRefused, read_target_file
from ...events.evidence import CaptureSite

__all__ = ["capture_sites", "with_capture_sites", "graph_with_blocks", "parse_frame",
           "RUNNERS", "MAX_SOURCE"]

# ast.parse is one call a signal cannot enter: ~4 s of CPU a MB of ``with`` statements on the
# 2-core VM at load 15 (5.7 MB: 22 s), where a large real source (torch's) is under 1 MB
MAX_SOURCE = 1 << 20
CAPTURE_CALLS = {"capture_begin", "capture_end", "__enter__", "__exit__"}
_GRAPHS_PY = "torch/cuda/graphs.py"
_GRAPH_CM = re.compile(r"(^|\.)graph\s*\(")
_PHASE_CM = re.compile(r"(^|\.)graph_capture\s*\(")
# (file suffix, function names): CUDA graph runners of the serving stacks
RUNNERS: List[Tuple[str, Tuple[str, ...]]] = [
    ("sglang/srt/model_executor/cuda_graph_runner.py", ("capture", "capture_one_batch_size")),
    ("vllm/worker/model_runner.py", ("capture_model", "capture")),
    ("vllm/v1/worker/gpu_model_runner.py", ("capture_model", "_capture_cudagraphs")),
    ("vllm/compilation/cuda_graph.py", ("__call__",)),
]
# a line number of at most 10 ASCII digits (intparse.py); more stay in the file's name
_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>.*?)(?::(?P<line>[0-9]{1,10}))?\)$")

Blocks = List[Tuple[int, int, str, str]]   # (first body line, last line, "with" text, kind)


def parse_frame(frame: str) -> Tuple[str, str, Optional[int]]:
    """("CUDAGraph.capture_begin", "torch/cuda/graphs.py", 104) from a PyStack frame text."""
    m = _FRAME.match(frame)
    if not m:
        return frame, "", None
    line = m.group("line")
    return m.group("func"), m.group("file"), parse_uint(line, 10) if line else None


def graph_with_blocks(source: str) -> Blocks:
    """Every ``with`` on a CUDA graph context manager in ``source``: kinds 2 and 3
    (with-block, phase) of ``capture_sites``."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []       # RecursionError, MemoryError: an expression nested 1,000s deep
    out: Blocks = []
    lines = source_lines(source)
    for node in cancel.checked(ast.walk(tree)):
        if not isinstance(node, (ast.With, ast.AsyncWith)) or not node.body:
            continue
        for item in node.items:
            text = source_segment(lines, item.context_expr)
            head = text.split("(", 1)[0] + "("
            kind = "with-block" if _GRAPH_CM.search(head) else \
                "phase" if _PHASE_CM.search(head) else ""
            if kind:
                end = getattr(node, "end_lineno", None) or node.body[-1].lineno
                out.append((node.body[0].lineno, end, " ".join(text.split())[:120], kind))
    return out


_NEWLINE = re.compile(r"\r\n|\r|\n")     # the line ends of ast's line numbers (no \f)


def source_lines(source: str) -> List[str]:
    """``source`` as ast numbers its lines (from 0 here), each with its line end."""
    out, start = [], 0
    for m in _NEWLINE.finditer(source):
        out.append(source[start:m.end()])
        start = m.end()
    if start < len(source):
        out.append(source[start:])
    return out


def source_segment(lines: List[str], node: ast.AST) -> str:
    """What ``ast.get_source_segment(source, node)`` gives ("" for None), from the source's lines
    split once (``source_lines``): get_source_segment splits the whole source per call, which made
    2,000 ``with`` statements (36 KB) cost 5.2 s of CPU, quadratic in the file's length."""
    first, last = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    col, end_col = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
    if first is None or last is None or col is None or end_col is None \
            or not 1 <= first <= last <= len(lines):
        return ""
    if first == last:
        return lines[first - 1].encode()[col:end_col].decode("utf-8", "replace")
    head = lines[first - 1].encode()[col:].decode("utf-8", "replace")
    tail = lines[last - 1].encode()[:end_col].decode("utf-8", "replace")
    return "".join([head, *lines[first:last - 1], tail])


class _Sources:
    """Parsed ``with`` blocks per source file, read once (``capture_sites``)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.blocks: Dict[str, Blocks] = {}

    def of(self, pid: int, path: str) -> Blocks:
        if not path.startswith("/"):
            return []
        key = f"{pid}:{path}"
        if key not in self.blocks:
            self.blocks[key] = []
            try:
                data = read_target_file(pid, path, max_bytes=MAX_SOURCE, owned=False,
                                        root=self.root).data
            except TargetFileRefused:
                return []
            if b"graph" in data:
                self.blocks[key] = graph_with_blocks(data.decode("utf-8", "replace"))
        return self.blocks[key]


def _site_of(s: PyStack, sources: _Sources) -> Optional[CaptureSite]:
    found: Dict[str, CaptureSite] = {}
    for i, frame in enumerate(s.frames):
        func, short, line = parse_frame(frame)
        path = s.files[i] if i < len(s.files) else ""
        name = func.rsplit(".", 1)[-1]
        names = (path, short)

        def site(how: str, detail: str = "") -> None:
            found.setdefault(how, CaptureSite(ts=s.ts, pid=s.pid, tid=s.tid, how=how,
                                              frame=frame, detail=detail))
        if any(n.endswith(_GRAPHS_PY) for n in names) and name in CAPTURE_CALLS:
            site("capture-call", func)
            continue
        if line is not None:
            for first, last, text, kind in sources.of(s.pid, path):
                if first <= line <= last:
                    site(kind, f"with {text}")
        for suffix, funcs in RUNNERS:
            if any(n.endswith(suffix) for n in names) and name in funcs:
                site("runner", func)
    for how in ("capture-call", "with-block", "phase", "runner"):
        if how in found:
            return found[how]
    return None


def capture_sites(stacks: Iterable[PyStack], root: str = "/proc") -> List[CaptureSite]:
    """CaptureSite per thread whose stack shows capture, the most telling frame first:

    1. "capture-call": a frame of torch/cuda/graphs.py's ``capture_begin`` / ``capture_end`` or of
    the ``torch.cuda.graph`` context manager's ``__enter__`` / ``__exit__`` (the thread is starting
    or ending a capture: the place where torch waits for pending NCCL work and where
    cudaStreamBeginCapture / cudaStreamEndCapture run);

    2. "with-block": a frame whose current line lies in the body of a ``with`` statement on
    ``...graph(...)`` (torch.cuda.graph, a ``graph`` imported from it): the source file is read as
    the process may read it (linux/target_files.py: in its root, at most ``MAX_SOURCE`` bytes) and
    parsed with ``ast``, so this holds for any code, SGLang's and vLLM's runners included, and says
    the thread is inside the capture, not merely near it;

    3. "phase": the same for ``with graph_capture(...)`` (SGLang's and vLLM's parallel_state
    context around the whole capture loop, warm-up runs included);

    4. "runner": a frame of a known CUDA graph runner (``RUNNERS``) whose source could not be read:
    the thread is in the capture phase, perhaps in a warm-up run."""
    sources = _Sources(root)
    out = []
    for s in stacks:
        cancel.check()      # a stop between two stacks' sources (linux/cancel.py)
        if s.error or not s.frames:
            continue
        site = _site_of(s, sources)
        if site is not None:
            out.append(site)
    return out


def with_capture_sites(probe: Callable[..., Iterable]) -> Callable[..., Iterator]:
    """A session end probe giving the stacks of ``probe`` as they come, then the capture
    sites in them."""
    def run(pids: List[int], analyzer: object = None) -> Iterator:
        stacks = []
        for e in probe(pids, analyzer):
            stacks.append(e)
            yield e
        yield from capture_sites(e for e in stacks if isinstance(e, PyStack))
    run.__name__ = getattr(probe, "__name__", "python stacks")
    return run
