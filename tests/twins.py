"""Differential fuzzing of the compiled helpers against their pure-Python twins (issue 22
item 3): random strace blocks and mutated blocks of the real logs (tests/data/strace/*.log,
fixtures/gpu-h200/*.strace.gz), read both ways.

- ``blocks(seed, count)``: the inputs, bytes of whole lines. Half are random lines from the
  shapes the first pass and the parser care about (pid columns, ``[pid N]``, timestamps,
  ``strace -n`` numbers, clone/fork/getpid/gettid/tgkill results, ``Process N attached``
  after any prefix, unfinished/resumed halves, markers, odd digits such as ``²``); half are
  runs of real lines with one to three mutations each (a prefix form swapped, a line
  duplicated, cut or dropped, a digit made Unicode, a message inserted after a pid column).
- ``line_diffs(block, fast)``: the lines whose ``split_line`` differs between the C helper
  and ``py_split_line``; ``membership(block, scan_block)``: what the first pass decides
  (LogFacts and its Membership) with a given block scanner. Both run in this process.
- ``outcome(block)``: the whole import and analysis of the block as a log (the trace rows'
  digest, the verdict, the rule, the root cause, each process's verdict), or its one-line
  error: run once here and once in a child with HANGTRACE_PURE=1, they must be equal.
tests/unit/test_twins_fuzz.py runs a fixed seed in CI; scripts/fuzz.py --twins runs more.
"""
from __future__ import annotations

import gzip
import hashlib
import os
import random
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Optional

REPO = Path(__file__).resolve().parent.parent
ODD_DIGITS = "²³¹٣０"


def real_lines() -> List[str]:
    out: List[str] = []
    for p in sorted((REPO / "tests" / "data" / "strace").glob("*.log")):
        out.extend(p.read_text(errors="surrogateescape").splitlines())
    for p in sorted((REPO / "fixtures" / "gpu-h200").glob("*.strace.gz")):
        with gzip.open(p, "rt", errors="surrogateescape") as f:
            out.extend(f.read().splitlines())
    return out


_CALLS = ["clone(child_stack=NULL, flags=CLONE_VM|CLONE_THREAD) = {child}",
          "clone3({{flags=CLONE_VM, exit_signal=0}}, 88) = {child}", "fork() = {child}",
          "vfork() = {child}", "getpid() = {pid}", "gettid() = {tid}",
          "set_tid_address(0x7f00) = {tid}", "tgkill({pid}, {tid}, SIGTERM) = 0",
          "read(3<pipe:[{n}]>, \"x\", 1) = 1", "futex(0x7f{n}, FUTEX_WAIT_PRIVATE, 0, NULL",
          "write(1<pipe:[{n}]>, \"a\\\"b\", 3) = 3", "poll([{{fd=4<socket:[{n}]>, "
          "events=POLLIN}}], 1, 100) = 0 (Timeout)", "exit_group(0) = ?",
          "execve(\"/bin/x\", [\"x\", \"--port\", \"{odd}\"], 0x7ffd /* 3 vars */) = 0"]


def _random_line(rnd: random.Random) -> str:
    pid, tid, child = (rnd.choice([rnd.randint(1, 99), rnd.randint(100, 4194304)])
                       for _ in range(3))
    n = rnd.randint(1, 99999)
    odd = rnd.choice(ODD_DIGITS) + str(rnd.randint(0, 9))
    prefix = rnd.choice(["", f"{tid} ", f"{tid}  ", f"[pid {tid}] ", f"[pid  {tid}] ",
                         f"{odd} ", f"[pid {odd}] ", f"{tid}{odd} "])
    stamp = rnd.choice(["", "1795953170.545572 ", "10:11:12 ", "10:11:12.123456 ",
                        "1e5 ", f"1795953170.5{odd} ", "0.000123 "])
    nr = rnd.choice(["", "", "[ 257] ", f"[ {odd}] "])
    body = rnd.choice(
        [c.format(pid=pid, tid=tid, child=child, n=n, odd=odd) for c in _CALLS]
        + [f"Process {tid} attached", f"strace: Process {pid} attached",
           f"strace: Process {odd} attached", f"Process {tid} detached",
           f"<... futex resumed>) = 0", f"+++ exited with {rnd.randint(0, 255)} +++",
           f"+++ exited with {odd} +++", "+++ killed by SIGKILL +++",
           f"--- SIGCHLD {{si_signo=SIGCHLD, si_pid={rnd.choice([str(child), odd])}}} ---",
           "[ Process PID=12 runs in 32 bit mode. ]", "garbage ( = ) <"])
    tail = rnd.choice(["", "", " <0.000011>", " <unfinished ...>", f" <{odd}>"])
    return prefix + stamp + nr + body + tail


