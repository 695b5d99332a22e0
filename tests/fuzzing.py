"""Mutation fuzzing of hangtrace's inputs: real strace logs and real traces, damaged.

The corpus is what the tool meets: the strace logs in tests/data/strace and the recorded
traces in fixtures/traces and fixtures/gpu/traces (small ones). A mutant is one input with a
few random damages of the kinds seen in the wild or in the fault pass of issue 16: bytes
flipped, lines cut, duplicated, swapped or dropped, a file cut short (gzip too), numbers
inflated to thousands of digits or turned into NaN/inf, JSON values replaced by other types
(in the header and in event rows), NUL bytes, very long lines, garbage lines.

``run_mutant(m)`` runs the command a user would (``hangtrace analyze`` of a trace,
``hangtrace import-strace --analyze`` of a log) in this process, and returns an ``Outcome``:
the exit status, stderr, and whether it was an internal error (a Python exception that
reached the CLI's last line of defence) or a hang (over ``time_limit`` seconds).
tests/unit/test_fuzz.py runs a few hundred mutants with a fixed seed; scripts/fuzz.py runs as many
as asked for.

Two finer mutators (issue 22 item 6), each damaging one thing at a time so that a failure
names its cause: ``field_mutants`` changes one field of one real trace row (an event row, or
a process row or value of the header) to one hostile value (``HOSTILE_FIELDS``: huge,
negative, NaN, infinite, Unicode digits, a lone surrogate, a wrong type, a megabyte string);
``line_mutants`` puts one hostile line into a real strace log (the shapes of
bench/hostile_lines.py at up to 300 KB, a token of a real line replaced by a hostile number,
unbalanced brackets, quote floods). ``Outcome.cpu`` is the CPU time an input took, which
``check`` bounds (``cpu_limit``) besides the wall-clock hang guard. ``run_command(argv)`` runs
any command the same way (tests/typed_sweep.py and tests/fr_inputs.py use it).
"""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import random
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
# Exit statuses a verdict or a one-line error may give (README); anything else is a bug.
ALLOWED_EXITS = frozenset({0, 1, 3, 4, 5, 6, 7})


@dataclass
class Seed:
    name: str
    kind: str           # "log" (strace text) or "trace" (hangtrace trace)
    data: bytes         # uncompressed content
    gz: bool            # the original was gzip-compressed


@dataclass
class Mutant:
    seed: str
    kind: str
    data: bytes         # as written to disk (compressed when gz)
    how: List[str]


@dataclass
class Outcome:
    code: int
    stderr: str
    internal_error: bool
    hang: bool
    cpu: float = 0.0          # CPU seconds of this thread the command took


def corpus(max_bytes: int = 120_000) -> List[Seed]:
    """Every strace log under tests/data/strace and every trace under fixtures/ that is small
    enough to analyze many times in a test."""
    seeds: List[Seed] = []
    for p in sorted((REPO / "tests" / "data" / "strace").glob("*.log")):
        seeds.append(Seed(p.name, "log", p.read_bytes(), False))
    for p in sorted(list((REPO / "fixtures" / "traces").glob("*.htrace.gz"))
                    + list((REPO / "fixtures" / "gpu" / "traces").glob("*.htrace.gz"))):
        raw = p.read_bytes()
        if len(raw) <= max_bytes:
            seeds.append(Seed(p.name, "trace", gzip.decompress(raw), True))
    return seeds


# --------------------------------------------------------------------------- mutators
def _lines(data: bytes) -> List[bytes]:
    return data.split(b"\n")


def flip_bytes(rnd: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rnd.randint(1, 8)):
        if b:
            b[rnd.randrange(len(b))] = rnd.randrange(256)
    return bytes(b)


def cut(rnd: random.Random, data: bytes) -> bytes:
    return data[:rnd.randrange(len(data) + 1)]


