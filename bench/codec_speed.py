"""Benchmark: today's trace row decoder and validator against msgspec (issue 21 item 5).

Usage: python bench/codec_speed.py TRACE [--reps R]      (msgspec must be installed)

Both read the same trace through the same stream and the same blocks of whole lines
(format.TraceReader's header reading and ``_raw_blocks``); only the decoding of the rows
differs:

- today: ``TraceReader._batches`` (the compiled row decoder csrc/rows_in.c and numbers.c for
  the rows it takes, json's C scanner and validate.py's checkers, built with exec, for the
  others; the pure-Python path when the helpers are not built);
- msgspec: one typed Struct per event class (array_like, tagged by the class's TAG, so a row
  ``[TAG, field, ...]`` is the tagged union's member), built here from the dataclass fields and
  their annotations (FdInfo rows as an array-like Struct with its optional tail, floats
  bounded to +-1e308 as validate.py bounds them, ints never bools), decoded a block at a time
  with ``Decoder(Union[...]).decode_lines``, a block msgspec refuses read line by line.

That is what a replacement would cost at best: the events would be the Structs themselves (no
conversion to the dataclasses is timed). Each repetition times both, in alternating order, in
one process (CPU time of the whole read, gzip included); printed are each one's median and the
median of the per-repetition ratios msgspec/today, and the decision of issue 21's rule (keep
msgspec when that ratio is at most 1.10). Before timing, every row decoded by msgspec is
checked against today's event (same values, same count), so both read the same thing.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
import typing
from typing import Any, Dict, List, Optional, Tuple, Union

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

THRESHOLD = 1.10            # issue 21: msgspec is taken if within 10% of today's codec or faster


def _structs(schema: Dict[str, List[str]]) -> Tuple[Any, Dict[type, type]]:
    """(the tagged union of one Struct per tag of ``schema`` with the writer's field order,
    {Struct: event class})."""
    import msgspec
    from tracer import events as ev

    finite = typing.Annotated[float, msgspec.Meta(ge=-1e308, le=1e308)]
    fd_fields = []
    for f in dataclasses.fields(ev.FdInfo):
        hint = typing.get_type_hints(ev.FdInfo)[f.name]
        if f.default is dataclasses.MISSING:
            fd_fields.append((f.name, hint))
        else:
            fd_fields.append((f.name, hint, f.default))
    fd_struct = msgspec.defstruct("FdInfoRow", fd_fields, array_like=True, gc=False)

    def conv(hint: Any) -> Any:
        if hint is float:
            return finite
        if hint is ev.FdInfo:
            return fd_struct
        args = typing.get_args(hint)
        if not args:
            return hint
        origin = typing.get_origin(hint)
        new = tuple(conv(a) if a is not Ellipsis else a for a in args)
        if origin is Union:
            return Union[new]             # type: ignore[valid-type]
        return hint.copy_with(new) if hasattr(hint, "copy_with") else hint

    members: List[type] = []
    back: Dict[type, type] = {}
    for tag, names in schema.items():
        cls = ev.EVENT_CLASSES.get(tag)
        if cls is None or names != ev.field_names(cls):
            continue
        hints = typing.get_type_hints(cls)
        spec = []
        for f in dataclasses.fields(cls):
            t = conv(hints[f.name])
            if f.default is not dataclasses.MISSING:
                spec.append((f.name, t, f.default))
            elif f.default_factory is not dataclasses.MISSING:     # type: ignore[misc]
                spec.append((f.name, t, msgspec.field(default_factory=f.default_factory)))
            else:
                spec.append((f.name, t))
        s = msgspec.defstruct(f"{cls.__name__}Row", spec, tag=tag, array_like=True, gc=False,
                              forbid_unknown_fields=True)
        members.append(s)
        back[s] = cls
    return Union[tuple(members)], back             # type: ignore[valid-type]


class MsgspecReader:
    """The trace's rows through msgspec (module doc); ``bad`` counts the lines refused."""

    def __init__(self, path: str) -> None:
        import msgspec
        from tracer.tracefile.format import TraceReader
        self.reader = TraceReader(path)
        schema = self.reader.info.header.get("schema")
        union, self.back = _structs(schema)
        dec = msgspec.json.Decoder(union)
        self._lines, self._one = dec.decode_lines, dec.decode
        self._errors = (msgspec.DecodeError, msgspec.ValidationError, RecursionError,
                        ValueError)
        self.bad = 0
        self._end = next((s for s, c in self.back.items() if c.TAG == "end"), None)
        self.end: Any = None

    def batches(self) -> typing.Iterator[list]:
        from tracer.tracefile.format import _raw_blocks
        lines, one, errors = self._lines, self._one, self._errors
        for raw in _raw_blocks(self.reader._stream, self.reader.info):
            try:
                items = lines(raw)
            except errors:
                pass
            else:
                if items and type(items[-1]) is self._end:     # the end record: info, not an event
                    self.end = items.pop()
                yield items
                continue
            out = []
            for line in raw.split(b"\n"):
                if not line:
                    continue
                try:
                    x = one(line)
                except errors:
                    self.bad += 1
                    continue
                if type(x) is self._end:
                    self.end = x
                else:
                    out.append(x)
            yield out
        self.reader.close()