def _mutate(rnd: random.Random, lines: List[str]) -> List[str]:
    lines = list(lines)
    for _ in range(rnd.randint(1, 3)):
        i = rnd.randrange(len(lines))
        line = lines[i]
        op = rnd.randrange(7)
        if op == 0:                       # pid column <-> [pid N]
            head, _, rest = line.partition(" ")
            lines[i] = (f"[pid {head}] {rest.lstrip()}" if head.isdigit()
                        else line.replace("[pid ", "", 1).replace("]", "", 1))
        elif op == 1:
            lines.insert(i, line)
        elif op == 2 and len(lines) > 1:
            del lines[i]
        elif op == 3:
            lines[i] = line[:rnd.randrange(len(line) + 1)]
        elif op == 4:                     # a digit made Unicode
            digits = [k for k, c in enumerate(line) if c.isdigit()]
            if digits:
                k = rnd.choice(digits)
                lines[i] = line[:k] + rnd.choice(ODD_DIGITS) + line[k + 1:]
        elif op == 5:                     # strace's own message after the line's prefix
            head = line.split(" ", 1)[0]
            lines.insert(i, f"{head} Process {rnd.randint(1, 99999)} attached")
        else:
            lines.insert(i, _random_line(rnd))
    return lines


def blocks(seed: int, count: int) -> List[bytes]:
    """The inputs (module doc), each a block of whole lines."""
    rnd = random.Random(seed)
    real = real_lines()
    out = []
    for k in range(count):
        if k % 2 == 0:
            lines = [_random_line(rnd) for _ in range(rnd.randint(1, 12))]
        else:
            start = rnd.randrange(len(real))
            lines = _mutate(rnd, real[start:start + rnd.randint(2, 40)] or real[:5])
        out.append(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
    return out


def line_diffs(block: bytes, fast) -> List[str]:
    """The lines of ``block`` that the compiled split_line reads otherwise than Python."""
    from tracer.strace.lines import py_split_line
    fast.set_fallback("split_line", py_split_line)
    out = []
    for line in block.decode("utf-8", "surrogateescape").split("\n"):
        if fast.split_line(line) != py_split_line(line):
            out.append(line)
    return out


def membership(block: bytes, scan_block: Optional[Callable] = None) -> Dict[str, object]:
    """What the first pass decides about ``block`` (scan.LogScan, with ``scan_block`` as the
    block scanner: the compiled one by default)."""
    from tracer.strace import scan
    saved = scan._scan_block
    if scan_block is not None:
        scan._scan_block = scan_block
    try:
        s = scan.LogScan()
        s.feed(block)
    finally:
        scan._scan_block = saved
    f, m = s.facts, s.facts.membership()
    return {"lines": f.lines, "tid_lines": dict(f.tid_lines), "children": sorted(f.children),
            "evidence": dict(sorted(f.evidence.items())), "attached": f.attached,
            "unprefixed": f.unprefixed, "unprefixed_self": f.unprefixed_self,
            "pid_of": dict(sorted(m.pid_of.items())), "alone": sorted(m.alone),
            "root_pid": m.root_pid}


def outcome(block: bytes) -> Dict[str, object]:
    """The import and analysis of ``block`` as a log (module doc)."""
    from tracer.load.trace import analyze_trace
    from tracer.errors import HangtraceError
    from tracer.strace.importer import import_strace
    with tempfile.TemporaryDirectory(prefix="hangtrace-twins-") as tmp:
        log, out = os.path.join(tmp, "b.log"), os.path.join(tmp, "b.htrace")
        with open(log, "wb") as f:
            f.write(block)
        try:
            res = import_strace(log, out)
            r = analyze_trace(out)
        except HangtraceError as e:
            return {"error": str(e).replace(tmp, "TMP")}
        with open(out, "rb") as f:
            rows = f.read().split(b"\n", 1)[1]          # the header names the host: not it
        return {"events": res.events, "unparsed": res.unparsed,
                "rows": hashlib.sha1(rows).hexdigest(), "verdict": r.verdict, "rule": r.rule,
                "root": [r.root_cause.get("pid"), r.root_cause.get("tid")],
                "processes": sorted([p.pid, p.verdict] for p in r.processes)}


def outcomes(seed: int, count: int) -> List[Dict[str, object]]:
    return [outcome(b) for b in blocks(seed, count)]