def drop_or_dup_lines(rnd: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    for _ in range(rnd.randint(1, 5)):
        i = rnd.randrange(len(lines))
        op = rnd.choice(("drop", "dup", "swap"))
        if op == "drop" and len(lines) > 1:
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        else:
            j = rnd.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


def inflate_number(rnd: random.Random, data: bytes) -> bytes:
    """A number somewhere becomes 5,000 digits, a huge float, NaN or infinity."""
    import re
    spots = [m.span() for m in re.finditer(rb"-?\d+(?:\.\d+)?", data[:200_000])]
    if not spots:
        return data
    a, b = rnd.choice(spots)
    new = rnd.choice([b"9" * 5000, b"1" * 400 + b".5", b"1e999", b"-1e999", b"NaN",
                      b"Infinity", b"-0", b"18446744073709551617", b"0x" + b"f" * 40])
    return data[:a] + new + data[b:]


def garbage_lines(rnd: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    junk = [b"\x00" * rnd.randint(1, 50), b"[pid " + b"9" * 60 + b"] read(3, ",
            b"strace: Process " + b"7" * 4400 + b" attached", b"+++ exited with 99999999999 +++",
            b"--- SIGSEGV {si_signo=SIGSEGV, si_pid=" + b"1" * 30 + b"} ---",
            b"[\"sc\"," + b"[" * 5000 + b"]" * 5000 + b"]", b"{}", b"[]", b"null", b"[\"end\"]",
            bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 300))),
            b"x" * rnd.randint(1000, 200_000)]
    for _ in range(rnd.randint(1, 4)):
        lines.insert(rnd.randrange(len(lines) + 1), rnd.choice(junk))
    return b"\n".join(lines)


_JSON_ODD = [5, -1, 0, True, False, None, "x", "", [], {}, [[1, 2], [3]], {"a": 1}, 1e300,
             2 ** 70, [None] * 3, "\udcff"]


def retype_json(rnd: random.Random, data: bytes) -> bytes:
    """A JSON line of a trace (the header or a row) gets values of the wrong type."""
    lines = _lines(data)
    idx = [i for i, line in enumerate(lines) if line[:1] in (b"{", b"[")]
    if not idx:
        return data
    i = 0 if rnd.random() < 0.4 and idx[0] == 0 else rnd.choice(idx)
    try:
        doc = json.loads(lines[i])
    except ValueError:
        return data
    for _ in range(rnd.randint(1, 3)):
        if isinstance(doc, dict) and doc:
            key = rnd.choice(sorted(doc))
            if key == "processes" and isinstance(doc[key], list) and doc[key] \
                    and rnd.random() < 0.5:
                row = rnd.choice(doc[key])
                if isinstance(row, list) and len(row) > 1:
                    row[rnd.randrange(1, len(row))] = rnd.choice(_JSON_ODD)
            else:
                doc[key] = rnd.choice(_JSON_ODD)
        elif isinstance(doc, list) and doc:
            doc[rnd.randrange(len(doc))] = rnd.choice(_JSON_ODD)
    lines[i] = json.dumps(doc).encode("utf-8", "surrogateescape")
    return b"\n".join(lines)


MUTATORS: List[Tuple[str, Callable[[random.Random, bytes], bytes]]] = [
    ("flip", flip_bytes), ("cut", cut), ("lines", drop_or_dup_lines),
    ("number", inflate_number), ("garbage", garbage_lines), ("json", retype_json),
]


def mutate(rnd: random.Random, seed: Seed) -> Mutant:
    data = seed.data
    how = []
    for _ in range(rnd.randint(1, 3)):
        name, fn = rnd.choice(MUTATORS)
        if name == "json" and seed.kind != "trace":
            name, fn = "number", inflate_number
        data = fn(rnd, data)
        how.append(name)
    gz = seed.gz if rnd.random() < 0.8 else not seed.gz
    if gz:
        data = gzip.compress(data, compresslevel=1)
        if rnd.random() < 0.15:                     # a compressed file cut short
            data = data[:rnd.randrange(len(data) + 1)]
            how.append("gzip-cut")
    return Mutant(seed.name, seed.kind, data, how)


def mutants(seed: int, count: int, seeds: Optional[List[Seed]] = None) -> List[Mutant]:
    rnd = random.Random(seed)
    seeds = seeds or corpus()
    return [mutate(rnd, seeds[i % len(seeds)]) for i in range(count)]


