"""Benchmark: the two ways hangtrace could read the function symbols a uprobe attaches to
(libcuda's cuStreamBeginCapture..., at attach): linux/elfsyms.py (struct over the mapped
sections) and pyelftools (a dependency, used for library versions and for naming frames).

Usage: python bench/elf_readers.py [LIB.so ...] [--runs N]
(default: the largest libLLVM*.so* and libc.so.6 of /usr/lib/x86_64-linux-gnu).

For each file, prints the median and minimum seconds of each reader over RUNS runs (default 3)
and whether both give the same {name: (address, file offset)}. ``pyelftools_function_symbols``
is the same selection written with pyelftools (STT_FUNC and STT_GNU_IFUNC, which pyelftools
calls STT_LOOS; defined; .dynsym first), so the figures compare equal work.
"""
from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys
import time
from typing import Callable, Dict, List, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tracer.linux.elfsyms import function_symbols  # noqa: E402

Symbols = Dict[str, Tuple[int, int]]


def pyelftools_function_symbols(path: str) -> Symbols:
    """linux/elfsyms.function_symbols's result, read with pyelftools (module doc)."""
    from elftools.elf.elffile import ELFFile
    out: Symbols = {}
    with open(path, "rb") as f:
        elf = ELFFile(f)
        sections = list(elf.iter_sections())
        for kind in ("SHT_DYNSYM", "SHT_SYMTAB"):
            for sec in (s for s in sections if s["sh_type"] == kind):
                for sym in sec.iter_symbols():
                    shndx = sym["st_shndx"]
                    if sym["st_info"]["type"] not in ("STT_FUNC", "STT_LOOS") \
                            or not sym["st_value"] or not isinstance(shndx, int) or not shndx:
                        continue
                    if sym.name and sym.name not in out:
                        s, v = sections[shndx], sym["st_value"]
                        out[sym.name] = (v, v - s["sh_addr"] + s["sh_offset"])
    return out


def _time(fn: Callable[[str], Symbols], path: str, runs: int) -> Tuple[float, float, Symbols]:
    times: List[float] = []
    result: Symbols = {}
    for _ in range(runs):
        t = time.perf_counter()
        result = fn(path)
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times), result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("libs", nargs="*")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    libs = args.libs or sorted(glob.glob("/usr/lib/x86_64-linux-gnu/libLLVM*.so*"),
                               key=os.path.getsize)[-1:] + ["/usr/lib/x86_64-linux-gnu/libc.so.6"]
    for path in libs:
        size = os.path.getsize(path) / 2**20
        hand = _time(function_symbols, path, args.runs)
        pyelf = _time(pyelftools_function_symbols, path, args.runs)
        print(f"{os.path.basename(path)} ({size:.0f} MiB, {len(hand[2])} functions): "
              f"elfsyms median {hand[0]:.3f} s (min {hand[1]:.3f}), pyelftools median "
              f"{pyelf[0]:.3f} s (min {pyelf[1]:.3f}), {pyelf[0] / hand[0]:.1f}x; "
              f"same result: {hand[2] == pyelf[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
