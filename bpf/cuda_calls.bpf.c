/* cuda_calls.bpf.c - uprobes on libcuda's driver entry points: CUDA graph capture and launch,
 * kernel launches, copies, and the synchronizations and queries that say the GPU's work has
 * completed; and on libnccl's collectives, so that a sync is known to wait for other ranks.
 * One source, two loaders (ht_dialect.bpf.h).
 *
 * Contract (the Python half is tracer/record/backends/ebpf/cuda_uprobes.py, which attaches
 * each entry point to every libcuda symbol of its family: the CUDA runtime reaches them
 * through cuGetProcAddress, with their _v2/_ptsz/_ptds variants):
 *  - on_begin / on_end / on_launch: cuStreamBeginCapture*, cuStreamEndCapture*, cuGraphLaunch*.
 *  - on_kernel: cuLaunchKernel*, cuLaunchCooperativeKernel*; on_copy: cuMemcpy*.
 *  - on_sync (uprobe) and on_sync_ret (uretprobe): cuCtxSynchronize*, cuStreamSynchronize*,
 *    cuEventSynchronize: a sync entered and one that returned (with CUDA_SUCCESS or not).
 *  - on_query_ret (uretprobe): cuStreamQuery*, cuEventQuery: "ready" when it returns
 *    CUDA_SUCCESS (0), "not ready" otherwise (CUDA_ERROR_NOT_READY, 600).
 *  - Only calls of processes in "tgids" count (userspace fills it with the traced tree and keeps
 *    it up to date); other processes using the same libcuda pay one hash lookup per call.
 *  - "counts" holds, per thread (key tgid << 32 | tid), struct cu_count below; times are
 *    CLOCK_MONOTONIC ns. in_sync is the depth of syncs entered and not yet returned, and
 *    sync_enter_ns the entry time of the outermost one: a sync entered and never returned is
 *    a thread whose GPU work did not complete.
 *  - "streams" holds, per (tgid, stream), the last capture call on it: capturing = 1 after a
 *    begin, 0 after an end. The stream is the first argument of the begin/end families
 *    (CUstream hStream). Nothing else of the caller's memory is read.
 *  - on_nccl_K (uprobe, K an NCCL_* operation below) on libnccl's ncclAllReduce, ncclBroadcast,
 *    ...; on_nccl_group on ncclGroupEnd (where grouped operations are launched); on_nccl_init on
 *    ncclCommInitRank*; on_nccl_ret (uretprobe) on all of them. A thread's "collectives" are
 *    the operations it called, last_collective_ns the last one's entry, last_op the last NCCL
 *    call's NCCL_* number; in_nccl / nccl_enter_ns as in_sync for the NCCL calls it is inside.
 *    A kernel, graph or copy launched while in_nccl is 0 is the thread's own work
 *    (last_own_work_ns): one launched inside an NCCL call is the collective's.
 */
#include "ht_dialect.bpf.h"
#ifdef HT_BCC
#include <uapi/linux/ptrace.h>
#endif
/* current_ids: pids as hangtrace numbers them */
#include "ht_pidns.bpf.h"

HT_LICENSE;

#define CU_BEGIN 0
#define CU_END 1
#define CU_LAUNCH 2
#define CU_KERNEL 3
#define CU_COPY 4
#define CU_SYNC 5
#define CU_SYNC_RET 6
#define CU_QUERY_RET 7
#define CU_NCCL 8
#define CU_NCCL_RET 9

/* last_op: the NCCL call (tracer/record/backends/ebpf/cuda_uprobes.py NCCL_OPS, same order) */
#define NCCL_ALLREDUCE 0
#define NCCL_BROADCAST 1
#define NCCL_REDUCE 2
#define NCCL_ALLGATHER 3
#define NCCL_REDUCESCATTER 4
#define NCCL_SEND 5
#define NCCL_RECV 6
#define NCCL_ALLTOALL 7
#define NCCL_GATHER 8
#define NCCL_SCATTER 9
#define NCCL_COLLECTIVES 10    /* operations below this number are collectives */
#define NCCL_GROUP_END 10
#define NCCL_INIT 11

