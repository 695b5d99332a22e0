"""Python mirror of bpf/hangtrace.h: constants, ctypes structs, and the syscall -> kind table.

Contract:
- Every ``HT_*`` constant and every struct of the header is repeated here by hand, field by
  field, the way BCC's libbpf-tools mirror their ``*.h`` in Python/C userspace;
  tests/unit/test_ebpf_layout.py parses the header and fails when the two differ.
- ``kinds_for(table)`` maps a syscall number table (tracer/linux/syscall_table.py, for the running
  architecture) to the kind code the kernel program uses, so the BPF C holds no syscall
  numbers at all.
- Pure: importable anywhere (no bcc, no root).
"""
from __future__ import annotations

import ctypes as ct
from typing import Dict, List, Mapping, Tuple

from ....events.counts import WAKEUP_MAX_BYTES
from ....linux.futex import COMMANDS, WAIT_COMMANDS, WAKE_COMMANDS
from .source import BPF_DIR

HEADER = BPF_DIR / "hangtrace.h"

HT_EV_SYSCALL = 1
HT_EV_FORK = 2
HT_EV_EXEC = 3
HT_EV_EXIT = 4
HT_EV_FD = 5
HT_K_NONE = 0
HT_K_FUTEX = 1
HT_K_POLL = 2
HT_K_PPOLL = 3
HT_K_EPOLL = 4
HT_K_EPOLL2 = 5
HT_K_SELECT = 6
HT_K_PSELECT = 7
HT_K_IOCTL = 8
HT_K_WAIT = 9
HT_K_YIELD = 10
HT_K_NANOSLEEP = 11
HT_K_CLOCK_NANOSLEEP = 12
HT_K_ACCEPT = 13
HT_K_STREAMED_MAX = 13
HT_K_WRITE = 14
HT_K_READ = 15
HT_K_CLONE = 16
HT_K_CLONE3 = 17
HT_K_FORK = 18
HT_SLOT_SHIFT = 8
HT_KIND_MASK = 255
HT_KV_MSGS = 65536
HT_F_TIMEOUT = 1
HT_F_NO_TIMEOUT = 2
HT_F_TIMEOUT_ABS = 4
HT_F_UNREADABLE = 8
HT_F_AUX = 16
HT_F_PFDS = 32
HT_F_NEW_PROCESS = 64
HT_F_GUESSED = 128
HT_F_BLOCKED = 256
HT_C_RINGBUF_FULL = 0
HT_C_THREADS_FULL = 1
HT_C_AGG_FULL = 2
HT_C_FDS_FULL = 3
HT_C_IOCTLS_FULL = 4
HT_NCOUNTERS = 8
HT_GEN_USER = 0
HT_GEN_KERNEL = 1
HT_NGEN = 2
HT_MAX_NR = 512
HT_MAX_PFDS = 4
HT_MAX_THREADS = 32768
HT_MAX_AGG = 65536
HT_MAX_FDS = 65536
HT_MAX_IOCTLS = 16384
HT_MAX_FDSEEN = 16384
HT_MAX_FAILS = 16384
HT_SLOTS = 16
HT_FD_SLOTS = 8
HT_RINGBUF_PAGES = 256
HT_RATE_WINDOW_NS = 100000000
HT_RATE_MAX = 25
HT_SMALL_WRITE = WAKEUP_MAX_BYTES   # ThreadCounts' wsmall size (events/counts.py)
HT_CLONE_THREAD = 65536
HT_NV_IOC_TYPE = 70
HT_NV_RM_CONTROL = 42
HT_NV_RM_ALLOC = 43
HT_CAT_FUTEX_WAITS = 0
HT_CAT_FUTEX_WAITS_TIMEOUT = 1
HT_CAT_FUTEX_TIMEOUTS = 2
HT_CAT_FUTEX_WAKES = 3
HT_CAT_POLLS = 4
HT_CAT_POLL_TIMEOUTS = 5
HT_CAT_POLL_INFINITE = 6
HT_CAT_ACCEPTS = 7
HT_NCATS = 8