def _today(path: str) -> int:
    from tracer.tracefile.format import TraceReader
    n = 0
    for batch in TraceReader(path)._batches():
        n += len(batch)
    return n


def _msgspec(path: str) -> int:
    n = 0
    for batch in MsgspecReader(path).batches():
        n += len(batch)
    return n


def check_same(path: str) -> int:
    """Every row msgspec decodes equals today's event; returns the number of rows."""
    import msgspec
    from tracer import events as ev
    from tracer.tracefile.format import TraceReader
    mine = MsgspecReader(path)
    theirs = (e for b in TraceReader(path)._batches() for e in b)
    n = 0
    for batch in mine.batches():
        for s in batch:
            e = next(theirs)
            got = msgspec.to_builtins(s)[1:]
            want = ev.event_to_row(e)[1:]
            if got != want and not (msgspec.json.encode(got) == msgspec.json.encode(want)):
                raise SystemExit(f"row {n + 1} differs: msgspec {got!r} / today {want!r}")
            n += 1
    if next(theirs, None) is not None or mine.bad:
        raise SystemExit(f"msgspec read {n} rows and refused {mine.bad} that today reads")
    return n


def compare(path: str, reps: int) -> Dict[str, Any]:
    """The timings and the decision (module doc)."""
    from tracer.tracefile.fastpath import status
    rows = check_same(path)
    today_t: List[float] = []
    ms_t: List[float] = []
    for i in range(reps):
        order = [(_today, today_t), (_msgspec, ms_t)]
        for fn, out in (order if i % 2 == 0 else order[::-1]):
            c0 = time.process_time()
            fn(path)
            out.append(time.process_time() - c0)
    med = statistics.median
    ratio = med(m / t for m, t in zip(ms_t, today_t))
    import msgspec
    return {"rows": rows, "today": med(today_t), "msgspec": med(ms_t), "ratio": ratio,
            "today_min": min(today_t), "msgspec_min": min(ms_t), "path": status(),
            "msgspec_version": msgspec.__version__, "keep": ratio <= THRESHOLD,
            "size_mb": os.path.getsize(path) / 1e6}


def describe(r: Dict[str, Any]) -> str:
    verdict = ("within 10% or faster: replace the codec" if r["keep"] else
               "more than 10% slower: keep today's codec")
    return (f"codec (decode + validate, {r['rows']:,} rows, {r['size_mb']:.1f} MB trace, "
            f"CPU): today ({r['path']}) median {r['today']:.2f} s (min {r['today_min']:.2f}),"
            f" msgspec {r['msgspec_version']} median {r['msgspec']:.2f} s (min "
            f"{r['msgspec_min']:.2f}); median ratio msgspec/today {r['ratio']:.3f}: {verdict}")


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args(argv)
    print(describe(compare(a.trace, a.reps)))


if __name__ == "__main__":
    main()
