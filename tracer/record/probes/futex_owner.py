"""Who holds the futex each blocked thread waits on: read from the target's memory.

Contract:
- ``decode_futex(raw, ...)`` is pure: the 24 bytes at a futex address, the wait's op/value and
  what is known of the waiter's process -> (kind, owner_tid, why). See ``FutexOwner`` in
  events/__init__.py for the kinds; the glibc layouts it reads: its docstring.
- ``futex_owner_probe(pids, analyzer)`` is an ``EndProbe``: for every thread of ``pids`` that sits
  in a futex wait (from /proc/PID/task/TID/syscall now, and from calls the syscall backends saw
  still running), it reads /proc/PID/mem at the futex address (read-only, pread: the target is
  never stopped) and returns one ``FutexOwner`` per (pid, address). Unreadable memory (no
  ptrace permission, the process exited) gives an event without owner, never an error; what
  changed since the recording (races): ``futex_owner_probe``.
"""
from __future__ import annotations

import os
import struct
import time
from typing import TYPE_CHECKING, Callable, Dict, Iterable, List, Optional, Set, Tuple

from ... import events as ev
from ...linux import cancel, procfs
from ...linux.futex import PI_COMMANDS, WAIT_COMMANDS, decode_op
from ...linux.syscall_table import parse_proc_syscall, syscall_number

if TYPE_CHECKING:  # pragma: no cover
    from ...analysis.analyzer import Analyzer

FUTEX_TID_MASK = 0x3FFFFFFF
MUTEX_PSHARED = 128
MUTEX_KIND_BITS = 3 | 16 | 32 | 64 | 128 | 256 | 512   # type, robust, PI, PP, pshared, elision
MUTEX_KIND_MAX = 1 << 19        # above: PRIO_PROTECT ceiling bits (<< 19), allowed only with 64
_MUTEX = struct.Struct("=IIiIi")  # __lock, __count, __owner, __nusers, __kind
READ_SIZE = 24


def decode_futex(raw: Optional[bytes], *, op: str, val: Optional[int], private: bool,
                 same_process: Callable[[int], bool]) -> Tuple[str, Optional[int], str]:
    """(kind, owner_tid, why) of one futex (module doc). ``same_process(tid)`` tells whether a
    tid is a thread of the waiter's process (for a private futex the owner must be).

    glibc facts (x86_64, nptl/pthreadtypes-arch.h, struct __pthread_mutex_s):
      +0  int __lock      the futex word. Normal/recursive/errorcheck/adaptive mutexes: 0 free,
                          1 locked, 2 locked with waiters (lll_lock waits with FUTEX_WAIT val 2).
                          Robust and PI mutexes: the owner tid in the low 30 bits
                          (FUTEX_TID_MASK), FUTEX_WAITERS (bit 31) / FUTEX_OWNER_DIED (bit 30).
      +4  unsigned __count  recursion count
      +8  int __owner     the owner's tid, set by every successful lock of every mutex type
      +12 unsigned __nusers >= 1 while locked
      +16 int __kind      type (0..3) | ROBUST 16 | PRIO_INHERIT 32 | PRIO_PROTECT 64 |
                          PSHARED 128 (process-shared: glibc then uses shared futex ops)
      pthread_join waits (FUTEX_WAIT_BITSET, shared) on the joined thread's ``tid`` field, which
      holds that tid until the kernel clears it at exit (CLONE_CHILD_CLEARTID).
      sem_t (Python's threading.Lock, multiprocessing locks) is {u64 value|nwaiters<<32; int
      private}: the word is the count (0 while taken) and nothing records who took it."""
    if raw is None or len(raw) < _MUTEX.size:
        return "unknown", None, "memory not readable"
    lock, _count, owner, nusers, kind = _MUTEX.unpack_from(raw)
    word_tid = lock & FUTEX_TID_MASK
    if op in PI_COMMANDS:
        # The kernel itself reads the owner from the word for PI futexes.
        if word_tid:
            return "pi-mutex", word_tid, "PI futex: owner tid in the lock word"
        return "unknown", None, "PI futex word is 0 (released)"
    if word_tid > 2 and owner == word_tid and nusers >= 1:
        # robust mutex: the word holds the owner's tid, and __owner says the same
        return "mutex", owner, "robust mutex: owner tid in the lock word and __owner"
    if word_tid > 2 and (val is None or (val & FUTEX_TID_MASK) == word_tid) \
            and same_process(word_tid):
        return "join", word_tid, "pthread_join: the word is the joined thread's tid"
    if lock in (1, 2) and owner > 0 and nusers >= 1 and (val is None or val in (1, 2)):
        shared_kind = bool(kind & MUTEX_PSHARED)
        plausible = kind >= 0 and (kind & (MUTEX_KIND_MAX - 1) & ~MUTEX_KIND_BITS) == 0 \
            and (kind < MUTEX_KIND_MAX or bool(kind & 64)) and shared_kind == (not private)
        if not plausible:
            return "unknown", None, f"word {lock} but __kind {kind:#x} is not a mutex's"
        if private and not same_process(owner):
            return "unknown", None, (f"word {lock} but __owner {owner} is no thread of the "
                                     "process (not a mutex)")
        return "mutex", owner, ("process-shared pthread mutex" if shared_kind
                                else "pthread mutex") + ": owner from __owner (+8)"
    if lock == 0:
        return "unknown", None, ("word 0: a semaphore (Python lock), condition or event; "
                                 "nothing records a holder")
    return "unknown", None, f"word {lock:#x}: not a mutex layout glibc writes"