class HtEvent(ct.Structure):
    """struct ht_event: one ring buffer record."""
    _fields_ = [
        ("type", ct.c_uint32), ("tgid", ct.c_uint32), ("tid", ct.c_uint32), ("nr", ct.c_int32),
        ("ret", ct.c_int64), ("enter_ns", ct.c_uint64), ("exit_ns", ct.c_uint64),
        ("args", ct.c_uint64 * 6), ("aux", ct.c_uint64), ("flags", ct.c_uint32),
        ("pfds", ct.c_int32 * 4), ("kind", ct.c_uint32),
    ]


class HtThread(ct.Structure):
    """struct ht_thread: per-thread state off the syscall fast path (key: tid)."""
    _fields_ = [
        ("tgid", ct.c_uint32), ("pad", ct.c_uint32), ("on_cpu_ns", ct.c_uint64),
        ("last_in_ns", ct.c_uint64), ("switches", ct.c_uint64), ("blocked_ns", ct.c_uint64),
        ("blocked_to", ct.c_uint64),
    ]


_U64x8 = ct.c_uint64 * 8


class HtCslot(ct.Structure):
    """struct ht_cslot: one syscall-number slot of the per-CPU cache."""
    _fields_ = [("nr", ct.c_int32), ("win", ct.c_uint32), ("count", ct.c_uint64),
                ("streamed", ct.c_uint64), ("ns", ct.c_uint64)]


FD_FIELDS = ("writes", "wbytes", "wmin", "wmax", "wsmall", "wsbytes", "reads", "rbytes",
             "first_ns", "last_ns")


class HtFslot(ct.Structure):
    """struct ht_fslot: one fd slot of the per-CPU cache (fields as struct ht_fd, plus the
    writes counted in "reps" alone, each of size ``rep - 1``: counts.fslot_fields adds them)."""
    _fields_ = ([("fd", ct.c_int32), ("rep", ct.c_uint32)] +
                [(n, ct.c_uint64) for n in FD_FIELDS] + [("reps", ct.c_uint64)])


class HtCache(ct.Structure):
    """struct ht_cache: one CPU's cache of its last syscall-making thread's counts."""
    _fields_ = [
        ("tid", ct.c_uint32), ("tgid", ct.c_uint32), ("seq", ct.c_uint32),
        ("pad", ct.c_uint32), ("cur_tid", ct.c_uint32), ("cur_tgid", ct.c_uint32),
        ("cur_target", ct.c_uint32), ("pad2", ct.c_uint32), ("cur_gen", ct.c_uint64),
        ("cur_regs", ct.c_uint64),
        ("last_switch_ns", ct.c_uint64), ("tick_j", ct.c_uint64), ("tick_ns", ct.c_uint64),
        ("win_ns", ct.c_uint64), ("c", HtCslot * 16), ("f", HtFslot * 8), ("cat", _U64x8),
    ]


class HtTkey(ct.Structure):
    """struct ht_tkey: a thread and its process."""
    _fields_ = [("tid", ct.c_uint32), ("tgid", ct.c_uint32)]


class HtAggKey(ct.Structure):
    """struct ht_agg_key."""
    _fields_ = [("tid", ct.c_uint32), ("tgid", ct.c_uint32), ("nr", ct.c_int32),
                ("pad", ct.c_uint32)]


class HtAgg(ct.Structure):
    """struct ht_agg: per (tid, tgid, nr) calls, how many were streamed, time blocked."""
    _fields_ = [("count", ct.c_uint64), ("streamed", ct.c_uint64), ("ns", ct.c_uint64)]


class HtSeenKey(ct.Structure):
    """struct ht_seen_key: (tgid, fd) whose first use was told (HT_EV_FD)."""
    _fields_ = [("tgid", ct.c_uint32), ("fd", ct.c_int32)]