struct cu_count {
    u64 begins;
    u64 ends;
    u64 launches;
    u64 last_begin_ns;
    u64 last_end_ns;
    u64 kernels;
    u64 copies;
    u64 syncs;
    u64 syncs_done;
    u64 syncs_failed;
    u64 queries_ready;
    u64 queries_not_ready;
    u64 in_sync;
    u64 sync_enter_ns;
    u64 last_sync_done_ns;
    u64 last_ready_ns;
    u64 collectives;
    u64 last_collective_ns;
    u64 last_op;
    u64 in_nccl;
    u64 nccl_enter_ns;
    u64 last_own_work_ns;
};

struct cu_stream_key {
    u32 tgid;
    u32 pad;
    u64 stream;
};

struct cu_stream {
    u32 tid;
    u32 capturing;
    u64 ts_ns;
};

HT_HASH(tgids, u32, u8, 65536);
HT_HASH(counts, u64, struct cu_count, 65536);
HT_HASH(streams, struct cu_stream_key, struct cu_stream, 16384);

static __always_inline void on_capture(struct pt_regs *ctx, u32 tgid, u64 id, int begin, u64 now)
{
    struct cu_stream_key k = {};
    k.tgid = tgid;
    k.stream = PT_REGS_PARM1(ctx);
    struct cu_stream s = {};
    s.tid = (u32)id;
    s.capturing = begin;
    s.ts_ns = now;
    bpf_map_update_elem(&streams, &k, &s, BPF_ANY);
}

static __always_inline int on_call(struct pt_regs *ctx, int what, int op)
{
    u64 id = current_ids();   /* pids as hangtrace numbers them (ht_pidns.bpf.h) */
    u32 tgid = id >> 32;
    if (bpf_map_lookup_elem(&tgids, &tgid) == 0)
        return 0;
    struct cu_count *c = bpf_map_lookup_elem(&counts, &id);
    if (c == 0) {
        if (what == CU_SYNC_RET || what == CU_QUERY_RET || what == CU_NCCL_RET)
            return 0;         /* a sync entered before the probes: its return says nothing */
        struct cu_count zero = {};
        bpf_map_update_elem(&counts, &id, &zero, BPF_NOEXIST);
        c = bpf_map_lookup_elem(&counts, &id);
        if (c == 0)
            return 0;
    }
    u64 now = bpf_ktime_get_ns();
    long rc;
    switch (what) {
    case CU_LAUNCH:
        __sync_fetch_and_add(&c->launches, 1);
        if (c->in_nccl == 0)
            c->last_own_work_ns = now;
        break;
    case CU_KERNEL:
        __sync_fetch_and_add(&c->kernels, 1);
        if (c->in_nccl == 0)
            c->last_own_work_ns = now;
        break;
    case CU_COPY:
        __sync_fetch_and_add(&c->copies, 1);
        if (c->in_nccl == 0)
            c->last_own_work_ns = now;
        break;
    case CU_NCCL:
        if (op < NCCL_COLLECTIVES) {
            __sync_fetch_and_add(&c->collectives, 1);
            c->last_collective_ns = now;
        }
        c->last_op = op;
        if (c->in_nccl == 0)
            c->nccl_enter_ns = now;
        c->in_nccl += 1;
        break;
    case CU_NCCL_RET:
        if (c->in_nccl > 0)
            c->in_nccl -= 1;
        break;
    case CU_SYNC:
        __sync_fetch_and_add(&c->syncs, 1);
        if (c->in_sync == 0)
            c->sync_enter_ns = now;
        c->in_sync += 1;
        break;
    case CU_SYNC_RET:
        if (c->in_sync == 0)
            break;            /* entered before the probes were attached */
        c->in_sync -= 1;
        rc = PT_REGS_RC(ctx);
        if ((int)rc == 0) {
            __sync_fetch_and_add(&c->syncs_done, 1);
            c->last_sync_done_ns = now;
        } else {
            __sync_fetch_and_add(&c->syncs_failed, 1);
        }
        break;
    case CU_QUERY_RET:
        rc = PT_REGS_RC(ctx);
        if ((int)rc == 0) {
            __sync_fetch_and_add(&c->queries_ready, 1);
            c->last_ready_ns = now;
        } else {
            __sync_fetch_and_add(&c->queries_not_ready, 1);
        }
        break;
    case CU_BEGIN:
        __sync_fetch_and_add(&c->begins, 1);
        if (c->in_nccl == 0)
            c->last_own_work_ns = now;
        c->last_begin_ns = now;
        on_capture(ctx, tgid, id, 1, now);
        break;
    default:
        __sync_fetch_and_add(&c->ends, 1);
        c->last_end_ns = now;
        on_capture(ctx, tgid, id, 0, now);
        break;
    }
    return 0;
}

