"""One BPF source, two loaders (tracer/record/backends/ebpf/source.py, bpf/ht_dialect.bpf.h):
the text BCC compiles is the libbpf source with its parts spliced in and its map calls
rewritten; the CO-RE objects are found in one place. Needs neither root, nor BCC, nor clang.
"""
from __future__ import annotations

import re

import pytest

from tracer.record.backends.ebpf import source as S

PROGRAMS = sorted(p.name[:-len(".bpf.c")] for p in S.BPF_DIR.glob("*.bpf.c"))


def test_the_programs_are_the_ones_the_loaders_know():
    assert PROGRAMS == ["cuda_calls", "floor", "hangtrace"]
    for name in PROGRAMS:
        assert S.object_path(name) == S.BPF_DIR / f"{name}.bpf.o"
        assert S.source_path(name).exists()


@pytest.mark.parametrize("name", PROGRAMS)
def test_bcc_text_has_every_part_spliced_and_no_libbpf_map_call_left(name):
    text = S.bcc_text(name)
    assert '#include "ht_' not in text
    assert S.libbpf_calls_left(text) == []
    assert '#include "ht_dialect.bpf.h"' in S.source_path(name).read_text()
    assert "#ifdef HT_BCC" in text          # the dialect came along


def test_the_main_program_splices_all_its_parts_in_order():
    text = S.bcc_text("hangtrace")
    parts = [m for m in re.findall(r'#include "(ht_\w+\.bpf\.h)"',
                                   S.source_path("hangtrace").read_text())]
    assert parts == ["ht_dialect.bpf.h", "ht_pidns.bpf.h", "ht_regs.bpf.h", "ht_count.bpf.h",
                     "ht_stream.bpf.h", "ht_probes.bpf.h"]
    positions = [text.index((S.BPF_DIR / p).read_text().splitlines()[0]) for p in parts]
    assert positions == sorted(positions)
    # BCC's entry points and the handlers they call are all in its one text
    assert "RAW_TRACEPOINT_PROBE(sys_exit)" in text and "flush_slot" in text
    assert 'SEC("tp_btf/sys_exit")' in text     # the libbpf half stays, behind #else


REWRITES = [
    ("u8 *v = bpf_map_lookup_elem(&procs, &tgid);", "u8 *v = procs.lookup(&tgid);"),
    ("bpf_map_update_elem(&threads, &tid, &zero, BPF_NOEXIST);",
     "threads.insert(&tid, &zero);"),
    ("if (bpf_map_update_elem(&threads, &child, &t, BPF_ANY) != 0)",
     "if (threads.update(&child, &t) != 0)"),
    ("bpf_map_delete_elem(&threads, &old);", "threads.delete(&old);"),
    ("e = bpf_ringbuf_reserve(&events, sizeof(struct ht_event), 0);",
     "e = events.ringbuf_reserve(sizeof(struct ht_event));"),
    ("bpf_ringbuf_submit(e, 0);", "bpf_ringbuf_submit(e, 0);"),   # BCC has the helper itself
]


@pytest.mark.parametrize("libbpf,bcc", REWRITES)
def test_each_map_call_form_is_rewritten_into_bccs_method_call(libbpf, bcc, tmp_path,
                                                                 monkeypatch):
    (tmp_path / "x.bpf.c").write_text(libbpf + "\n")
    monkeypatch.setattr(S, "BPF_DIR", tmp_path)
    assert S.bcc_text("x").strip() == bcc


def test_an_unknown_form_is_named_not_silently_passed():
    assert S.libbpf_calls_left("bpf_map_update_elem(&m, &k, &v, flags);") == [
        "bpf_map_update_elem(&m"]

