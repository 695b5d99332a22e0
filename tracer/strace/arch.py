"""Which architecture an strace log was taken on, from evidence in the log only.

Contract: ``log_machine(names, numbers, triplets) -> (machine, why)``; ``names`` are the
syscall names the log shows, ``numbers`` name -> number where strace -n printed them,
``triplets`` the multiarch directories ("aarch64-linux-gnu") the log's paths name. ``machine`` is
"x86_64", "aarch64" or "unknown"; ``why`` says what decided it, in words, for the trace header.
The rule, and why it is careful: ``log_machine``'s docstring. Nothing else depends on the answer
being right: the calls the fd tables follow on aarch64 are a subset of x86_64's
(fdtable.fd_calls), and an unknown log follows the union.
"""
from __future__ import annotations

from typing import Dict, Iterable, Tuple

from ..linux.syscall_table import AARCH64, X86_64

__all__ = ["log_machine", "X86_ONLY"]

_COMMON_FROM = 424
X86_ONLY = frozenset(n for nr, n in X86_64.items() if nr < _COMMON_FROM) \
    - frozenset(AARCH64.values())
_BY_NAME = {"x86_64": {n: nr for nr, n in X86_64.items()},
            "aarch64": {n: nr for nr, n in AARCH64.items()}}


def log_machine(names: Iterable[str], numbers: Dict[str, int],
                triplets: Iterable[str] = ()) -> Tuple[str, str]:
    """(machine, why) by this rule. 1. strace prints the tracee's own syscall names. aarch64 has
    only the generic table (asm-generic/unistd.h): none of x86_64's legacy calls (open, stat, poll,
    access, pipe, dup2, epoll_wait, arch_prctl, ...) exists there. So one legacy name proves
    x86_64. 2. The converse does not hold: ``openat`` without ``open`` proves nothing (glibc on
    x86_64 opens with openat too; newfstatat is x86_64's stat as well), nor do ppoll, pipe2, dup3
    or epoll_pwait (x86_64 programs call them directly). A log can only prove aarch64 by numbers:
    with strace -n, a name printed with its aarch64 number (openat = 56, not 257). Numbers >= 424
    are the same on every architecture and prove nothing. 3. Short of proof, the log's own
    libraries are evidence: a process that opens files under the ``aarch64-linux-gnu`` multiarch
    directory (Debian, Ubuntu) and never makes an x86_64-only call is taken as aarch64, and ``why``
    says it was inferred. Otherwise "unknown"."""
    votes = {"x86_64": [], "aarch64": []}           # type: Dict[str, list]
    for name, nr in sorted(numbers.items()):
        if nr >= _COMMON_FROM:
            continue
        for machine, table in _BY_NAME.items():
            if table.get(name) == nr:
                votes[machine].append(f"{name} = {nr}")
    if votes["aarch64"] and not votes["x86_64"]:
        return "aarch64", "strace -n numbers of the aarch64 table: " + ", ".join(
            votes["aarch64"][:3])
    if votes["x86_64"] and not votes["aarch64"]:
        return "x86_64", "strace -n numbers of the x86_64 table: " + ", ".join(
            votes["x86_64"][:3])
    legacy = sorted(set(names) & X86_ONLY)
    if legacy:
        return "x86_64", "calls that exist on x86_64 and not on aarch64: " + ", ".join(
            legacy[:4])
    triplets = set(triplets)
    if triplets == {"aarch64-linux-gnu"}:
        return "aarch64", ("inferred: libraries under aarch64-linux-gnu/ were opened and no "
                           "x86_64-only call was made")
    return "unknown", "no call or syscall number that exists on only one architecture"
