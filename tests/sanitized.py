"""The compiled helpers built with AddressSanitizer and UndefinedBehaviorSanitizer, and one
bounded fuzz pass through them (issue 22 item 6).

- ``build(out_dir)`` compiles every csrc/*.c under tracer/ with ``gcc -fsanitize=address,undefined
  -fno-sanitize-recover=undefined`` (the sources and their hash as setup.py takes
  them) into ``out_dir``; returns the module's path, or raises ``Unavailable`` with the reason
  (no gcc, no Python.h, no sanitizer runtime).
- ``fuzz_pass(module_path, seed, count)`` runs in a child process with the sanitizer runtime
  preloaded (``LD_PRELOAD`` of libasan: Python itself is not built with it) and the sanitized
  module in place of the normal one: the twins' random and mutated strace blocks through
  split_line, scan_block, first_arg and scrub, whole imports of some of them (convert_calls),
  the hostile lines of bench/hostile_lines.py, and analyses of field-mutated traces (their
  call rows read in place, tracefile/csrc/rows.c, and fed by analysis/accumulate/csrc/).
  Returns (inputs run, the sanitizer reports found in its stderr, the child's exit status).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import List, Tuple

REPO = Path(__file__).resolve().parent.parent
FLAGS = ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
         "-fno-sanitize-recover=undefined"]
REPORT = re.compile(r"ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer|"
                    r"SUMMARY: (?:Address|UndefinedBehavior)Sanitizer")


class Unavailable(RuntimeError):
    """The sanitizer build cannot be made here (the reason is the message)."""


def runtime() -> str:
    """The path of gcc's libasan, or raise Unavailable."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise Unavailable("no gcc")
    path = subprocess.run([gcc, "-print-file-name=libasan.so"], capture_output=True,
                          text=True).stdout.strip()
    if not os.path.isabs(path) or not os.path.exists(path):
        raise Unavailable("gcc has no AddressSanitizer runtime (Debian: libasan8)")
    return os.path.realpath(path)


def build(out_dir: str) -> str:
    runtime()
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        raise Unavailable(f"no Python.h in {include} (python3-dev)")
    from tracer.strace import fastpath          # the sources and hash setup.py builds from
    package = str(REPO / "tracer")
    files = fastpath.source_files(package)
    target = os.path.join(out_dir, "_fast" + sysconfig.get_config_var("EXT_SUFFIX"))
    cmd = ["gcc", *FLAGS, "-shared", "-fPIC", "-fvisibility=hidden", "-Wall", f"-I{include}",
           *[f"-I{d}" for d in sorted({os.path.dirname(p) for p in files})],
           f'-DSOURCE_HASH="{fastpath.source_hash(package)}"',
           *[p for p in files if p.endswith(".c")], "-o", target]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise Unavailable(f"the sanitizer build failed: {r.stderr.strip()[-500:]}")
    return target


_CHILD = r'''
import importlib.util, sys
spec = importlib.util.spec_from_file_location("tracer.strace._fast", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
sys.modules["tracer.strace._fast"] = mod
from tracer.strace.fastpath import compiled
assert compiled() is mod, "the sanitized module is not the one in use"
import fuzzing, twins
sys.path.insert(0, "bench")
from hostile_lines import hostile_lines
from tracer import events as ev
from tracer.strace.args import py_first_arg
from tracer.strace.lines import py_split_line
from tracer.strace.scan import py_scan_block
from collections import Counter
seed, count = int(sys.argv[2]), int(sys.argv[3])
mod.set_fallback("split_line", py_split_line)
mod.set_fallback("scrub", ev.scrub_args)
mod.set_fallback("first_arg", py_first_arg)
ran = 0
for b in twins.blocks(seed, count):
    mod.scan_block(b, {}, True)
    for line in b.decode("utf-8", "surrogateescape").split("\n"):
        mod.split_line(line); mod.first_arg(line); mod.scrub(line)
    ran += 1
for line in hostile_lines(100_000).values():
    mod.split_line(line); mod.first_arg(line); mod.scrub(line)
    mod.scan_block(line.encode(), {}, True)
    ran += 1
for b in twins.blocks(seed + 1, count // 10):
    twins.outcome(b); ran += 1
for m in fuzzing.field_mutants(seed, count // 10) + fuzzing.line_mutants(seed, count // 20):
    o = fuzzing.run_mutant(m, time_limit=120)
    assert not o.internal_error, o.stderr[-500:]
    ran += 1
print("RAN", ran)
'''


def fuzz_pass(module_path: str, seed: int, count: int) -> Tuple[int, List[str], int]:
    env = {**os.environ, "LD_PRELOAD": runtime(),
           "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=86",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=87",
           "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)])}
    env.pop("HANGTRACE_PURE", None)
    p = subprocess.run([sys.executable, "-c", _CHILD, module_path, str(seed), str(count)],
                       capture_output=True, text=True, cwd=REPO, env=env, timeout=1800)
    reports = [ln for ln in p.stderr.splitlines() if REPORT.search(ln)]
    ran = next((int(ln.split()[1]) for ln in p.stdout.splitlines() if ln.startswith("RAN ")),
               0)
    if p.returncode != 0 and not reports:
        reports = [f"the child failed (status {p.returncode}): {p.stderr.strip()[-800:]}"]
    return ran, reports, p.returncode
