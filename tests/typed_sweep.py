"""The typed sweep (issue 35 item 10): every registered event tag, every field, every kind of
hostile value, one at a time, through ``hangtrace analyze``.

The base is the smallest real trace of the corpus (fuzzing.corpus), re-written in the current
format, with one real row of every registered tag added (the longest row of that tag in the
corpus under ``MAX_TEMPLATE`` bytes: the one with the most to damage; a tag no trace holds
gets a row made from its class's types), each moved to the base's target (``pid``, ``tid``)
and into its window (``ts``), so that the analysis reads it. A mutant is that trace with one field of one added row replaced by one value of
``TYPED_VALUES`` (huge, negative, NaN, 1e308, wrong types, deep nesting); "field" is every
top-level field and, in a nested value (a list of dicts, a dict of lists), every leaf down to
``MAX_DEPTH`` (the first item of a list, every key of a dict; of a map by id, its first).

``sweep()`` lists the mutants; ``run(mutant)`` gives the fuzzing.Outcome. A row the trace
codec refuses (tracefile/codec.py: the edge) is a skipped bad line, which leaves the analysis
of the base trace: ``refused_at_the_edge(mutant)`` says so without running it, and
``run_sweep`` analyzes only the first such mutant of each tag (the others read the same
events) besides every mutant the codec accepts, the JSON and the text report in turn (alone,
or ``batched``: one row per tag at once, for CI).
"""
from __future__ import annotations

import json
import os
import random
import tempfile
import typing
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

import msgspec

import fuzzing
from tracer import events as ev
from tracer.tracefile import format as fmt
from tracer.tracefile.codec import BAD, RowCodec, encode_row, header_line

MAX_DEPTH = 3
MAX_TEMPLATE = 8000             # bytes: the longest row of a tag under it is its template
# JSON texts that replace one value: (name, raw JSON).
TYPED_VALUES: List[Tuple[str, str]] = [
    ("2**64", str(2 ** 64)), ("2**63", str(2 ** 63)), ("2**63-1", str(2 ** 63 - 1)),
    ("-2**63-1", str(-2 ** 63 - 1)), ("5000-digit", "9" * 5000), ("negative", "-1"),
    ("NaN", "NaN"), ("1e308", "1e308"), ("-1e308", "-1e308"), ("string", '"not-a-kind"'),
    ("int", "7"), ("null", "null"), ("list", "[1]"), ("dict", '{"a":1}'),
    ("huge-key", '{"' + "k" * 100_000 + '":1}'), ("deep", "[" * 3000 + "]" * 3000),
    ("deep-dict", '{"a":' * 500 + "1" + "}" * 500),
]


@dataclass
class TypedMutant:
    tag: str
    path: Tuple[Any, ...]         # the field's place in the row (index, then keys)
    value: str                    # the name of the value in TYPED_VALUES
    line: bytes                   # the mutated row
    index: int                    # its line number in the base trace


def _sample(tp: Any, name: str, pid: int, tid: int, start: float) -> Any:
    """A plausible value of type ``tp`` for the field ``name`` (a tag no trace holds)."""
    origin = typing.get_origin(tp)
    if origin is typing.Union:
        return _sample([a for a in typing.get_args(tp) if a is not type(None)][0], name, pid,
                       tid, start)
    if tp is int:
        return tid if name == "tid" else pid if name in ("pid", "ppid") else 1
    if tp is float:
        return start + 0.1
    if tp is str:
        return "x"
    if tp is bool:
        return False
    if origin in (list, tuple):
        return []
    if origin is dict:
        return {}
    return None


def _moved(e: ev.Event, pid: int, tid: int, start: float) -> ev.Event:
    names = ev.field_names(type(e))
    change: Dict[str, Any] = {"ts": start + 0.1}
    if "pid" in names:
        change["pid"] = pid
    if "tid" in names:
        change["tid"] = tid
    return msgspec.structs.replace(e, **change)