def read_memory(pid: int, addr: int, size: int = READ_SIZE) -> Optional[bytes]:
    """``size`` bytes of process ``pid`` at ``addr`` through /proc/PID/mem (read-only; needs
    ptrace read access: root or the same user under yama scope 0), None when not readable."""
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.pread(fd, size, addr)
        return data if len(data) == size else None
    except (OSError, OverflowError, ValueError):
        return None
    finally:
        os.close(fd)


Wait = Tuple[int, int, str, Optional[int], bool]   # tid, addr, op, val, private


def waits_now(pid: int) -> List[Wait]:
    """Futex waits of the threads of ``pid`` as /proc/PID/task/TID/syscall shows them now (a
    line that does not start with futex's number is not parsed)."""
    out: List[Wait] = []
    head = f"{syscall_number('futex')} ".encode()
    for tid in procfs.list_tids(pid):
        data = procfs.read_bytes(f"/proc/{pid}/task/{tid}/syscall") or b""
        if not data.startswith(head):
            continue
        w = parse_futex_syscall(data.decode("ascii", "replace"))
        if w is not None:
            out.append((tid,) + w)  # type: ignore[arg-type]
    return out


def parse_futex_syscall(text: str, machine: Optional[str] = None
                        ) -> Optional[Tuple[int, str, Optional[int], bool]]:
    """(addr, op, val, private) from a /proc .../syscall line of a futex wait, else None.
    The call number is this host's (``machine``: platform.machine() spelling) futex."""
    cs = parse_proc_syscall(text, machine)
    if cs is None or cs.name != "futex" or len(cs.args) < 3:
        return None
    op = decode_op(cs.args[1])
    if not op.is_wait:
        return None
    return cs.args[0], op.name, cs.args[2] & 0xFFFFFFFF, op.private


def _traced_waits(analyzer: Optional["Analyzer"], pids: Set[int]) -> Dict[int, List[Wait]]:
    """Futex waits the syscall backends saw still running at the end (a thread that strace's
    detach interrupted may be between restarts when /proc is read)."""
    out: Dict[int, List[Wait]] = {}
    if analyzer is None:
        return out
    for c in analyzer.futex_waits(pids):
        if c.op in WAIT_COMMANDS:
            out.setdefault(c.pid, []).append((c.tid, c.addr, c.op, c.val, c.private))
    return out


def probe_pids(pids: Iterable[int], analyzer: Optional["Analyzer"] = None,
               now: Optional[float] = None) -> List[ev.FutexOwner]:
    pid_set = set(pids)
    traced = _traced_waits(analyzer, pid_set)
    out: List[ev.FutexOwner] = []
    ts = time.time() if now is None else now
    for pid in cancel.checked(sorted(pid_set), every=16):
        groups: Dict[int, List[Wait]] = {}
        for w in waits_now(pid) + traced.get(pid, []):
            if w[0] not in {x[0] for x in groups.get(w[1], [])}:
                groups.setdefault(w[1], []).append(w)
        if not groups:
            continue
        # Threads of the process now, and those seen during the recording (a holder may have
        # exited since: its tid stays in __owner).
        tids = set(procfs.list_tids(pid))
        if analyzer is not None:
            tids |= set(analyzer.known_tids(pid))
        for addr, ws in sorted(groups.items()):
            _, _, op, val, private = ws[0]
            raw = read_memory(pid, addr)
            kind, owner, why = decode_futex(raw, op=op, val=val, private=private,
                                            same_process=lambda t: t in tids)
            owner_pid = procfs.tgid_of(owner) if owner else None
            out.append(ev.FutexOwner(
                ts=ts, pid=pid, addr=addr, word=struct.unpack_from("=I", raw)[0] if raw else None,
                owner_tid=owner, kind=kind, owner_pid=owner_pid, shared=not private,
                waiters=sorted({w[0] for w in ws}), why=why))
    return out


def futex_owner_probe(pids: List[int], analyzer: "Analyzer") -> List[ev.Event]:
    """EndProbe (session.py): one FutexOwner per futex a thread of ``pids`` waits on.
    Races: the probe runs after the recording; a holder that released the lock, exited or was
    killed in between is reported as the memory says now (a released lock reads 0: no owner; a
    holder gone reads its stale tid, with ``owner_pid`` None). A thread id can in principle be
    reused by an unrelated thread in between; the owner's process is checked through /proc."""
    return list(probe_pids(pids, analyzer))