# --------------------------------------------------------------------------- running
class _Hang(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _Hang()


def run_mutant(m: Mutant, time_limit: float = 20.0) -> Outcome:
    """The command a user would run on this input, in this process (module doc)."""
    with tempfile.TemporaryDirectory(prefix="hangtrace-fuzz-") as tmp:
        path = os.path.join(tmp, "input" + (".htrace" if m.kind == "trace" else ".log"))
        with open(path, "wb") as f:
            f.write(m.data)
        if m.kind == "trace":
            argv = ["analyze", path, "--json"]
        else:
            argv = ["import-strace", path, "-o", os.path.join(tmp, "out.htrace.gz"),
                    "--analyze", "--json"]
        return run_command(argv, time_limit)


def run_command(argv: List[str], time_limit: float = 20.0) -> Outcome:
    """``hangtrace ARGV`` in this process, as cli.entry would run it: its Outcome (an
    exception that reaches the CLI's last line of defence is an internal error; over
    ``time_limit`` seconds of wall-clock time, a hang)."""
    from tracer.cli import commands as cli
    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, time_limit)
    internal = hang = False
    cpu0 = time.thread_time()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.run(argv)
            except _Hang:
                raise
            except Exception as exc:   # what cli.entry would call an internal error
                internal = True
                code = 1
                err.write(f"internal error: {type(exc).__name__}: {exc}\n")
    except _Hang:
        hang, code = True, -1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    cpu = time.thread_time() - cpu0
    return Outcome(code, err.getvalue(), internal, hang, cpu)


def check(m: Mutant, o: Outcome, cpu_limit: float = 0.0) -> Optional[str]:
    """None when the outcome is acceptable, else why not (one line). ``cpu_limit``: the CPU
    seconds an input may take (0: no bound; the wall-clock ``time_limit`` only bounds hangs)."""
    if o.hang:
        return "hang"
    if cpu_limit and o.cpu > cpu_limit:
        return f"took {o.cpu:.1f} s of CPU (bound {cpu_limit:g} s)"
    if o.internal_error:
        return o.stderr.strip().splitlines()[-1]
    if o.code not in ALLOWED_EXITS:
        return f"exit status {o.code}"
    if o.code == 1:
        lines = o.stderr.strip().splitlines()
        if not lines or not lines[-1].startswith("hangtrace: ") or "Traceback" in o.stderr:
            return f"error without one clear line: {o.stderr[-300:]!r}"
    return None


