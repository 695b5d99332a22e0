"""Write strace 6 ``strace -p TID`` sessions (stderr, concatenated) as strace 4.x printed them
at a terminal, the shape people paste: its messages had no "strace: " prefix, and Ctrl-C's
echo (``^C``) came before the detach message glued to the call in flight, with no
``<detached ...>`` line after it. Only those lines change; every call is the recording's.

    python3 make_old_strace_paste.py < pasted_new.log > pasted_p_sessions_old_format.log
"""
from __future__ import annotations

import sys

_PREFIX = "strace: Process "


def old_format(lines: list) -> list:
    """The lines as strace 4.x wrote them (module doc)."""
    out = []
    for line in lines:
        if line.strip() == "<detached ...>":
            continue                                  # strace 4.x wrote none
        k = line.find(_PREFIX)
        if k > 0:                                     # "...NULLstrace: Process N detached"
            line = line[:k] + "^C" + line[k + len("strace: "):]
        elif k == 0:
            line = line[len("strace: "):]
        out.append(line)
    return out


if __name__ == "__main__":
    sys.stdout.writelines(old_format(sys.stdin.readlines()))