class HtFdKey(ct.Structure):
    """struct ht_fd_key."""
    _fields_ = [("tid", ct.c_uint32), ("tgid", ct.c_uint32), ("fd", ct.c_int32),
                ("pad", ct.c_uint32)]


class HtFd(ct.Structure):
    """struct ht_fd: per (tid, tgid, fd) writes/sends and reads/recvs."""
    _fields_ = [(n, ct.c_uint64) for n in FD_FIELDS]


class HtTcount(ct.Structure):
    """struct ht_tcount: per thread, unstreamed calls of streamed kinds by HT_CAT_*."""
    _fields_ = [("cat", _U64x8)]


class HtIocKey(ct.Structure):
    """struct ht_ioc_key."""
    _fields_ = [("tid", ct.c_uint32), ("tgid", ct.c_uint32), ("fd", ct.c_int32),
                ("request", ct.c_uint32)]


class HtIoc(ct.Structure):
    """struct ht_ioc: unstreamed ioctls per (tid, tgid, fd, request)."""
    _fields_ = [("count", ct.c_uint64)]


class HtFailKey(ct.Structure):
    """struct ht_fail_key: failed calls not streamed, per (tid, tgid, nr, errno)."""
    _fields_ = [("tid", ct.c_uint32), ("tgid", ct.c_uint32), ("nr", ct.c_int32),
                ("err", ct.c_uint32)]


class HtFail(ct.Structure):
    """struct ht_fail."""
    _fields_ = [("count", ct.c_uint64)]


STRUCTS = {"ht_event": HtEvent, "ht_thread": HtThread, "ht_cslot": HtCslot,
           "ht_fslot": HtFslot, "ht_cache": HtCache,
           "ht_tkey": HtTkey, "ht_agg_key": HtAggKey, "ht_agg": HtAgg, "ht_seen_key": HtSeenKey, "ht_fd_key": HtFdKey, "ht_fd": HtFd,
           "ht_tcount": HtTcount, "ht_ioc_key": HtIocKey, "ht_ioc": HtIoc,
           "ht_fail_key": HtFailKey, "ht_fail": HtFail}

# Which calls get which kind (names as in tracer/linux/syscall_table.py).
KIND_OF_NAME: Dict[str, int] = {
    "futex": HT_K_FUTEX,
    "poll": HT_K_POLL, "ppoll": HT_K_PPOLL,
    "epoll_wait": HT_K_EPOLL, "epoll_pwait": HT_K_EPOLL, "epoll_pwait2": HT_K_EPOLL2,
    "select": HT_K_SELECT, "pselect6": HT_K_PSELECT,
    "write": HT_K_WRITE, "writev": HT_K_WRITE, "pwrite64": HT_K_WRITE, "pwritev": HT_K_WRITE,
    "pwritev2": HT_K_WRITE, "sendto": HT_K_WRITE, "sendmsg": HT_K_WRITE,
    "sendmmsg": HT_K_WRITE, "sendfile": HT_K_WRITE,
    "read": HT_K_READ, "readv": HT_K_READ, "pread64": HT_K_READ, "preadv": HT_K_READ,
    "preadv2": HT_K_READ, "recvfrom": HT_K_READ, "recvmsg": HT_K_READ, "recvmmsg": HT_K_READ,
    "ioctl": HT_K_IOCTL,
    "wait4": HT_K_WAIT, "waitid": HT_K_WAIT,
    "sched_yield": HT_K_YIELD,
    "nanosleep": HT_K_NANOSLEEP, "clock_nanosleep": HT_K_CLOCK_NANOSLEEP,
    "accept": HT_K_ACCEPT, "accept4": HT_K_ACCEPT,
    "clone": HT_K_CLONE, "clone3": HT_K_CLONE3, "fork": HT_K_FORK, "vfork": HT_K_FORK,
}


