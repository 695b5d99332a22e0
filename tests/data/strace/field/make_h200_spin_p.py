#!/usr/bin/env python3
"""Cut ``h200_spin_main_p_ttt_T.log`` from the real H200 spin-sync recording, as
``strace -ttt -T -o LOG -p TID`` of the main thread alone shows it.

The source, fixtures/gpu-h200/spin.strace.gz, is ``strace -f -ttt -T -yy -p PID`` of a CuPy
process whose main thread waits in ``cudaDeviceSynchronize`` for a kernel that spins 25 s
(default schedule: the host spins, fixtures/gpu-h200/README.md). This keeps the lines of the
main thread (tid 466: one ``NV_ESC_RM_CONTROL`` ioctl on /dev/nvidiactl a second, on CPU in
between) and removes what that command would not print: the pid column (one thread traced)
and the -yy fd paths (``8</dev/nvidiactl<char 195:255>>`` becomes ``8``: the open of fd 8 is
long before the attach, so the log never names the device). The timestamps, durations,
requests, addresses and results are the recorded ones.

usage: python3 make_h200_spin_p.py > h200_spin_main_p_ttt_T.log
"""
from __future__ import annotations

import gzip
import re
import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[4] / "fixtures" / "gpu-h200" / "spin.strace.gz"
TID = "466"
LINE = re.compile(r"^(\d+) +(\d+\.\d+ .*)$")
FD_PATH = re.compile(r"(?<=[(=])(\d+)<(?:[^<>]|<[^<>]*>)*>")


def main() -> None:
    with gzip.open(SOURCE, "rt") as f:
        for raw in f:
            m = LINE.match(raw.rstrip("\n"))
            if m and m.group(1) == TID:
                sys.stdout.write(FD_PATH.sub(r"\1", m.group(2)) + "\n")


if __name__ == "__main__":
    main()
