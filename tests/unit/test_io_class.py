"""What a write or a read means (analysis/accumulate/io_class.py): one table of real fd kinds and
sizes, the kernel's constant against it, and no copy of the rule anywhere else."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tracer.analysis.accumulate.io_class import (WAKEUP_MAX_BYTES, IoClass, proc_input_bytes,
                                                 proc_output_bytes, read_class, write_class)
from tracer.record.backends.ebpf import layout

ROOT = Path(__file__).resolve().parents[2]
O, W, E, D, S, U, X, I = (IoClass.OUTPUT, IoClass.WAKEUP, IoClass.EVENTFD, IoClass.DISCARDED,
                          IoClass.SOCKET, IoClass.UNKNOWN, IoClass.OTHER, IoClass.INPUT)

WRITES = [  # kind (as fdtarget names it), bytes, both ends in the process, class
    ("eventfd", 8, False, E),          # libzmq / libuv signaler
    ("eventfd", 8, True, E),
    (None, 8, False, U),               # strace without -y: could be an eventfd poke
    (None, 1, False, U),
    (None, 9, False, O),               # larger than any wake-up
    ("pipe", 1, True, W),              # a self-pipe (signal wakeup fd)
    ("unix", 1, True, W),              # asyncio's socketpair
    ("pipe", 4096, True, O),           # data through its own pipe
    ("unix", 200, True, O),
    ("pipe", 1, False, O),             # a 1-byte write to another process is output
    ("fifo", 8, False, O),
    ("null", 4096, False, D),          # /dev/null
    ("tcp", 60, False, S),             # judged later by the keep-alive rule
    ("unix", 60, False, S),
    ("udp", 4, False, S),
    ("file", 3, False, O),             # print() under PYTHONUNBUFFERED: 3 bytes to a log file
    ("tty", 1, False, O),
    ("nvidiactl", 32, False, X),       # a device: neither output nor a wake-up
]


@pytest.mark.parametrize("kind,n,internal,want", WRITES)
def test_write_class(kind, n, internal, want):
    assert write_class(kind, n, lambda: internal) is want


def test_internal_is_asked_only_for_channels():
    def never() -> bool:
        raise AssertionError("asked")
    for kind in ("eventfd", None, "file", "tcp", "null", "tty"):
        write_class(kind, 1, never)
        read_class(kind, never)


@pytest.mark.parametrize("kind,internal,want", [
    ("eventfd", False, E), ("pipe", True, W), ("unix", True, W), ("pipe", False, I),
    ("tcp", False, S), ("unix", False, S), ("file", False, I), (None, False, I)])
def test_read_class(kind, internal, want):
    assert read_class(kind, lambda: internal) is want


def test_proc_io_rule():
    assert proc_output_bytes(80, 10) == 0           # ten eventfd writes
    assert proc_output_bytes(1000, 10) == 920
    assert proc_output_bytes(5, 10) == 0
    assert proc_input_bytes(80, 10) == 0


def test_the_kernel_counts_small_writes_by_the_same_bound():
    header = (ROOT / "bpf" / "hangtrace.h").read_text()
    m = re.search(r"#define HT_SMALL_WRITE (\d+)", header)
    assert m and int(m.group(1)) == WAKEUP_MAX_BYTES == layout.HT_SMALL_WRITE


def _copies(path: Path) -> list:
    """Code (not text) that decides on 8 bytes, or a copied limit: a literal 8 compared with or
    multiplied by something (not a len(): a display limit), a constant named like the limits
    set to 8, 32 or 64."""
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            parts = [node.left, node.right]
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and node.value.value in (8, 32, 64) and any(
                    isinstance(t, ast.Name) and re.search(r"WAKEUP|SMALL|TARGET|SOCKET|FDS", t.id)
                    for t in node.targets):
            out.append(node.lineno)
            continue
        else:
            continue
        counts = any(isinstance(x, ast.Call) and getattr(x.func, "id", "") == "len" for x in parts)
        if not counts and any(isinstance(x, ast.Constant) and x.value == 8 for x in parts):
            out.append(node.lineno)
    return out


def test_no_copy_of_the_rule_elsewhere():
    """The 8-byte bound and the copied limits are decided only in io_class.py."""
    hits = []
    for sub in ("tracer/analysis", "tracer/render", "tracer/record/watch.py",
                "tracer/record/watch_looks.py"):
        base = ROOT / sub
        for p in ([base] if base.is_file() else base.rglob("*.py")):
            if p.name != "io_class.py":
                hits += [f"{p.relative_to(ROOT)}:{n}" for n in _copies(p)]
    assert not hits, hits


def test_the_copy_finder_finds_a_copy(tmp_path):
    f = tmp_path / "copy.py"
    f.write_text("def f(n, syscw):\n    return n <= 8 or 8 * syscw\nSMALL_WRITE = 8\n")
    assert sorted(_copies(f)) == [2, 2, 3]