def kinds_for(table: Mapping[int, str]) -> Dict[int, int]:
    """nr -> kind for every streamed or decoded call of ``table`` (nr < HT_MAX_NR)."""
    return {nr: KIND_OF_NAME[name] for nr, name in table.items()
            if name in KIND_OF_NAME and 0 <= nr < HT_MAX_NR}


# The calls that get a count-cache slot of their own (struct ht_cache.c_*), most frequent in
# the programs we diagnose first; every other nr shares the remaining slots (nr modulo).
_OWN_SLOT = ("futex", "read", "write", "ioctl", "epoll_wait", "epoll_pwait", "poll", "ppoll",
             "sched_yield", "recvfrom", "sendto", "recvmsg")


def slots_for(table: Mapping[int, str]) -> Dict[int, int]:
    """nr -> count-cache slot, for every nr below HT_MAX_NR."""
    own = {name: i for i, name in enumerate(_OWN_SLOT)}
    shared = HT_SLOTS - len(_OWN_SLOT)
    by_name = {name: nr for nr, name in table.items()}
    out = {nr: len(_OWN_SLOT) + nr % shared for nr in range(HT_MAX_NR)}
    for name, slot in own.items():
        nr = by_name.get(name)
        if nr is not None and 0 <= nr < HT_MAX_NR:
            out[nr] = slot
    return out


# Calls whose return value counts messages, not bytes.
_MSGS = frozenset({"sendmmsg", "recvmmsg"})


def kinds_value(table: Mapping[int, str]) -> Dict[int, int]:
    """The "kinds" array the kernel reads: kind | slot << HT_SLOT_SHIFT | HT_KV_* bits, for
    every nr."""
    kinds = kinds_for(table)
    return {nr: kinds.get(nr, HT_K_NONE) | slot << HT_SLOT_SHIFT
            | (HT_KV_MSGS if table.get(nr) in _MSGS else 0)
            for nr, slot in slots_for(table).items()}


# The "gen" counter userspace moves on, by loader: BCC's "gen" array (key HT_GEN_USER); the
# CO-RE object's global ht_ugen, alone in its section (map ".data.gen", key 0).
GEN_MAP = {"bcc": "gen", "libbpf": ".data.gen"}


def gen_entry(value: int) -> Tuple[bytes, bytes]:
    """(key, value) of GEN_MAP's entry that holds the user counter at ``value``."""
    return bytes(ct.c_uint32(HT_GEN_USER)), bytes(ct.c_uint64(value))


def kinds_entries(values: Mapping[int, int],
                  loader: str) -> Tuple[str, List[Tuple[bytes, bytes]]]:
    """(map, [(key, value)]) that put the "kinds" table in place: BCC's "kinds" array one u32
    per nr; the CO-RE object's global ht_kinds (map ".data.kinds") the whole table, key 0."""
    if loader == "bcc":
        return "kinds", [(bytes(ct.c_uint32(nr)), bytes(ct.c_uint32(v)))
                         for nr, v in values.items()]
    table = (ct.c_uint32 * HT_MAX_NR)()
    for nr, v in values.items():
        table[nr] = v
    return ".data.kinds", [(bytes(ct.c_uint32(0)), bytes(table))]


def futex_masks() -> Tuple[int, int]:
    """(wait, wake): bit ``cmd`` set for the futex commands a thread sleeps in / that wake
    others, from tracer/linux/futex.py (passed to the BPF program as -D defines)."""
    wait = sum(1 << i for i, name in enumerate(COMMANDS) if name in WAIT_COMMANDS)
    wake = sum(1 << i for i, name in enumerate(COMMANDS) if name in WAKE_COMMANDS)
    return wait, wake


def constants() -> Dict[str, int]:
    """Every HT_* constant of this module (for the mirror test)."""
    return {k: v for k, v in globals().items() if k.startswith("HT_") and isinstance(v, int)}
