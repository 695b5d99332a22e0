#!/usr/bin/env python3
"""Cut ``h200_uvm_never_returns_f_ttt_T_yy.log.gz`` from the real H200 start-up log: a UVM ioctl
left unfinished while the other threads go on (issue 44 item 7).

The source, fixtures/gpu-h200/startup.strace.gz, is ``strace -f -ttt -T -yy`` of a CuPy CUDA
start-up on an H200 (fixtures/gpu-h200/README.md). Its main thread (tid 444) enters
``ioctl(9</dev/nvidia-uvm<char 238:0>>, _IOC(_IOC_NONE, 0, 0x19, 0)`` (UVM_REGISTER_GPU_VASPACE)
with ``<unfinished ...>`` at 1795950774.742237; in the real run it returned 0.56 ms later. This
keeps every line up to that one, then the other threads' lines only, up to the last line before
the process begins its exit (1795950775.69): what a log of a start-up whose ioctl never returned
would hold, cut there (strace killed). The lines kept are unchanged; the main thread's later
lines, and with them its ``<... ioctl resumed>``, are left out. The other threads' lines in
between are the real ones (some of their wake-ups were the main thread's doing).

usage: python3 make_h200_uvm_hang.py | gzip -n -9 > h200_uvm_never_returns_f_ttt_T_yy.log.gz
"""
from __future__ import annotations

import gzip
import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[4] / "fixtures" / "gpu-h200" / "startup.strace.gz"
TID = "444"
STUCK = "_IOC(_IOC_NONE, 0, 0x19, 0) <unfinished ...>"
EXIT_BEGINS = 1795950775.69


def main() -> None:
    stuck = False
    with gzip.open(SOURCE, "rt") as f:
        for line in f:
            tid, ts = line.split(None, 2)[:2]
            if float(ts) >= EXIT_BEGINS:
                break
            if tid == TID and stuck:
                continue
            sys.stdout.write(line)
            stuck = stuck or (tid == TID and STUCK in line)


if __name__ == "__main__":
    main()