# --------------------------------------------------------------------------- one field
# JSON texts put in place of one field: each as raw text (a 4,400-digit integer cannot be
# made by json.dumps, nor NaN by strict writers).
HOSTILE_FIELDS: List[Tuple[str, str]] = [
    ("huge", "1" + "0" * 4400), ("2**1100", str(2 ** 1100)), ("2**64", str(2 ** 64)),
    ("-2**63-1", str(-2 ** 63 - 1)), ("negative", "-1"), ("-2**31", str(-2 ** 31)),
    ("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("1e400", "1e400"),
    ("1e29", "1e29"), ("float", "1.5"), ("unicode-digits", '"\u00b25"'),
    ("arabic-digit", '"\u0663"'), ("surrogate", r'"w\udcff"'), ("high-surrogate", r'"\ud800"'),
    ("bad-utf8", '"w\udcff"'),         # written with surrogateescape: the byte 0xff
    ("megabyte", '"' + "x" * 1_000_000 + '"'), ("empty", '""'), ("null", "null"),
    ("true", "true"), ("list", "[]"), ("list-of-lists", "[[1,2],[3]]"), ("dict", "{}"),
    ("dict-of-lists", '{"a":[1]}'), ("nested", "[" * 200 + "]" * 200),
    ("hex-text", '"0x' + "f" * 40 + '"'), ("enum", '"not-a-kind"'), ("int-list", "[1,2,3]"),
]
_MARK = "\u0000hangtrace-field\u0000"


def _with_field(doc: object, path: Tuple[object, ...], raw: str) -> str:
    """``doc`` as JSON with the value at ``path`` replaced by the raw JSON text ``raw``."""
    parent = doc
    for key in path[:-1]:
        parent = parent[key]  # type: ignore[index]
    parent[path[-1]] = _MARK  # type: ignore[index]
    return json.dumps(doc, separators=(",", ":")).replace(json.dumps(_MARK), raw, 1)


def _field_paths(doc: object, header: bool) -> List[Tuple[object, ...]]:
    """Where one field can be changed: every field of an event row (not its tag); for the
    header, every value and every field of its process rows."""
    if isinstance(doc, list):
        return [(i,) for i in range(1, len(doc))]
    if not isinstance(doc, dict) or not header:
        return []
    paths: List[Tuple[object, ...]] = [(k,) for k in sorted(doc) if k != "magic"]
    for i, row in enumerate(doc.get("processes") or []):
        if isinstance(row, list):
            paths += [("processes", i, j) for j in range(1, len(row))]
    return paths


def field_mutants(seed: int, count: int, seeds: Optional[List[Seed]] = None) -> List[Mutant]:
    """``count`` traces, each a real one with one field of one row changed (module doc)."""
    rnd = random.Random(seed)
    traces = [s for s in (seeds or corpus()) if s.kind == "trace"]
    out = []
    for k in range(count):
        seed_ = traces[k % len(traces)]
        lines = seed_.data.split(b"\n")
        i = 0 if rnd.random() < 0.3 else rnd.randrange(len(lines))
        try:
            doc = json.loads(lines[i])
        except ValueError:
            i, doc = 0, json.loads(lines[0])
        paths = _field_paths(doc, header=i == 0)
        if not paths:
            i, doc = 0, json.loads(lines[0])
            paths = _field_paths(doc, header=True)
        path = rnd.choice(paths)
        name, raw = rnd.choice(HOSTILE_FIELDS)
        lines[i] = _with_field(doc, path, raw).encode("utf-8", "surrogateescape")
        data = b"\n".join(lines)
        out.append(Mutant(seed_.name, "trace", gzip.compress(data, compresslevel=1),
                          [f"row {i} field {'/'.join(map(str, path))} = {name}"]))
    return out


# --------------------------------------------------------------------------- one line
_HOSTILE_TOKENS = ["\u00b25", "3\u00b9540", "\u0663", "9" * 5000, "-1", "1e999", "nan",
                   "0x" + "f" * 40, "", "+5", "1_000", "\udcff"]


def _hostile_line(rnd: random.Random, real: List[str]) -> str:
    import sys
    sys.path.insert(0, str(REPO / "bench"))
    from hostile_lines import hostile_lines  # bench/hostile_lines.py
    kind = rnd.randrange(4)
    if kind == 0:                          # a shape of the benchmark, up to 300 KB
        shapes = hostile_lines(rnd.choice([100, 3000, 30_000, 300_000]))
        return shapes[rnd.choice(sorted(shapes))]
    line = rnd.choice([x for x in real if x.strip()] or ["1 getpid() = 1"])
    if kind == 1:                          # one token of a real line made hostile
        tokens = line.split(" ")
        tokens[rnd.randrange(len(tokens))] = rnd.choice(_HOSTILE_TOKENS)
        return " ".join(tokens)
    if kind == 2:                          # unbalanced brackets inside the arguments
        k = line.find("(") + 1 or len(line) // 2
        return line[:k] + rnd.choice("<[{(\"") * rnd.randint(1, 100_000) + line[k:]
    k = line.find('"') + 1 or len(line) // 2  # a quote flood, closed or not
    return line[:k] + rnd.choice(['\\"', '"', '\\']) * rnd.randint(1, 100_000) + line[k:]


def line_mutants(seed: int, count: int, seeds: Optional[List[Seed]] = None) -> List[Mutant]:
    """``count`` strace logs, each a real one with one hostile line put in (module doc)."""
    rnd = random.Random(seed)
    logs = [s for s in (seeds or corpus()) if s.kind == "log"]
    out = []
    for k in range(count):
        seed_ = logs[k % len(logs)]
        lines = seed_.data.decode("utf-8", "surrogateescape").split("\n")
        bad = _hostile_line(rnd, lines)
        i = rnd.randrange(len(lines) + 1)
        lines.insert(i, bad)
        data = "\n".join(lines).encode("utf-8", "surrogateescape")
        out.append(Mutant(seed_.name, "log", data, [f"line {i}: {bad[:60]!r} ({len(bad)} B)"]))
    return out