/* attached by the loader, to each symbol's file offset (libbpf) or name (BCC) */
HT_UPROBE int on_begin(struct pt_regs *ctx) { return on_call(ctx, CU_BEGIN, 0); }
HT_UPROBE int on_end(struct pt_regs *ctx) { return on_call(ctx, CU_END, 0); }
HT_UPROBE int on_launch(struct pt_regs *ctx) { return on_call(ctx, CU_LAUNCH, 0); }
HT_UPROBE int on_kernel(struct pt_regs *ctx) { return on_call(ctx, CU_KERNEL, 0); }
HT_UPROBE int on_copy(struct pt_regs *ctx) { return on_call(ctx, CU_COPY, 0); }
HT_UPROBE int on_sync(struct pt_regs *ctx) { return on_call(ctx, CU_SYNC, 0); }
HT_URETPROBE int on_sync_ret(struct pt_regs *ctx) { return on_call(ctx, CU_SYNC_RET, 0); }
HT_URETPROBE int on_query_ret(struct pt_regs *ctx) { return on_call(ctx, CU_QUERY_RET, 0); }
HT_UPROBE int on_nccl_allreduce(struct pt_regs *ctx) { return on_call(ctx, CU_NCCL, NCCL_ALLREDUCE); }
HT_UPROBE int on_nccl_broadcast(struct pt_regs *ctx) { return on_call(ctx, CU_NCCL, NCCL_BROADCAST); }
HT_UPROBE int on_nccl_reduce(struct pt_regs *ctx) { return on_call(ctx, CU_NCCL, NCCL_REDUCE); }
HT_UPROBE int on_nccl_allgather(struct pt_regs *ctx) { return on_call(ctx, CU_NCCL, NCCL_ALLGATHER); }
HT_UPROBE int on_nccl_reducescatter(struct pt_regs *ctx)
{ return on_call(ctx, CU_NCCL, NCCL_REDUCESCATTER); }
HT_UPROBE int on_nccl_send(struct pt_regs *ctx) { return on_call(ctx, CU_NCCL, NCCL_SEND); }
HT_UPROBE int on_nccl_recv(struct pt_regs *ctx) { return on_call(ctx, CU_NCCL, NCCL_RECV); }
HT_UPROBE int on_nccl_alltoall(struct pt_regs *ctx) { return on_call(ctx, CU_NCCL, NCCL_ALLTOALL); }
HT_UPROBE int on_nccl_gather(struct pt_regs *ctx) { return on_call(ctx, CU_NCCL, NCCL_GATHER); }
HT_UPROBE int on_nccl_scatter(struct pt_regs *ctx) { return on_call(ctx, CU_NCCL, NCCL_SCATTER); }
HT_UPROBE int on_nccl_group(struct pt_regs *ctx) { return on_call(ctx, CU_NCCL, NCCL_GROUP_END); }
HT_UPROBE int on_nccl_init(struct pt_regs *ctx) { return on_call(ctx, CU_NCCL, NCCL_INIT); }
HT_URETPROBE int on_nccl_ret(struct pt_regs *ctx) { return on_call(ctx, CU_NCCL_RET, 0); }