def _templates(seeds: List[fuzzing.Seed], pid: int, tid: int,
               start: float) -> Dict[str, ev.Event]:
    """One event per registered tag: the corpus's first (module doc), else made."""
    out: Dict[str, ev.Event] = {}
    size: Dict[str, int] = {}
    for s in sorted(seeds, key=lambda s: s.name):
        lines = s.data.split(b"\n")
        codec = RowCodec(json.loads(lines[0]).get("schema") or ev.schema())
        for line in lines[1:]:
            tag = line[2:line.find(b'"', 2)].decode("ascii", "replace")
            if (line[:2] != b'["' or tag not in ev.EVENT_CLASSES or tag == "end"
                    or not size.get(tag, 0) < len(line) <= MAX_TEMPLATE):
                continue
            e = codec.line(line)
            if e is not BAD:
                out[tag], size[tag] = _moved(e, pid, tid, start), len(line)
    for tag, cls in ev.EVENT_CLASSES.items():
        if tag not in out and tag != "end":
            hints = typing.get_type_hints(cls)
            req = {f.name: _sample(hints[f.name], f.name, pid, tid, start)
                   for f in msgspec.structs.fields(cls) if f.required}
            out[tag] = _moved(cls(**req), pid, tid, start)
    return out


def base_trace(seeds: Optional[List[fuzzing.Seed]] = None) -> Tuple[List[bytes], Dict[str, int]]:
    """(the base trace's lines, the line index of each tag's added row) (module doc)."""
    traces = [s for s in (seeds or fuzzing.corpus()) if s.kind == "trace"]
    small = min(traces, key=lambda s: len(s.data))
    with tempfile.NamedTemporaryFile(suffix=".htrace") as f:
        f.write(small.data)
        f.flush()
        reader = fmt.TraceReader(f.name)
        header = dict(reader.info.header, schema=ev.schema())
        events = list(reader.events())
    start = float(header["start"])
    pid = int(header["targets"][0])
    tid = next((e.tid for e in events if getattr(e, "pid", None) == pid
                and getattr(e, "tid", None)), pid)
    lines = [header_line(header).rstrip(b"\n")]
    lines += [encode_row(e).rstrip(b"\n") for e in events]
    where: Dict[str, int] = {}
    for tag, e in sorted(_templates(traces, pid, tid, start).items()):
        where[tag] = len(lines)
        lines.append(encode_row(e).rstrip(b"\n"))
    end = reader.info.end
    lines.append(encode_row(end if end is not None else ev.RecordingEnd(ts=start + 1.0))
                 .rstrip(b"\n"))
    return lines, where


def _leaf_paths(v: Any, path: Tuple[Any, ...], depth: int) -> Iterator[Tuple[Any, ...]]:
    yield path
    if depth >= MAX_DEPTH:
        return
    if isinstance(v, list) and v:
        yield from _leaf_paths(v[0], path + (0,), depth + 1)
    elif isinstance(v, dict):
        keys = sorted(v)
        if all(k.isdigit() for k in keys):      # a map by id (tid, inode): its first entry
            keys = keys[:1]
        for k in keys:
            yield from _leaf_paths(v[k], path + (k,), depth + 1)


def sweep(seeds: Optional[List[fuzzing.Seed]] = None) -> Tuple[List[bytes], List[TypedMutant]]:
    """(the base trace's lines, every mutant of it) (module doc)."""
    lines, where = base_trace(seeds)
    out: List[TypedMutant] = []
    for tag, i in sorted(where.items()):
        row = json.loads(lines[i])
        for k in range(1, len(row)):
            for path in _leaf_paths(row[k], (k,), 1):
                for name, raw in TYPED_VALUES:
                    text = fuzzing._with_field(json.loads(lines[i]), path, raw)
                    out.append(TypedMutant(tag, path, name,
                                           text.encode("utf-8", "surrogateescape"), i))
    return lines, out


_CODEC = RowCodec(ev.schema())


def refused_at_the_edge(m: TypedMutant) -> bool:
    """Whether the trace codec refuses the mutated row (a bad line, skipped)."""
    return _CODEC.line(m.line) is BAD


def run(lines: List[bytes], m: TypedMutant, text: bool = False,
        time_limit: float = 60.0) -> fuzzing.Outcome:
    """``hangtrace analyze`` of the base trace with the mutant's row (the JSON report, or the
    text report with ``text``)."""
    return run_batch(lines, [m], text, time_limit)


