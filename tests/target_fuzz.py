"""Targeted fuzzing of what a traced process controls (issue 46, its Proof: ELF, AST, RAS text,
process titles, fd numbers), each case one damage of one kind, so that a failure names it.

- ``elf``: a real shared object (fixtures/scenarios/lib/fake_libcuda.c built with gcc, else a
  synthetic one) and tests/hostile_elf.py's, one thing damaged: an ELF header field (the
  extended numbering of section 0 too), a section header's field, a symbol's field, a string
  table's NULs overwritten, the file cut. Read as attach and the end probes read a library
  (linux/elfsyms, probe_sites, probes/elfsyms' pyelftools path, evidence/elfver).
- ``source``: Python sources with CUDA graph ``with`` blocks, damaged (line ends ast does not
  count, non-ASCII columns, deep nesting, long lines, NUL): capture.graph_with_blocks must not
  raise, and each segment it cuts equals ``ast.get_source_segment``'s.
- ``ras``: the real RAS answers (tests/data/nccl_ras), JSON and text, a value or a line
  damaged (huge numbers, Unicode digits, wrong types): parse_ras and the facts read from it.
- ``title``: process titles, comms and environment ranks (huge and odd digits), through
  role_of, role_labels, label_ranges and pid_runs.
- ``fd``: strace lines whose fd, return value, pid, address or size is a hostile integer,
  through ``hangtrace import-strace --analyze`` (fuzzing.run_command and fuzzing.check).
``cases(kind, seed, count)`` -> [(what, data)]; ``run_case(kind, data)`` -> (why it failed or
None, CPU seconds). An exception a contract does not name is a failure (an internal error).
"""
from __future__ import annotations

import ast
import json
import os
import random
import shutil
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import fuzzing
from hostile_elf import named_symbol_bomb, section_count_bomb, symbol_bomb

REPO = Path(__file__).resolve().parent.parent
RAS_DIR = REPO / "tests" / "data" / "nccl_ras"
KINDS = ("elf", "source", "ras", "title", "fd")
Case = Tuple[str, bytes]

# --------------------------------------------------------------------------- numbers
HUGE_DIGITS = "1" * 5000


