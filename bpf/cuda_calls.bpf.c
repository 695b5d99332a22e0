/* cuda_graph.bpf.c - uprobes on libcuda's CUDA graph calls. One source, two loaders
 * (ht_dialect.bpf.h): the CO-RE object loaded with libbpf, or BCC compiling it at attach.
 *
 * Contract (the Python half is tracer/record/backends/ebpf/cuda_uprobes.py):
 *  - Three entry points, attached as uprobes to every libcuda symbol of their family that the
 *    library exports: on_begin (cuStreamBeginCapture, _v2, _ptsz, ToGraph), on_end
 *    (cuStreamEndCapture[_ptsz]), on_launch (cuGraphLaunch[_ptsz]). The CUDA runtime's
 *    cudaStreamBeginCapture / cudaStreamEndCapture / cudaGraphLaunch reach them.
 *  - Only calls of processes in "tgids" count (userspace fills it with the traced tree and keeps
 *    it up to date); other processes using the same libcuda pay one hash lookup per call.
 *  - "counts" holds, per thread (key tgid << 32 | tid), how many captures were begun and ended
 *    and graphs launched, and the CLOCK_MONOTONIC ns of the last begin and end.
 *  - "streams" holds, per (tgid, stream), the last capture call on it: capturing = 1 after a
 *    begin, 0 after an end. The stream is the first argument of all three begin/end families
 *    (CUstream hStream). Nothing else of the caller's memory is read.
 */
#include "ht_dialect.bpf.h"
#ifdef HT_BCC
#include <uapi/linux/ptrace.h>
#endif

HT_LICENSE;

#define CG_BEGIN 0
#define CG_END 1
#define CG_LAUNCH 2

struct cg_count {
    u64 begins;
    u64 ends;
    u64 launches;
    u64 last_begin_ns;
    u64 last_end_ns;
};

struct cg_stream_key {
    u32 tgid;
    u32 pad;
    u64 stream;
};

struct cg_stream {
    u32 tid;
    u32 capturing;
    u64 ts_ns;
};

HT_HASH(tgids, u32, u8, 65536);
HT_HASH(counts, u64, struct cg_count, 65536);
HT_HASH(streams, struct cg_stream_key, struct cg_stream, 16384);

static __always_inline int on_call(struct pt_regs *ctx, int what)
{
    u64 id = bpf_get_current_pid_tgid();
    u32 tgid = id >> 32;
    if (bpf_map_lookup_elem(&tgids, &tgid) == 0)
        return 0;
    struct cg_count *c = bpf_map_lookup_elem(&counts, &id);
    if (c == 0) {
        struct cg_count zero = {};
        bpf_map_update_elem(&counts, &id, &zero, BPF_NOEXIST);
        c = bpf_map_lookup_elem(&counts, &id);
        if (c == 0)
            return 0;
    }
    u64 now = bpf_ktime_get_ns();
    if (what == CG_LAUNCH) {
        __sync_fetch_and_add(&c->launches, 1);
        return 0;
    }
    if (what == CG_BEGIN) {
        __sync_fetch_and_add(&c->begins, 1);
        c->last_begin_ns = now;
    } else {
        __sync_fetch_and_add(&c->ends, 1);
        c->last_end_ns = now;
    }
    struct cg_stream_key k = {};
    k.tgid = tgid;
    k.stream = PT_REGS_PARM1(ctx);
    struct cg_stream s = {};
    s.tid = (u32)id;
    s.capturing = what == CG_BEGIN;
    s.ts_ns = now;
    bpf_map_update_elem(&streams, &k, &s, BPF_ANY);
    return 0;
}

/* attached by the loader, to each symbol's file offset (libbpf) or name (BCC) */
HT_UPROBE int on_begin(struct pt_regs *ctx) { return on_call(ctx, CG_BEGIN); }
HT_UPROBE int on_end(struct pt_regs *ctx) { return on_call(ctx, CG_END); }
HT_UPROBE int on_launch(struct pt_regs *ctx) { return on_call(ctx, CG_LAUNCH); }
