"""The Python mirror (tracer/record/backends/ebpf_layout.py) matches bpf/hangtrace.h, field by field.

Needs neither root nor bcc: the header is parsed as text (it follows the rules in its own
comment: #define HT_NAME <int>, structs of __u32/__s32/__u64/__s64 fields and arrays).
"""
from __future__ import annotations

import ctypes as ct
import re
from typing import Dict, List, Tuple

from tracer.record.backends.ebpf import layout as L
from tracer.linux.syscall_table import X86_64, AARCH64

_SIZES = {"__u32": 4, "__s32": 4, "__u64": 8, "__s64": 8}
_CTYPES = {"__u32": ct.c_uint32, "__s32": ct.c_int32, "__u64": ct.c_uint64, "__s64": ct.c_int64}


def _header() -> str:
    return L.HEADER.read_text()


def _defines(text: str) -> Dict[str, int]:
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^#define (HT_\w+) (\d+)\b", text, re.M)}


def _structs(text: str) -> Dict[str, List[Tuple[str, str, int]]]:
    """struct name -> [(field, type, array length or 0)]; type is __u32... or "struct NAME"."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out = {}
    for m in re.finditer(r"struct (\w+) \{(.*?)\};", text, re.S):
        fields = []
        for decl in m.group(2).split(";"):
            decl = decl.strip()
            if not decl:
                continue
            fm = re.fullmatch(r"(__[us](?:32|64)|struct \w+)\s+(\w+)(?:\[(\w+)\])?", decl)
            assert fm, f"unsupported declaration in struct {m.group(1)}: {decl!r}"
            assert not fm.group(1).startswith("struct ") or fm.group(1)[7:] in out, \
                f"struct {m.group(1)}: {decl!r} uses a struct not declared before it"
            n = fm.group(3)
            fields.append((fm.group(2), fm.group(1), int(n) if n else 0))
        out[m.group(1)] = fields
    return out


def _size(structs, ctype: str) -> int:
    if ctype.startswith("struct "):
        return sum(_size(structs, t) * max(n, 1) for _, t, n in structs[ctype[7:]])
    return _SIZES[ctype]


def test_every_define_is_mirrored_with_the_same_value():
    defs = _defines(_header())
    assert len(defs) > 40
    assert L.constants() == defs


def test_every_struct_is_mirrored_field_by_field():
    structs = _structs(_header())
    assert set(structs) == set(L.STRUCTS)
    for name, fields in structs.items():
        py = L.STRUCTS[name]
        assert [f[0] for f in py._fields_] == [f[0] for f in fields], name
        offset = 0
        for (fname, ctype, n), (pname, ptype) in zip(fields, py._fields_):
            elem = L.STRUCTS[ctype[7:]] if ctype.startswith("struct ") else _CTYPES[ctype]
            assert ct.sizeof(ptype) == _size(structs, ctype) * max(n, 1), (name, fname)
            if n:
                assert ptype._type_ is elem and ptype._length_ == n, (name, fname)
            else:
                assert ptype is elem, (name, fname)
            # No padding anywhere: each field sits right after the previous one.
            assert getattr(py, pname).offset == offset, (name, fname)
            offset += _size(structs, ctype) * max(n, 1)
        assert ct.sizeof(py) == offset, name


def test_sizes_stated_in_the_header_comments():
    assert ct.sizeof(L.HtEvent) == 120
    assert ct.sizeof(L.HtThread) == 48
    assert ct.sizeof(L.HtCache) == 1424


def test_kind_table_covers_the_interesting_calls_on_both_architectures():
    for table in (X86_64, AARCH64):
        kinds = L.kinds_for(table)
        names = {table[nr] for nr in kinds}
        for must in ("futex", "write", "read", "ioctl", "ppoll", "epoll_pwait", "wait4",
                     "sched_yield", "clone", "clone3", "accept4", "sendmsg", "recvfrom"):
            assert must in names, must
        assert all(0 <= nr < L.HT_MAX_NR for nr in kinds)
    k = L.kinds_for(X86_64)
    assert k[202] == L.HT_K_FUTEX and k[7] == L.HT_K_POLL and k[232] == L.HT_K_EPOLL
    assert k[24] == L.HT_K_YIELD and k[57] == L.HT_K_FORK
    streamed = {v for v in L.KIND_OF_NAME.values() if v <= L.HT_K_STREAMED_MAX}
    assert L.HT_K_CLONE not in streamed and L.HT_K_FUTEX in streamed
    # writes and reads are counted per (thread, fd) in the kernel, never streamed one by one
    assert L.HT_K_WRITE not in streamed and L.HT_K_READ not in streamed
    assert k[1] == L.HT_K_WRITE and k[44] == L.HT_K_WRITE and k[45] == L.HT_K_READ


def test_futex_masks_follow_the_futex_decoder():
    wait, wake = L.futex_masks()
    from tracer.linux.futex import decode_op
    for cmd in range(14):
        assert bool(wait >> cmd & 1) == decode_op(cmd).is_wait
        assert bool(wake >> cmd & 1) == decode_op(cmd).is_wake
    assert wait & 1 and wake & 2   # FUTEX_WAIT 0, FUTEX_WAKE 1


def test_kinds_value_packs_kind_and_a_count_cache_slot():
    for table in (X86_64, AARCH64):
        values = L.kinds_value(table)
        assert set(values) == set(range(L.HT_MAX_NR))   # the kernel reads every nr
        kinds = L.kinds_for(table)
        slots = L.slots_for(table)
        by_name = {name: nr for nr, name in table.items()}
        for nr, v in values.items():
            assert v & L.HT_KIND_MASK == kinds.get(nr, L.HT_K_NONE)
            assert (v >> L.HT_SLOT_SHIFT) & 0xFF == slots[nr] < L.HT_SLOTS
            assert bool(v & L.HT_KV_MSGS) == (table.get(nr) in ("sendmmsg", "recvmmsg"))
        # the hot calls of the programs we diagnose never evict one another from the cache
        own = [slots[by_name[n]] for n in ("futex", "read", "write", "ioctl", "epoll_pwait",
                                           "ppoll", "sched_yield", "recvfrom", "sendto")]
        assert len(set(own)) == len(own)