def _hostile_ints(width: int, size: int = 0) -> List[int]:
    """Values for an unsigned field of ``width`` bytes (``size``: the file's length)."""
    top = (1 << (8 * width)) - 1
    out = [0, 1, 2, top, top - 1, 1 << (8 * width - 1), 0xFFFF & top, 0xFF00 & top, 64, 24]
    if size:
        out += [size & top, (size - 1) & top, (size + 1) & top, (size // 2) & top]
    return out


# --------------------------------------------------------------------------- ELF
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM_SIZE = 24
# (name, offset, width) of the ELF64 header's fields
_EHDR_FIELDS = [("e_type", 16, 2), ("e_phoff", 32, 8), ("e_shoff", 40, 8), ("e_ehsize", 52, 2),
                ("e_phentsize", 54, 2), ("e_phnum", 56, 2), ("e_shentsize", 58, 2),
                ("e_shnum", 60, 2), ("e_shstrndx", 62, 2), ("ei_class", 4, 1),
                ("ei_data", 5, 1)]
_SHDR_FIELDS = [("sh_name", 0, 4), ("sh_type", 4, 4), ("sh_addr", 16, 8), ("sh_offset", 24, 8),
                ("sh_size", 32, 8), ("sh_link", 40, 4), ("sh_info", 44, 4),
                ("sh_entsize", 56, 8)]
_SYM_FIELDS = [("st_name", 0, 4), ("st_info", 4, 1), ("st_shndx", 6, 2), ("st_value", 8, 8),
               ("st_size", 16, 8)]
_BASES: Dict[str, bytes] = {}


def _real_library() -> Optional[bytes]:
    """fixtures/scenarios/lib/fake_libcuda.c built once (gcc), or None without gcc."""
    if shutil.which("gcc") is None:
        return None
    src = REPO / "fixtures" / "scenarios" / "lib" / "fake_libcuda.c"
    with tempfile.TemporaryDirectory(prefix="hangtrace-elf-fuzz-") as tmp:
        out = os.path.join(tmp, "libcuda.so.1")
        p = subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", out, str(src)],
                           capture_output=True)
        return Path(out).read_bytes() if p.returncode == 0 else None


def elf_bases() -> Dict[str, bytes]:
    if not _BASES:
        real = _real_library()
        if real is not None:
            _BASES["fake_libcuda"] = real
        _BASES["named_bomb"] = named_symbol_bomb(64)
        _BASES["nul_less"] = symbol_bomb(16, 8192)
        _BASES["sections_2**40"] = section_count_bomb(1 << 40)
    return _BASES


def _sections(data: bytes) -> List[Tuple[int, Tuple[int, ...]]]:
    """(header offset, fields) of each section header that lies inside ``data``."""
    if len(data) < 64:
        return []
    shoff, = struct.unpack_from("<Q", data, 40)
    shnum, = struct.unpack_from("<H", data, 60)
    out = []
    for i in range(min(shnum, 64)):
        at = shoff + i * _SHDR.size
        if at + _SHDR.size <= len(data):
            out.append((at, _SHDR.unpack_from(data, at)))
    return out


def _put(data: bytearray, at: int, width: int, value: int) -> None:
    if 0 <= at and at + width <= len(data):
        data[at:at + width] = (value & ((1 << 8 * width) - 1)).to_bytes(width, "little")


def _elf_damage(rnd: random.Random, base: bytes) -> Tuple[str, bytes]:
    data = bytearray(base)
    sections = _sections(base)
    how = rnd.choice(["ehdr", "ehdr", "shdr", "shdr", "sym", "sym", "strtab", "extended", "cut"])
    if how == "shdr" and sections:
        at, _ = rnd.choice(sections)
        name, off, width = rnd.choice(_SHDR_FIELDS)
        value = rnd.choice(_hostile_ints(width, len(base)))
        _put(data, at + off, width, value)
        return f"section header {name}={value}", bytes(data)
    symtabs = [f for _, f in sections if f[1] in (2, 11) and f[4] + f[5] <= len(base)]
    if how == "sym" and symtabs:
        sh = rnd.choice(symtabs)
        n = max(sh[5] // _SYM_SIZE, 1)
        at = sh[4] + _SYM_SIZE * rnd.randrange(n)
        name, off, width = rnd.choice(_SYM_FIELDS)
        value = rnd.choice(_hostile_ints(width, len(base)) + [0x12, 0x1A, 0xFFF1])
        _put(data, at + off, width, value)
        return f"symbol {name}={value}", bytes(data)
    strtabs = [f for _, f in sections if f[1] == 3 and f[4] + f[5] <= len(base)]
    if how == "strtab" and strtabs:
        sh = rnd.choice(strtabs)
        lo = sh[4] + rnd.randrange(max(sh[5], 1))
        hi = min(sh[4] + sh[5], lo + rnd.choice([16, 256, 1 << 20]))
        data[lo:hi] = data[lo:hi].replace(b"\0", b"A")
        return f"string table NULs {lo}-{hi} overwritten", bytes(data)
    if how == "extended" and sections:
        at, _ = sections[0]
        field = rnd.choice([("e_shnum", 60, 32), ("e_shstrndx", 62, 40), ("e_phnum", 56, 44)])
        _put(data, field[1], 2, 0 if field[0] == "e_shnum" else 0xFFFF)
        value = rnd.choice(_hostile_ints(8 if field[2] == 32 else 4, len(base)))
        _put(data, at + field[2], 8 if field[2] == 32 else 4, value)
        return f"extended numbering {field[0]} from section 0: {value}", bytes(data)
    if how == "cut":
        n = rnd.randrange(len(base))
        return f"cut at {n} of {len(base)}", bytes(data[:n])
    name, off, width = rnd.choice(_EHDR_FIELDS)
    value = rnd.choice(_hostile_ints(width, len(base)))
    _put(data, off, width, value)
    return f"ELF header {name}={value}", bytes(data)


def _elf_cases(rnd: random.Random, count: int) -> List[Case]:
    bases = elf_bases()
    out = []
    for _ in range(count):
        name = rnd.choice(sorted(bases))
        how, data = _elf_damage(rnd, bases[name])
        out.append((f"{name}: {how}", data))
    return out


_CACHE_DIR: List[str] = []


def _symbol_cache() -> str:
    """A symbol cache of the fuzz run's own (linux/symcache.py): each library is read, then
    read again from its cache entry; the user's cache is never touched."""
    if not _CACHE_DIR:
        _CACHE_DIR.append(tempfile.mkdtemp(prefix="hangtrace-elf-fuzz-cache-"))
    return _CACHE_DIR[0]


def _run_elf(data: bytes) -> Optional[str]:
    os.environ["HANGTRACE_SYMBOL_CACHE"] = _symbol_cache()
    from tracer.linux.elfsyms import function_symbols, section_headers_problem
    from tracer.record.backends.ebpf.cuda_uprobes import NCCL_FAMILIES, probe_sites
    from tracer.record.evidence import elfver
    from tracer.record.probes import elfsyms as probe_elfsyms
    with tempfile.TemporaryDirectory(prefix="hangtrace-elf-fuzz-") as tmp:
        path = os.path.join(tmp, "libcuda.so.1")
        with open(path, "wb") as f:
            f.write(data)
        for read in (function_symbols, function_symbols, probe_sites,
                     lambda p: probe_sites(p, NCCL_FAMILIES)):
            try:
                read(path)
            except (ValueError, OSError):      # the contract's refusals: a 'not read' note
                pass
        with open(path, "rb") as f:
            problem = section_headers_problem(f)
        if problem is not None and not isinstance(problem, str):
            return f"section_headers_problem gave {problem!r}"
        probe_elfsyms._CACHE.clear()
        table = probe_elfsyms.symbols(path)
        if len(table.starts) != len(table.names):
            return "a symbol table of unequal columns"
        elfver.section_search(path, ".rodata", elfver.NCCL_RE)
    return None


# --------------------------------------------------------------------------- sources
_SOURCE = '''import torch
from torch.cuda import graph


class Runner:
    def capture(self, bs):
        with graph_capture() as ctx:
            for b in bs:
                with torch.cuda.graph(self.graphs[b], pool=self.pool, stream=ctx.stream):
                    out = self.model(b)
                    é = "ünïcödé"; out = out + 1
        with (torch.cuda.graph(g1),
              other()):
            pass

    async def more(self):
        async with graph(self.g) as a, nothing():
            await a
'''
_LINE_ENDS = ["\r\n", "\r", "\f\n", "\v", "\x85", "\u2028", "\n\n", "\\\n"]
_SOURCE_DAMAGE: List[Tuple[str, Callable[[random.Random, str], str]]] = [
    ("line ends", lambda r, s: s.replace("\n", r.choice(_LINE_ENDS))),
    ("one line end", lambda r, s: _at_random_line(r, s, lambda ln: ln + r.choice(_LINE_ENDS))),
    ("non-ASCII before a with", lambda r, s: s.replace(
        "with torch", "x = '\U0001F600\u00e9\u4e2d'; with torch", 1)),
    ("tabs", lambda r, s: s.replace("    ", "\t")),
    ("a long line", lambda r, s: _at_random_line(r, s, lambda ln: ln + "#" + "x" * 200_000)),
    ("NUL", lambda r, s: _at_random_line(r, s, lambda ln: ln + "\0")),
    ("deep unary", lambda r, s: s + "\ny = " + "-" * r.choice([1000, 100_000]) + "1\n"),
    ("deep attribute", lambda r, s: s + "\ny = x" + ".a" * r.choice([1000, 200_000]) + "\n"),
    ("deep calls", lambda r, s: s + "\ny = f" + "()" * r.choice([1000, 100_000]) + "\n"),
    ("deep brackets", lambda r, s: s + "\ny = " + "[" * 300 + "]" * 300 + "\n"),
    ("nested withs", lambda r, s: s + "".join(" " * i + "with graph(g):\n"
                                              for i in range(r.choice([20, 150]))) + " " * 150
     + "pass\n"),
    ("many withs", lambda r, s: s + "with graph(g):\n    pass\n" * r.choice([100, 3000])),
    ("cut", lambda r, s: s[:r.randrange(len(s))]),
    ("bytes flipped", lambda r, s: "".join(chr(r.randrange(32, 0x3000)) if r.random() < 0.02
                                           else c for c in s)),
    ("BOM and coding", lambda r, s: "\ufeff# -*- coding: latin-1 -*-\n" + s),
    ("with on one line", lambda r, s: s + "with graph(g): x = 1; y = 2\n"),
]


def _at_random_line(rnd: random.Random, s: str, change: Callable[[str], str]) -> str:
    lines = s.split("\n")
    i = rnd.randrange(len(lines))
    lines[i] = change(lines[i])
    return "\n".join(lines)


def _source_cases(rnd: random.Random, count: int) -> List[Case]:
    out = []
    for _ in range(count):
        s, hows = _SOURCE, []
        for _ in range(rnd.choice([1, 1, 2])):
            name, damage = rnd.choice(_SOURCE_DAMAGE)
            s, hows = damage(rnd, s), hows + [name]
        out.append(("; ".join(hows), s.encode("utf-8", "surrogatepass")))
    return out


def _run_source(data: bytes) -> Optional[str]:
    from tracer.record.evidence import capture
    text = data.decode("utf-8", "replace")         # as the probe decodes what it read
    capture.graph_with_blocks(text)
    try:                                           # the oracle: ast's own segments
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines = capture.source_lines(text)
    withs = [n for n in ast.walk(tree) if isinstance(n, (ast.With, ast.AsyncWith))]
    for node in withs[:50]:             # get_source_segment splits the source per call
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                mine = capture.source_segment(lines, item.context_expr)
                theirs = ast.get_source_segment(text, item.context_expr) or ""
                if mine != theirs:
                    return f"segment {mine[:60]!r} where ast gives {theirs[:60]!r}"
    return None


# --------------------------------------------------------------------------- RAS
_RAS_VALUES = [HUGE_DIGITS, "-" + HUGE_DIGITS, str(2 ** 64), "-1", "1e400", "NaN", '"\u00b2"',
               '"\u0663"', "null", "[]", "{}", '"' + "x" * 100_000 + '"', "true", "1.5"]


def _ras_cases(rnd: random.Random, count: int) -> List[Case]:
    answers = sorted(RAS_DIR.glob("*.json")) + sorted(RAS_DIR.glob("*.text"))
    out = []
    for _ in range(count):
        path = rnd.choice(answers)
        text = path.read_text()
        fmt = "json" if path.suffix == ".json" else "text"
        how, text = _ras_damage(rnd, text, fmt)
        out.append((f"{path.name}: {how}", (fmt + "\n" + text).encode()))
    return out


def _ras_damage(rnd: random.Random, text: str, fmt: str) -> Tuple[str, str]:
    import re
    numbers = list(re.finditer(r"-?\d+", text))
    kind = rnd.choice(["number", "number", "value", "line", "lines", "cut", "repeat"])
    if kind == "number" and numbers:
        m = rnd.choice(numbers)
        value = rnd.choice([HUGE_DIGITS, str(2 ** 63), str(2 ** 64), "-" + HUGE_DIGITS,
                            "\u00b2", "\u0663", "0" * 400 + "7", "99999999999"])
        return f"number {m.group(0)} -> {value[:12]}", text[:m.start()] + value + text[m.end():]
    if kind == "value" and fmt == "json":
        keys = list(re.finditer(r'"(\w+)":\s*', text))
        if keys:
            k = rnd.choice(keys)
            rest = text[k.end():]
            end = re.match(r'"[^"]*"|-?[\d.eE+]+|true|false|null', rest)
            if end:
                value = rnd.choice(_RAS_VALUES)
                return (f"{k.group(1)} -> {value[:12]}",
                        text[:k.end()] + value + rest[end.end():])
    lines = text.split("\n")
    if kind == "line":
        i = rnd.randrange(len(lines))
        lines[i] = rnd.choice(["", "x" * 100_000, lines[i] * 50, "Rank " + HUGE_DIGITS,
                               "  " + "\u00b2" * 40, lines[i].replace(" ", "")])
        return f"line {i} replaced", "\n".join(lines)
    if kind == "lines":
        i = rnd.randrange(len(lines))
        return f"line {i} repeated 20,000 times", "\n".join(lines[:i] + [lines[i]] * 20_000
                                                           + lines[i:])
    if kind == "repeat":
        return "the answer twice", text + text
    return "cut", text[:rnd.randrange(len(text) + 1)]


def _run_ras(data: bytes) -> Optional[str]:
    from tracer.analysis.job.nccl_ras import lagging_ranks, missing_ranks, parse_ras, rank_of_pid
    fmt, _, text = data.decode().partition("\n")
    for f in (fmt, "text" if fmt == "json" else "json"):
        st = parse_ras(text, f)
        if st is not None:
            lagging_ranks(st)
            missing_ranks(st)
            rank_of_pid(st)
    return None


# --------------------------------------------------------------------------- titles
_TITLES = ["sglang::scheduler_TP{n}", "sglang::scheduler_DP{n}_TP{n}", "vllm::worker_TP{n}_EP{n}",
           "python -m sglang.launch_server --tp {n}", "VllmWorker TP{n}", "ray::RayWorker_TP{n}",
           "sglang::scheduler_TP{n}_PP{n}", "sglang::detokenizer", "enginecore_{n}"]
_DIGITS = [HUGE_DIGITS, "0" * 4400 + "3", "\u00b2", "\u0663", "\u0663\u0664", "-1", "99999999999",
           "2" * 10, "\uff11", "", " 7", "7\0", "1_000", "0x1f", "\U0001D7D9"]


def _title_cases(rnd: random.Random, count: int) -> List[Case]:
    out = []
    for _ in range(count):
        title = rnd.choice(_TITLES).replace("{n}", "%s")
        digits = tuple(rnd.choice(_DIGITS) for _ in range(title.count("%s")))
        title = title % digits
        rank = rnd.choice(["RANK=" + rnd.choice(_DIGITS), "LOCAL_RANK=" + rnd.choice(_DIGITS),
                           rnd.choice(_DIGITS), "RANK=3 LOCAL_RANK=" + rnd.choice(_DIGITS), ""])
        doc = {"title": title, "comm": title[:15], "environ_rank": rank,
               "argv": [title] + rnd.choice([[], ["--tp", rnd.choice(_DIGITS)]])}
        out.append((f"{title[:40]!r} {rank[:20]!r}", json.dumps(doc).encode()))
    return out


def _run_title(data: bytes) -> Optional[str]:
    from tracer.analysis.job.roles import parse_environ_rank, role_labels, role_of
    from tracer.events import ProcessInfo
    from tracer.render.fold import label_ranges, pid_runs
    doc = json.loads(data)
    role = role_of(doc["argv"], doc["comm"], has_children=True, environ_rank=doc["environ_rank"])
    parse_environ_rank(doc["environ_rank"])
    infos = [ProcessInfo(ts=0.0, pid=100 + i, ppid=99, comm=doc["comm"], cmdline=doc["argv"],
                         environ_rank=doc["environ_rank"]) for i in range(3)]
    labels = list(role_labels(infos, [99]).values())
    label_ranges(labels + [role.label, doc["title"]])
    pid_runs(", ".join(f"pid {d}" for d in (doc["title"][-20:], "1", "2", "3")))
    return None


# --------------------------------------------------------------------------- fd numbers
_LINES = [
    "{pid} 1700000000.000100 write({fd}, \"\", {size}) = {ret} <0.000010>",
    "{pid} 1700000000.000200 read({fd}<socket:[{inode}]>, \"\", {size}) = {ret} <0.000020>",
    "{pid} 1700000000.000300 epoll_wait({fd}, [], {size}, {ret}) = 0 <0.000030>",
    "{pid} 1700000000.000400 close({fd}) = {ret} <0.000005>",
    "{pid} 1700000000.000500 ioctl({fd}</dev/nvidiactl>, _IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2a,"
    " 0x20), {addr}) = {ret} <0.000040>",
    "{pid} 1700000000.000600 futex({addr}, FUTEX_WAIT_PRIVATE, {size}, NULL <unfinished ...>",
    "{pid} 1700000000.000700 dup2({fd}, {fd}) = {ret} <0.000002>",
    "{pid} 1700000000.000800 eventfd2({size}, EFD_CLOEXEC) = {ret}<anon_inode:[eventfd]> "
    "<0.000003>",
    "{pid} 1700000000.000900 clone(child_stack=NULL, flags=CLONE_VM) = {ret} <0.000100>",
    "{pid} 1700000000.001000 poll([{{fd={fd}, events=POLLIN}}], 1, {ret}) = 1 "
    "([{{fd={fd}, revents=POLLIN}}]) <0.000050>",
]
_INTS = ["3", str(2 ** 31), str(2 ** 32), str(2 ** 63 - 1), str(2 ** 63), str(2 ** 64),
         "-1", "-" + str(2 ** 63), HUGE_DIGITS, "0" * 300 + "5", "99999999999999999999",
         "0x" + "f" * 40, "-0", "+7", "\u00b2", "1e400"]


def _fd_cases(rnd: random.Random, count: int) -> List[Case]:
    out = []
    for _ in range(count):
        lines = []
        for _ in range(rnd.choice([1, 3, 6])):
            fields = {k: rnd.choice(_INTS) if rnd.random() < 0.5 else v for k, v in
                      (("pid", "4242"), ("fd", "7"), ("size", "64"), ("ret", "8"),
                       ("inode", "12345"), ("addr", "0x7f00deadbe00"))}
            lines.append(rnd.choice(_LINES).format(**fields))
        out.append(("; ".join(ln[:60] for ln in lines), ("\n".join(lines) + "\n").encode()))
    return out


def _run_fd(data: bytes) -> Optional[str]:
    with tempfile.TemporaryDirectory(prefix="hangtrace-fd-fuzz-") as tmp:
        path = os.path.join(tmp, "input.log")
        with open(path, "wb") as f:
            f.write(data)
        o = fuzzing.run_command(["import-strace", path, "-o", os.path.join(tmp, "out.htrace.gz"),
                                 "--analyze", "--json"], time_limit=60.0)
        why = fuzzing.check(fuzzing.Mutant("fd", "log", data, []), o)
        if why is None and o.code != 1 and os.path.exists(os.path.join(tmp, "out.htrace.gz")):
            again = fuzzing.run_command(["analyze", os.path.join(tmp, "out.htrace.gz"),
                                         "--json"], time_limit=60.0)
            if again.code == 1:    # what import-strace wrote, its own reader must read
                why = f"the trace it wrote is refused: {again.stderr.strip()[-200:]}"
            else:
                why = fuzzing.check(fuzzing.Mutant("fd", "trace", data, []), again)
        return why


# --------------------------------------------------------------------------- the runs
_CASES: Dict[str, Callable[[random.Random, int], List[Case]]] = {
    "elf": _elf_cases, "source": _source_cases, "ras": _ras_cases, "title": _title_cases,
    "fd": _fd_cases}
_RUN: Dict[str, Callable[[bytes], Optional[str]]] = {
    "elf": _run_elf, "source": _run_source, "ras": _run_ras, "title": _run_title,
    "fd": _run_fd}


def cases(kind: str, seed: int, count: int) -> List[Case]:
    return _CASES[kind](random.Random(f"{kind}-{seed}"), count)


def run_case(kind: str, data: bytes) -> Tuple[Optional[str], float]:
    """(None, CPU seconds) when the input was handled as its contract says, else (why, CPU)."""
    cpu0 = time.thread_time()
    try:
        why = _RUN[kind](data)
    except Exception as exc:       # an exception no contract names: an internal error
        why = f"internal error: {type(exc).__name__}: {str(exc)[:200]}"
    return why, time.thread_time() - cpu0
