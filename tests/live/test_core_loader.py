"""The libbpf loader (tracer/record/backends/ebpf/core_loader.py) on the real kernel: the
CO-RE object loads with its maps sized and its settings written, maps read in batches and
key by key give the same entries, a rejected program says why in one line, and nothing stays
open. Programs are loaded without attaching (nothing runs), so these tests cost the machine
nothing. Skipped where libbpf cannot load the objects (env.core_problem says why).
"""
from __future__ import annotations

import ctypes as ct
import os
import shutil
import subprocess

import pytest

from tracer.record.backends.ebpf import layout as L
from tracer.record.backends.ebpf.env import core_problem, pid_max, settings
from tracer.record.backends.ebpf.source import BPF_DIR, object_path

_WHY = core_problem(("hangtrace", "floor"))
pytestmark = [pytest.mark.live, pytest.mark.skipif(_WHY is not None, reason=str(_WHY))]


def _fds() -> set:
    """Our fds that hold a BPF object (program, map, link, BTF). Compared as sets: earlier
    tests' garbage (BCC objects) may be collected, closing fds, while one runs."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("anon_inode:bpf") or target.startswith("anon_inode:[perf_event]"):
            out.add((fd, target))
    return out


def _load(**kw):
    from tracer.record.backends.ebpf.core_loader import CoreProgram
    return CoreProgram(str(object_path("hangtrace")), max_entries={"procs": pid_max(),
                       "blocked": pid_max()}, settings=settings(), attach=False, **kw)


def test_maps_are_sized_settings_written_and_everything_closed():
    before = _fds()
    prog = _load()
    try:
        assert _fds() - before, "the object's maps and programs are fds of ours while loaded"
        assert prog.map("procs").max_entries == pid_max()
        assert prog.map("threads").max_entries == L.HT_MAX_THREADS
        rodata = prog.map(".rodata").get(bytes(4))
        wait, wake = L.futex_masks()
        # two u32 settings, in declaration order (the loader finds them through the BTF)
        assert ct.c_uint32.from_buffer_copy(rodata, 0).value == wait
        assert ct.c_uint32.from_buffer_copy(rodata, 4).value == wake
        cache = prog.map("cache").percpu(bytes(4))
        assert len(cache) == os.cpu_count() or len(cache) >= 1
        assert all(len(v) == ct.sizeof(L.HtCache) for v in cache)
    finally:
        prog.close()
        prog.close()                                   # idempotent
    assert _fds() <= before


def test_a_hash_map_reads_the_same_in_batches_and_key_by_key():
    prog = _load()
    try:
        threads = prog.map("threads")
        want = {}
        for tid in range(1, 2501):                     # more than one batch (1024)
            st = L.HtThread(tgid=tid // 10, on_cpu_ns=tid * 1000, switches=tid)
            assert threads.set(bytes(ct.c_uint32(tid)), bytes(st), only_new=True)
            want[bytes(ct.c_uint32(tid))] = bytes(st)
        assert not threads.set(bytes(ct.c_uint32(7)), bytes(L.HtThread()), only_new=True)
        batched = dict(threads.items())
        assert threads._batch_ok, "bpf_map_lookup_batch was not used"
        assert batched == want
        assert dict(threads._items_by_key()) == want
        assert threads.get(bytes(ct.c_uint32(99999))) is None
        assert threads.get(bytes(ct.c_uint32(7))) == want[bytes(ct.c_uint32(7))]
        procs = prog.map("procs")
        with pytest.raises(OSError):                   # an index beyond pid_max
            procs.set(bytes(ct.c_uint32(pid_max())), b"\x01")
    finally:
        prog.close()


def test_only_the_programs_asked_for_are_loaded():
    from tracer.record.backends.ebpf.core_loader import CoreProgram
    prog = CoreProgram(str(object_path("floor")), programs=["floor_tp_btf"], attach=False)
    try:
        out = subprocess.run(["bpftool", "prog", "show"], capture_output=True, text=True).stdout \
            if shutil.which("bpftool") else ""
        if out:
            assert "floor_tp_btf" in out and "floor_raw_tp" not in out
    finally:
        prog.close()


BAD = r"""
#include "ht_dialect.bpf.h"
HT_LICENSE;
HT_ARRAY(small, u64, 4);
SEC("tp_btf/sys_exit")
int BPF_PROG(bad, struct pt_regs *regs, long ret)
{
    u32 k = 0;
    u64 *v = bpf_map_lookup_elem(&small, &k);
    return v ? (int)v[100] : 0;     /* out of the value: the verifier says no */
}
"""


def _bad_object(tmp_path):
    """BAD built: an object the verifier rejects."""
    src, obj = tmp_path / "bad.bpf.c", tmp_path / "bad.bpf.o"
    src.write_text(BAD)
    subprocess.run(["clang", "-target", "bpf", "-g", "-O2", "-D__TARGET_ARCH_x86",
                    "-I", str(BPF_DIR), "-I", str(BPF_DIR / "vmlinux" / "x86_64"), "-c",
                    str(src), "-o", str(obj)], check=True)
    return obj


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang not installed")
def test_a_program_the_verifier_rejects_fails_with_its_reason_and_leaves_nothing(tmp_path):
    obj = _bad_object(tmp_path)
    from tracer.record.backends.ebpf.core_loader import CoreProgram
    before = _fds()
    with pytest.raises(OSError) as exc:
        CoreProgram(str(obj))
    msg = str(exc.value)
    assert "load" in msg and "\n" not in msg
    assert "verifier: invalid access to map value" in msg, msg
    assert _fds() <= before
    with pytest.raises(OSError, match="open"):
        CoreProgram(str(tmp_path / "missing.bpf.o"))
    assert _fds() <= before


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang not installed")
def test_the_verifier_s_reason_is_kept_after_another_user_of_libbpf_set_its_printer(tmp_path):
    """BCC links the same libbpf.so.1 and sets its own printer when it loads a program: a CO-RE
    load later in the process still has the verifier's reason (libbpf.listen). Failed on
    d45c0a5 whenever a BCC test ran before this module in one pytest worker."""
    from tracer.record.backends.ebpf import libbpf as B
    from tracer.record.backends.ebpf.core_loader import CoreProgram
    obj = _bad_object(tmp_path)
    elsewhere = B._PRINT_FN(lambda level, fmt, ap: 0)    # another user's printer (BCC's)
    B.library().libbpf_set_print(elsewhere)
    with pytest.raises(OSError) as exc:
        CoreProgram(str(obj))
    assert "verifier: invalid access to map value" in str(exc.value), str(exc.value)


def test_an_object_built_from_other_sources_is_refused_by_its_struct_sizes():
    from tracer.record.backends.ebpf.core_loader import CoreProgram
    before = _fds()
    with pytest.raises(OSError, match=r"built from other sources \(struct ht_cache: "
                                      rf"{ct.sizeof(L.HtCache)} bytes, 1296 expected\)"):
        CoreProgram(str(object_path("hangtrace")), struct_sizes={"ht_cache": 1296},
                    attach=False)
    assert _fds() <= before


def _xlated_main(name: str) -> str:
    """The verifier's text of program ``name`` loaded just now, its main function only (the
    BPF functions it calls follow it in bpftool's dump, each under its own header)."""
    import json
    ids = {p["id"] for p in json.loads(subprocess.run(
        ["bpftool", "-j", "prog", "show"], capture_output=True, text=True, check=True).stdout)
        if p.get("name") == name}
    prog = _load()
    try:
        new = [p["id"] for p in json.loads(subprocess.run(
            ["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
            check=True).stdout) if p.get("name") == name and p["id"] not in ids]
        assert new, f"{name} not loaded"
        text = subprocess.run(["bpftool", "prog", "dump", "xlated", "id", str(max(new))],
                              capture_output=True, text=True, check=True).stdout
    finally:
        prog.close()
    lines = text.splitlines()
    ends = [i for i, line in enumerate(lines) if i and line and line[0].isalpha()]
    return "\n".join(lines[:ends[0]] if ends else lines)


@pytest.mark.skipif(shutil.which("bpftool") is None, reason="bpftool not installed")
def test_the_per_syscall_part_of_sys_exit_calls_no_map_helper_nor_clock():
    """What every syscall of a followed thread runs before the full path (a BPF function of
    its own, sys_exit_full): loads and adds in the per-CPU cache and arrays, no hash map
    lookup and no clock read, whose calls make the compiler spill (bench/README.md: 47.7 ->
    ~40 ns a run against the empty program's 32.7, bpf_stats). No helper at all: the pid
    lookup of a cache miss is in sys_exit_miss, called. On c0994a2 the hash lookups of the
    full path were inlined into it, on ec1ee29 the pid lookup (fails on both)."""
    import re
    main = _xlated_main("ht_sys_exit")
    helpers = set(re.findall(r"\(85\) call ([A-Za-z_][\w]*)#", main))
    # jiffies: a load where the verifier inlines it (64-bit kernels since 5.6), else a call
    assert helpers <= {"bpf_jiffies64"}, helpers
    assert re.search(r"\(85\) call pc[+-]\d+#\w*sys_exit_full", main), \
        "the full path is called, not inlined"
    assert re.search(r"\(85\) call pc[+-]\d+#\w*sys_exit_miss", main), \
        "who is current is decided in a function of its own, not inlined"


@pytest.mark.skipif(shutil.which("bpftool") is None, reason="bpftool not installed")
def test_the_per_syscall_part_of_sys_exit_passes_no_key_through_the_stack():
    """Every syscall of the machine runs the main function of ht_sys_exit: the per-CPU cache
    is looked up with key 0 read from .rodata, and a followed thread's call no longer looks
    "blocked" up (a sleep makes the cache stale instead): no map key is written to the stack
    and its address passed ("rX = r10"), which costs a store-to-load forward at the head of
    the chain of loads (bench/README.md, fourth round: a bystander's call 36.1 -> 33.9 ns a
    run, the empty program 32.1). The pid helper of a cache miss is in sys_exit_miss, a
    function of its own. On ec1ee29 the key of the cache, of "blocked" and of "procs" went
    through the stack, and the helper was inlined into it (fails there)."""
    import re
    main = _xlated_main("ht_sys_exit")
    assert not re.search(r"\(bf\) r\d = r10", main), main
    assert "bpf_get_current_pid_tgid" not in main and "ns_current_pid" not in main, main
