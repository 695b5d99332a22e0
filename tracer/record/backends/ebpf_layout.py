"""Python mirror of bpf/hangtrace.h: constants, ctypes structs, and the syscall -> kind table.

Contract:
- Every ``HT_*`` constant and every struct of the header is repeated here by hand, field by
  field, the way BCC's libbpf-tools mirror their ``*.h`` in Python/C userspace;
  tests/test_ebpf_layout.py parses the header and fails when the two differ.
- ``kinds_for(table)`` maps a syscall number table (tracer/linux/syscall_table.py, for the running
  architecture) to the kind code the kernel program uses, so the BPF C holds no syscall
  numbers at all.
- Pure: importable anywhere (no bcc, no root).
"""
from __future__ import annotations

import ctypes as ct
from pathlib import Path
from typing import Dict, Mapping

BPF_DIR = Path(__file__).resolve().parents[3] / "bpf"
HEADER = BPF_DIR / "hangtrace.h"
PROGRAM = BPF_DIR / "hangtrace.bpf.c"

HT_EV_SYSCALL = 1
HT_EV_FORK = 2
HT_EV_EXEC = 3
HT_EV_EXIT = 4
HT_K_NONE = 0
HT_K_FUTEX = 1
HT_K_POLL = 2
HT_K_PPOLL = 3
HT_K_EPOLL = 4
HT_K_EPOLL2 = 5
HT_K_SELECT = 6
HT_K_PSELECT = 7
HT_K_WRITE = 8
HT_K_READ = 9
HT_K_IOCTL = 10
HT_K_WAIT = 11
HT_K_YIELD = 12
HT_K_NANOSLEEP = 13
HT_K_CLOCK_NANOSLEEP = 14
HT_K_ACCEPT = 15
HT_K_CLONE = 16
HT_K_CLONE3 = 17
HT_K_FORK = 18
HT_K_STREAMED_MAX = 15
HT_F_TIMEOUT = 1
HT_F_NO_TIMEOUT = 2
HT_F_TIMEOUT_ABS = 4
HT_F_UNREADABLE = 8
HT_F_AUX = 16
HT_F_PFDS = 32
HT_F_NEW_PROCESS = 64
HT_F_GUESSED = 128
HT_F_DROPPED = 256
HT_T_ON_CPU = 1
HT_T_IN_CALL = 2
HT_T_SEEN = 4
HT_C_RINGBUF_FULL = 0
HT_C_RATE_LIMITED = 1
HT_C_THREADS_FULL = 2
HT_C_AGG_FULL = 3
HT_C_TARGETS_FULL = 4
HT_NCOUNTERS = 8
HT_MAX_NR = 512
HT_MAX_PFDS = 4
HT_MAX_TARGETS = 16384
HT_MAX_THREADS = 32768
HT_MAX_AGG = 65536
HT_AGG_SLOTS = 16
HT_SLOT_SHIFT = 8
HT_KIND_MASK = 255
HT_RINGBUF_PAGES = 256
HT_RATE_WINDOW_NS = 100000000
HT_RATE_MAX = 100
HT_CLONE_THREAD = 65536
HT_NV_IOC_TYPE = 70
HT_NV_RM_CONTROL = 42
HT_NV_RM_ALLOC = 43


class HtEvent(ct.Structure):
    """struct ht_event: one ring buffer record."""
    _fields_ = [
        ("type", ct.c_uint32), ("tgid", ct.c_uint32), ("tid", ct.c_uint32), ("nr", ct.c_int32),
        ("ret", ct.c_int64), ("enter_ns", ct.c_uint64), ("exit_ns", ct.c_uint64),
        ("args", ct.c_uint64 * 6), ("aux", ct.c_uint64), ("flags", ct.c_uint32),
        ("pfds", ct.c_int32 * 4), ("kind", ct.c_uint32),
    ]


class HtThread(ct.Structure):
    """struct ht_thread: value of the per-thread map (key: tid)."""
    _fields_ = [
        ("tgid", ct.c_uint32), ("flags", ct.c_uint32), ("on_cpu_ns", ct.c_uint64),
        ("last_in_ns", ct.c_uint64), ("switches", ct.c_uint64), ("win_start_ns", ct.c_uint64),
        ("win_count", ct.c_uint32), ("nr", ct.c_int32), ("enter_ns", ct.c_uint64),
        ("args", ct.c_uint64 * 6), ("aux", ct.c_uint64), ("cflags", ct.c_uint32),
        ("kind", ct.c_uint32), ("pfds", ct.c_int32 * 4), ("slot", ct.c_uint32),
        ("pad", ct.c_uint32), ("c_nr", ct.c_int32 * 16), ("c_count", ct.c_uint64 * 16),
        ("c_ns", ct.c_uint64 * 16), ("c_dropped", ct.c_uint64 * 16),
        ("win_jiffies", ct.c_uint64),
    ]


class HtAggKey(ct.Structure):
    """struct ht_agg_key."""
    _fields_ = [("tid", ct.c_uint32), ("nr", ct.c_uint32)]


class HtAgg(ct.Structure):
    """struct ht_agg: per (tid, nr) count and time."""
    _fields_ = [("count", ct.c_uint64), ("total_ns", ct.c_uint64), ("dropped", ct.c_uint64),
                ("tgid", ct.c_uint32), ("pad", ct.c_uint32)]


STRUCTS = {"ht_event": HtEvent, "ht_thread": HtThread, "ht_agg_key": HtAggKey, "ht_agg": HtAgg}

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


# The calls that get a count-cache slot of their own (struct ht_thread.c_*), most frequent in
# the programs we diagnose first; every other nr shares the remaining slots (nr modulo).
_OWN_SLOT = ("futex", "read", "write", "ioctl", "epoll_wait", "epoll_pwait", "poll", "ppoll",
             "sched_yield", "recvfrom", "sendto", "recvmsg")


def slots_for(table: Mapping[int, str]) -> Dict[int, int]:
    """nr -> count-cache slot, for every nr below HT_MAX_NR."""
    own = {name: i for i, name in enumerate(_OWN_SLOT)}
    shared = HT_AGG_SLOTS - len(_OWN_SLOT)
    by_name = {name: nr for nr, name in table.items()}
    out = {nr: len(_OWN_SLOT) + nr % shared for nr in range(HT_MAX_NR)}
    for name, slot in own.items():
        nr = by_name.get(name)
        if nr is not None and 0 <= nr < HT_MAX_NR:
            out[nr] = slot
    return out


def kinds_value(table: Mapping[int, str]) -> Dict[int, int]:
    """The "kinds" array the kernel reads: kind | slot << HT_SLOT_SHIFT, for every nr."""
    kinds = kinds_for(table)
    return {nr: kinds.get(nr, HT_K_NONE) | slot << HT_SLOT_SHIFT
            for nr, slot in slots_for(table).items()}


def constants() -> Dict[str, int]:
    """Every HT_* constant of this module (for the mirror test)."""
    return {k: v for k, v in globals().items() if k.startswith("HT_") and isinstance(v, int)}