def run_batch(lines: List[bytes], batch: List[TypedMutant], text: bool = False,
              time_limit: float = 60.0) -> fuzzing.Outcome:
    """As ``run``, with the rows of several mutants at once (each of another row)."""
    rows = list(lines)
    for m in batch:
        rows[m.index] = m.line
    data = b"\n".join(rows) + b"\n"
    with tempfile.TemporaryDirectory(prefix="hangtrace-typed-") as tmp:
        path = os.path.join(tmp, "input.htrace")
        with open(path, "wb") as f:
            f.write(data)
        return fuzzing.run_command(["analyze", path] + ([] if text else ["--json"]),
                                   time_limit)


def describe(m: TypedMutant) -> str:
    field = ev.field_names(ev.EVENT_CLASSES[m.tag])[m.path[0] - 1]
    rest = "".join(f"[{p!r}]" for p in m.path[1:])
    return f"{m.tag}.{field}{rest} = {m.value}"


def batches(ms: List[TypedMutant], seed: int = 35) -> List[List[TypedMutant]]:
    """The mutants in batches of one row per tag, each tag's in its own shuffled order (in
    field order, a batch would give every row the same pid, a table that agrees with
    itself: a ``sc`` row naming a pid no process has was analyzed without fault that way)."""
    by_tag: Dict[str, List[TypedMutant]] = {}
    for m in ms:
        by_tag.setdefault(m.tag, []).append(m)
    for k, tag in enumerate(sorted(by_tag)):
        random.Random(seed * 1000 + k).shuffle(by_tag[tag])
    longest = max((len(v) for v in by_tag.values()), default=0)
    return [[v[i] for v in by_tag.values() if i < len(v)] for i in range(longest)]


def run_sweep(cpu_limit: float, seeds: Optional[List[fuzzing.Seed]] = None,
              log: Any = None, batched: bool = False) -> Dict[str, Any]:
    """Every mutant (module doc): {"mutants", "edge" (refused by the codec), "analyzed"
    (mutants analyzed), "runs" (analyses), "failures" [line], "codes" {exit status: count},
    "slowest" (CPU s, what)}. ``batched``: the mutants the codec accepts are analyzed in
    ``batches`` (a failing batch is run again one mutant at a time, to name the culprit)."""
    lines, ms = sweep(seeds)
    todo: List[TypedMutant] = []
    edge_tags = set()
    edge = 0
    for m in ms:
        if refused_at_the_edge(m):
            edge += 1
            if m.tag in edge_tags:
                continue
            edge_tags.add(m.tag)
        todo.append(m)
    out: Dict[str, Any] = {"mutants": len(ms), "edge": edge, "analyzed": len(todo), "runs": 0,
                           "failures": [], "codes": {}, "slowest": (0.0, "")}
    groups = batches(todo) if batched else [[m] for m in todo]
    for batch in groups:
        why = _judge(lines, batch, cpu_limit, out)
        if why and len(batch) > 1:
            alone = [(m, _judge(lines, [m], cpu_limit, out)) for m in batch]
            culprits = [f"{describe(m)}: {w}" for m, w in alone if w]
            out["failures"] += culprits or [f"a batch of {len(batch)}: {why}"]
        elif why:
            out["failures"].append(f"{describe(batch[0])}: {why}")
        if why and log:
            print(f"FAIL {out['failures'][-1]}", file=log, flush=True)
    return out


def _judge(lines: List[bytes], batch: List[TypedMutant], cpu_limit: float,
           out: Dict[str, Any]) -> Optional[str]:
    o = run_batch(lines, batch, text=out["runs"] % 2 == 1)   # both renderers, in turn
    out["runs"] += 1
    out["codes"][o.code] = out["codes"].get(o.code, 0) + 1
    what = describe(batch[0]) + (f" and {len(batch) - 1} more" if len(batch) > 1 else "")
    out["slowest"] = max(out["slowest"], (o.cpu, what))
    return fuzzing.check(fuzzing.Mutant("typed", "trace", b"", []), o, cpu_limit)
