"""Flight Recorder inputs for the fuzz pass (issue 35 item 10): hostile dump files next to a
real one, through ``hangtrace analyze DIR`` (tracefile/fr_dump.py, fr_pickle.py).

The real dumps are fixtures/flight-recorder/skip (torch 2.13, gloo, two ranks). ``inputs()``
lists (what, file bytes) for rank 0's file; rank 1's stays real:
- whole files: pickles that name a callable (os.system through REDUCE, a GLOBAL opcode), a
  persistent id, a memo bomb (a 658-byte pickle of 60**5 shared references), nesting past
  the reader's bound and far past Python's recursion limit, a length field past the data,
  the real dump cut short, JSON nested 100,000 deep or holding a 5,000-digit number;
- one value of the real dump made hostile (``VALUES``: 5,000-digit and 64-bit-overflowing
  ints, NaN, infinities, a megabyte string, a 100,000-character key, a 5,000-digit key,
  wrong types, nesting), at every key of the dump down to an entry's frame, written as a
  pickle and (the values JSON can write) as the JSON form.
``run(data)`` gives the fuzzing.Outcome of analyzing the directory (JSON report, or the
text report with ``text``).
"""
from __future__ import annotations

import copy
import json
import os
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import fuzzing

SKIP = Path(__file__).resolve().parent.parent / "fixtures" / "flight-recorder" / "skip"
BIG = 10 ** 5000
RAN_MARK = "/tmp/hangtrace-fr-fuzz-ran"      # what the os.system pickle would create


class _System:
    def __reduce__(self) -> Any:
        return (os.system, (f"touch {RAN_MARK}",))


def _nested(n: int) -> bytes:
    """A list nested ``n`` deep as raw opcodes (pickle.dumps itself would recurse)."""
    return b"\x80\x02" + b"]" * n + b"a" * (n - 1) + b"."


def _memo_bomb() -> bytes:
    a: List[Any] = [0] * 60
    for _ in range(4):
        a = [a] * 60
    return pickle.dumps({"entries": a, "pg_status": {}}, protocol=2)


VALUES: List[Tuple[str, Any]] = [
    ("5000-digit", BIG), ("-5000-digit", -BIG), ("2**64", 2 ** 64), ("-2**63-1", -2 ** 63 - 1),
    ("5000-digit-text", "9" * 5000), ("NaN", float("nan")), ("inf", float("inf")),
    ("1e308", 1e308), ("megabyte", "x" * 1_000_000), ("huge-key", {"k" * 100_000: 1}),
    ("5000-digit-key", {BIG: 1}), ("null", None), ("true", True), ("list", [1, [2]]),
    ("dict", {"a": {"b": 1}}), ("bytes", b"\xff" * 10), ("nested-60", None),
]


def _deep_list(n: int) -> Any:
    v: Any = 1
    for _ in range(n):
        v = [v]
    return v


def _paths(v: Any, path: Tuple[Any, ...] = (), depth: int = 0) -> Iterator[Tuple[Any, ...]]:
    if path:
        yield path
    if depth >= 4:
        return
    if isinstance(v, dict):
        for k in list(v)[:24]:
            yield from _paths(v[k], path + (k,), depth + 1)
    elif isinstance(v, list) and v:
        yield from _paths(v[0], path + (0,), depth + 1)


def _set(obj: Any, path: Tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(obj)
    parent = out
    for k in path[:-1]:
        parent = parent[k]
    parent[path[-1]] = value
    return out


def _json(obj: Any) -> bytes:
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)           # a 5,000-digit number, written as a writer could
    try:
        return json.dumps(obj).encode()
    finally:
        sys.set_int_max_str_digits(old)


def inputs() -> List[Tuple[str, bytes]]:
    """(what, rank 0's file) of every input (module doc)."""
    from tracer.tracefile.fr_pickle import load_plain
    raw = (SKIP / "fr_rank_0").read_bytes()
    real = load_plain(raw)
    deep_json = b'{"entries":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    out: List[Tuple[str, bytes]] = [
        ("pickle naming os.system", pickle.dumps(_System(), protocol=2)),
        ("GLOBAL opcode", b"\x80\x02cos\nsystem\n(S'true'\ntR."),
        ("persistent id", b"\x80\x02K\x01Q."), ("memo bomb", _memo_bomb()),
        ("nested 65", _nested(65)), ("nested 200000", _nested(200_000)),
        ("length past the data", b"\x80\x02X\xff\xff\xff\x7f" + b"x" * 10),
        ("cut short", raw[: len(raw) // 2]), ("deep JSON", deep_json),
        ("JSON 5000-digit", b'{"entries": [], "pg_status": {"0": {"last_started_collective": '
         + b"9" * 5000 + b"}}}"),
    ]
    for group in ("pg_config", "pg_status"):
        key = next(iter(real[group]))
        for name, k in (("huge-key", "k" * 100_000), ("5000-digit-key", BIG)):
            obj = copy.deepcopy(real)
            obj[group] = {k: obj[group][key]}
            out.append((f"pickle {group} key = {name}", pickle.dumps(obj, protocol=2)))
    for path in _paths(real):
        where = "/".join(map(str, path))
        for name, value in VALUES:
            value = _deep_list(60) if name == "nested-60" else value
            obj = _set(real, path, value)
            out.append((f"pickle {where} = {name}", pickle.dumps(obj, protocol=2)))
            if name in ("5000-digit", "2**64", "NaN", "huge-key", "dict", "list"):
                out.append((f"JSON {where} = {name}", _json(obj)))
    return out


def run(data: bytes, text: bool = False, time_limit: float = 60.0) -> fuzzing.Outcome:
    """``hangtrace analyze DIR`` of rank 0's ``data`` beside the real rank 1 (module doc)."""
    with tempfile.TemporaryDirectory(prefix="hangtrace-fr-fuzz-") as tmp:
        with open(os.path.join(tmp, "fr_rank_0"), "wb") as f:
            f.write(data)
        with open(os.path.join(tmp, "fr_rank_1"), "wb") as f:
            f.write((SKIP / "fr_rank_1").read_bytes())
        return fuzzing.run_command(["analyze", tmp] + ([] if text else ["--json"]), time_limit)
