"""The program a strace command line names, from a line pasted before the log (issue 32 item
4): ``root@gpu-node:~# strace -f -e trace=futex -o hang.log python3 serve.py --port 8000``.

Contract: ``named_program(line)`` -> the traced command's argv when ``line`` is a shell
command (an optional prompt ending in ``# ``, ``$ `` or ``> ``; ``sudo``, ``timeout N`` and
``env`` prefixes) that runs strace with a command after its options, else None: an attach
(``-p PID`` and no command), a line that is not a strace command, quoting that does not
parse. The strace options that take a value are strace 6's (``-a -b -e -E -I -o -O -p -P -s
-S -u -U -X``), glued (``-o/tmp/x``) or apart; ``--name=value`` long options are one word,
and ``--`` ends the options. Pure: the line is never run or looked up. A line longer than
``MOST_CHARS`` is None unread (shlex builds a word a character at a time: a 1 MB word took 19 s).
"""
from __future__ import annotations

import re
import shlex
from typing import List, Optional

__all__ = ["MOST_CHARS", "named_program"]

MOST_CHARS = 64 << 10       # a pasted shell line (a strace command) is far shorter

_PROMPT = re.compile(r"^[^\s#$>]*[#$>]\s+")
_TAKES_VALUE = set("abeEIoOpPsSuUX")
_LONG_WITH_VALUE = {"--output", "--trace", "--signal", "--status", "--string-limit",
                    "--user", "--attach", "--trace-path", "--env", "--columns", "--detach-on",
                    "--instruction-pointer", "--summary-sort", "--summary-columns"}


def _strip_prefixes(words: List[str]) -> List[str]:
    while words:
        head = words[0].rsplit("/", 1)[-1]
        if head in ("sudo", "env", "nohup", "exec"):
            words = words[1:]
            while words and (words[0].startswith("-") or "=" in words[0]):
                words = words[1:]
        elif head == "timeout" and len(words) > 1:
            words = words[1:]
            while words and words[0].startswith("-"):
                words = words[1:]
            words = words[1:]                     # the duration
        else:
            return words
    return words


def named_program(line: str) -> Optional[List[str]]:
    """The command's argv the strace line runs (module doc), or None."""
    if len(line) > MOST_CHARS:
        return None
    text = _PROMPT.sub("", line.strip(), count=1)
    try:
        words = _strip_prefixes(shlex.split(text, comments=False))
    except ValueError:
        return None
    if not words or words[0].rsplit("/", 1)[-1] != "strace":
        return None
    i = 1
    while i < len(words):
        w = words[i]
        if w == "--":
            i += 1
            break
        if w.startswith("--"):
            i += 2 if w in _LONG_WITH_VALUE else 1
            continue
        if not w.startswith("-") or w == "-":
            break
        flags = w[1:]
        for k, f in enumerate(flags):
            if f in _TAKES_VALUE:
                if k == len(flags) - 1:
                    i += 1                        # its value is the next word
                break
        i += 1
    rest = [w for w in words[i:] if w not in ("2>&1",)]
    cut = next((k for k, w in enumerate(rest) if w in ("|", ">", "2>", "&", ";", "&&")
                or w.startswith(("2>", ">"))), len(rest))
    return rest[:cut] or None
