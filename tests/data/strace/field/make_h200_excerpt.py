#!/usr/bin/env python3
"""Cut ``h200_rm_control_p.log`` from the real H200 start-up log, as ``strace -p TID`` shows it.

The source, fixtures/gpu-h200/startup.strace.gz, is ``strace -f -ttt -T -yy -s 0`` of a CuPy
CUDA start-up on an H200 (fixtures/gpu-h200/README.md). This keeps the longest run of
consecutive calls of the main thread (tid 444) that are all NVIDIA RM_CONTROL ioctls
(``_IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2a, 0x20)``) and removes what a plain ``strace -p``
would not print: the pid column, the -ttt timestamp, the -T duration and the -yy fd paths
(``8</dev/nvidiactl<char 195:255>>`` becomes ``8``). Nothing else is changed: the requests,
argument addresses and results are the recorded ones.

usage: python3 make_h200_excerpt.py > h200_rm_control_p.log
"""
from __future__ import annotations

import gzip
import re
import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[4] / "fixtures" / "gpu-h200" / "startup.strace.gz"
TID = "444"
RM_CONTROL = "_IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2a, 0x20)"
LINE = re.compile(r"^(\d+) +\d+\.\d+ (.*?)(?: <\d+\.\d+>)?$")
FD_PATH = re.compile(r"^ioctl\((\d+)<[^,]*>, ")


def main_thread_calls(path: Path) -> list[str]:
    out = []
    with gzip.open(path, "rt") as f:
        for raw in f:
            m = LINE.match(raw.rstrip("\n"))
            if m and m.group(1) == TID:
                out.append(m.group(2))
    return out


def longest_rm_run(calls: list[str]) -> list[str]:
    best: list[str] = []
    run: list[str] = []
    for call in calls:
        if call.startswith("ioctl(") and RM_CONTROL in call and call.endswith("= 0"):
            run.append(call)
            if len(run) > len(best):
                best = list(run)
        else:
            run = []
    return best


def main() -> None:
    for call in longest_rm_run(main_thread_calls(SOURCE)):
        sys.stdout.write(FD_PATH.sub(r"ioctl(\1, ", call) + "\n")


if __name__ == "__main__":
    main()
