/* floor.bpf.c - empty programs on the syscall exit tracepoint: what any syscall tracing costs
 * on a kernel, before a program does anything (bench/overhead.py measures hangtrace against
 * it). floor_tp_btf is on the tracepoint as hangtrace's CO-RE object attaches (tp_btf),
 * floor_raw_tp as BCC attaches it (raw_tp); a benchmark loads one of them.
 */
#include "ht_dialect.bpf.h"

HT_LICENSE;

#ifdef HT_BCC
RAW_TRACEPOINT_PROBE(sys_exit)
{
    return 0;
}
#else
SEC("tp_btf/sys_exit")
int BPF_PROG(floor_tp_btf, struct pt_regs *regs, long ret)
{
    return 0;
}

SEC("raw_tp/sys_exit")
int floor_raw_tp(void *ctx)
{
    return 0;
}
#endif
