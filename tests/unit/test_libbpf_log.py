"""libbpf's messages (tracer/record/backends/ebpf/libbpf.py): a rejected program's error line
carries the verifier's own reason, picked out of its log. No root, no libbpf needed."""
from __future__ import annotations


def test_the_verifiers_reason_is_picked_out_of_its_log():
    from tracer.record.backends.ebpf.libbpf import verifier_reason
    log = ["libbpf: prog 'bad': BPF program load failed: Permission denied",
           "libbpf: prog 'bad': -- BEGIN PROG LOAD LOG --",
           "0: R1=ctx() R10=fp0", "; u64 *v = bpf_map_lookup_elem(&small, &k); @ bad.bpf.c:9",
           "8: (79) r6 = *(u64 *)(r0 +800)",
           "invalid access to map value, value_size=8 off=800 size=8",
           "R0 min value is outside of the allowed memory range",
           "processed 8 insns (limit 1000000) max_states_per_insn 0 total_states 0",
           "-- END PROG LOAD LOG --", "libbpf: prog 'bad': failed to load: -13"]
    assert verifier_reason(log) == ("invalid access to map value, value_size=8 off=800 size=8; "
                                    "R0 min value is outside of the allowed memory range")
    assert verifier_reason(log[:1]) == ""
