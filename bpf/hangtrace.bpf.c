/* hangtrace.bpf.c - in-kernel half of hangtrace's eBPF backend (compiled by BCC at attach).
 *
 * Contract (the Python half is tracer/record/backends/ebpf_backend.py; shared layout: hangtrace.h):
 *  - Tracepoints only (no kprobes: the kernels we run on may have none): the raw tracepoints
 *    sys_exit and sched_switch (arguments: registers and task pointers, no tracefs format
 *    needed), and sched:sched_process_fork/exec/exit (trace events: their format comes from
 *    the running kernel's tracefs, so this compiles against another kernel's headers).
 *  - Only sys_exit, not sys_enter: on the kernels we measured, each syscall tracepoint that
 *    has a program costs about as much as a cheap syscall itself, and everything needed is
 *    still there at exit: the number and arguments in the saved registers (struct pt_regs,
 *    the architecture's ABI), the result, and the user memory the call read. When a call
 *    started is only needed for the calls that slept: sched_switch records when a target
 *    thread first went to sleep ("blocked"/threads.blocked_ns), and the exit takes it.
 *  - Only threads of the processes in "procs" (an array indexed by tgid) are looked at.
 *    Userspace fills it with the tree at attach; the fork tracepoint adds children IN THE
 *    KERNEL, before the child runs, so no syscall of a new process is missed.
 *  - Every call is counted per (thread, nr) with the time it spent blocked; writes/sends
 *    and reads/recvs per (thread, fd) with bytes, sizes and first/last time (never streamed);
 *    the calls of the kinds 1..HT_K_STREAMED_MAX are also streamed one by one on the ring
 *    buffer, at most HT_RATE_MAX per thread, cache slot and 100 ms; the others of those kinds
 *    are counted by category (futex waits/wakes, poll timeouts, ioctls per request). Counts
 *    live first in a per-CPU cache owned by the thread that last made a syscall on that CPU
 *    (no hash lookup on the fast path) and move to the hash maps when another thread takes
 *    the cache over, or when a slot changes hands. Nothing is deleted while recording, so
 *    threads and processes that exit keep their counts until userspace reads them.
 *  - Nothing from a user buffer is ever copied: only syscall arguments, timeouts (struct
 *    timespec/timeval), the first pollfd fds, NVIDIA RM control cmd / alloc class (u32 fields
 *    of the ioctl parameter struct) and clone3's flags.
 */
#include "hangtrace.h"

#ifndef HT_PID_MAX
#define HT_PID_MAX 4194304   /* set by userspace from /proc/sys/kernel/pid_max */
#endif
#ifndef HT_FUTEX_WAIT_MASK   /* bit cmd set for the futex commands a thread sleeps in, and */
#define HT_FUTEX_WAIT_MASK 0 /* those that wake others: set by userspace from futex.py     */
#define HT_FUTEX_WAKE_MASK 0
#endif
#define HT_ETIMEDOUT 110

BPF_ARRAY(procs, u8, HT_PID_MAX);     /* index tgid: 1 for a followed process */
BPF_ARRAY(blocked, u8, HT_PID_MAX);   /* index tid: 1 when it slept since its last syscall exit */
BPF_ARRAY(kinds, u32, HT_MAX_NR);
BPF_HASH(threads, u32, struct ht_thread, HT_MAX_THREADS);
BPF_HASH(aggr, struct ht_agg_key, struct ht_agg, HT_MAX_AGG);
BPF_HASH(fds, struct ht_fd_key, struct ht_fd, HT_MAX_FDS);
BPF_HASH(tcounts, struct ht_tkey, struct ht_tcount, HT_MAX_THREADS);
BPF_HASH(ioctls, struct ht_ioc_key, struct ht_ioc, HT_MAX_IOCTLS);
BPF_PERCPU_ARRAY(cache, struct ht_cache, 1);
BPF_ARRAY(counters, u64, HT_NCOUNTERS);
BPF_RINGBUF_OUTPUT(events, HT_RINGBUF_PAGES);

/* The saved user registers (struct pt_regs) as the architecture's ABI lays them out. At
 * sys_exit x86_64 still holds all six arguments; arm64 has overwritten x0 with the result
 * and keeps the first argument in orig_x0. */
#if defined(bpf_target_x86)
struct ht_regs {
    u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax;
};
#define HT_REGS_NR(r) ((s32)(r)->orig_ax)
#define HT_REGS_ARG0(r) ((r)->di)
#define HT_REGS_ARG2(r) ((r)->dx)
#define HT_REGS_ARG4(r) ((r)->r8)
#elif defined(bpf_target_arm64)
struct ht_regs {
    u64 regs[31];
    u64 sp, pc, pstate, orig_x0;
    s32 syscallno;
    u32 unused2;
};
#define HT_REGS_NR(r) ((r)->syscallno)
#define HT_REGS_ARG0(r) ((r)->orig_x0)
#define HT_REGS_ARG2(r) ((r)->regs[2])
#define HT_REGS_ARG4(r) ((r)->regs[4])
#else
#error "hangtrace.bpf.c: struct ht_regs is only declared for x86_64 and arm64"
#endif

struct ht_call {
    s32 nr;
    u64 a[6];
};

struct ht_ts {
    s64 sec;
    s64 frac;   /* ns for a timespec, µs for a timeval */
};

static __always_inline void bump(u32 idx)
{
    u64 *c = counters.lookup(&idx);
    if (c)
        __sync_fetch_and_add(c, 1);
}

static __always_inline int is_target(u32 tgid)
{
    u8 *v = procs.lookup(&tgid);   /* an array lookup: inlined by the verifier, no helper call */
    return v && *v;
}

/* The number and first argument: one small read (a helper call, the dearest step here). */
static __always_inline int read_nr(void *regs, struct ht_call *c)
{
#if defined(bpf_target_x86)
    struct { u64 di, orig_ax; } x = {};
    if (bpf_probe_read_kernel(&x, sizeof(x), regs + 112) != 0)
        return -1;
    c->nr = (s32)x.orig_ax;
    c->a[0] = x.di;
#else
    struct { u64 orig_x0; s32 syscallno; u32 unused2; } x = {};
    if (bpf_probe_read_kernel(&x, sizeof(x), regs + 272) != 0)
        return -1;
    c->nr = x.syscallno;
    c->a[0] = x.orig_x0;
#endif
    return 0;
}

/* The other five arguments, for the calls that need them. */
static __always_inline void read_args(void *regs, struct ht_call *c)
{
#if defined(bpf_target_x86)
    struct { u64 r10, r9, r8, ax, cx, dx, si; } x = {};   /* offsets 56 .. 112 */
    bpf_probe_read_kernel(&x, sizeof(x), regs + 56);
    c->a[1] = x.si;
    c->a[2] = x.dx;
    c->a[3] = x.r10;
    c->a[4] = x.r8;
    c->a[5] = x.r9;
#else
    u64 r[6] = {};
    bpf_probe_read_kernel(&r, sizeof(r), regs);
    c->a[1] = r[1];
    c->a[2] = r[2];
    c->a[3] = r[3];
    c->a[4] = r[4];
    c->a[5] = r[5];
#endif
}

static __always_inline u32 kind_of(s32 nr)
{
    u32 kv = HT_K_NONE | ((HT_SLOTS - 1) << HT_SLOT_SHIFT);   /* nr out of the table */
    if (nr >= 0 && nr < HT_MAX_NR) {
        u32 k = nr;
        u32 *kp = kinds.lookup(&k);
        if (kp)
            kv = *kp;
    }
    return kv;
}

/* The clock, read at most once per scheduler tick per CPU (jiffies is one load, the clock
 * about 40 ns in a KVM guest): stamps of per-fd traffic and the stream window. A stamp is at
 * most one tick (1-10 ms) earlier than the call it stands for. */
static __always_inline u64 tick_ns(struct ht_cache *k)
{
    u64 j = bpf_jiffies64();
    if (j != k->tick_j) {
        k->tick_j = j;
        k->tick_ns = bpf_ktime_get_ns();
    }
    return k->tick_ns;
}

/* Counting: the per-CPU cache, its flush to the maps, per-fd and per-category counts. */
#include "ht_count.bpf.h"

/* Streaming: what a call streamed one by one carries, and the budget. */
#include "ht_stream.bpf.h"

/* When the thread first slept in the call that now ends (0: it did not sleep), and the
 * timeout read then (*to: ns + 1, 0 if none). */
static __always_inline u64 take_blocked(u32 tid, u64 *to)
{
    u8 *b = blocked.lookup(&tid);
    if (!b || !*b)
        return 0;
    *b = 0;
    struct ht_thread *t = threads.lookup(&tid);
    if (!t)
        return 0;
    u64 since = t->blocked_ns;
    *to = t->blocked_to;
    t->blocked_ns = 0;
    t->blocked_to = 0;
    return since;
}

/* The timeout a ppoll/select/pselect6 was given, read when it first goes to sleep: before it
 * returns, the kernel replaces it with the time left. ns + 1, or 0. */
static __always_inline u64 timeout_at_sleep(void)
{
    struct ht_regs *r = (struct ht_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
    if (!r)
        return 0;
    u32 kind = kind_of(HT_REGS_NR(r)) & HT_KIND_MASK;
    u64 ptr = kind == HT_K_PPOLL ? HT_REGS_ARG2(r) : HT_REGS_ARG4(r);
    u64 frac_ns = kind == HT_K_SELECT ? 1000 : 1;
    struct ht_ts ts = {};
    if ((kind != HT_K_PPOLL && kind != HT_K_SELECT && kind != HT_K_PSELECT) || !ptr ||
        bpf_probe_read_user(&ts, sizeof(ts), (void *)ptr) != 0)
        return 0;
    return (u64)ts.sec * 1000000000ULL + (u64)ts.frac * frac_ns + 1;
}

/* ---------------------------------------------------------------- probes */
/* Raw tracepoint: called with (struct pt_regs *, long ret), no perf record built. */
RAW_TRACEPOINT_PROBE(sys_exit)
{
    u64 id = bpf_get_current_pid_tgid();
    u32 tgid = id >> 32, tid = (u32)id;
    if (!is_target(tgid))
        return 0;
    struct ht_call c = {};
    if (read_nr((void *)ctx->args[0], &c) != 0)
        return 0;
    s64 ret = (s64)ctx->args[1];
    u32 kv = kind_of(c.nr);
    u32 kind = kv & HT_KIND_MASK;
    u32 s = (kv >> HT_SLOT_SHIFT) & (HT_SLOTS - 1);
    u32 z = 0;
    struct ht_cache *k = cache.lookup(&z);
    if (!k)
        return 0;
    if (k->tid != tid || k->tgid != tgid)
        take_over(k, tid, tgid);
    u64 to = 0;
    u64 since = take_blocked(tid, &to);
    u64 now = since ? bpf_ktime_get_ns() : 0;
    if (k->c_nr[s] != c.nr) {
        k->seq += 1;
        flush_slot(k, s);
        k->seq += 1;
        k->c_nr[s] = c.nr;
    }
    k->c_count[s] += 1;
    if (since && now > since)
        k->c_ns[s] += now - since;
    if (kind == HT_K_WRITE || kind == HT_K_READ) {
        count_fd(k, kind, (s32)c.a[0], ret, kv & HT_KV_MSGS);
        return 0;
    }
    if (kind == HT_K_NONE || kind > HT_K_STREAMED_MAX)
        return 0;
    read_args((void *)ctx->args[0], &c);
    if (in_budget(k, s)) {
        if (!now)
            now = bpf_ktime_get_ns();
        if (stream(&c, tgid, tid, kind, ret, since, now, to)) {
            k->c_streamed[s] += 1;
            return 0;
        }
    }
    count_category(k, tid, tgid, kind, &c, ret);
    return 0;
}

/* sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next,
 * unsigned int prev_state): runs on the CPU that switches, prev being current. Only prev is
 * looked at (next's pid would need task_struct offsets): its slice ends now; the next one on
 * this CPU starts now ("last_switch_ns"). A target thread that leaves the CPU to sleep (not
 * preempted, prev_state not TASK_RUNNING) is blocked from now on: its syscall exit takes
 * the time. Sleeping outside a syscall (a page fault on a file mapping) is rare, and is
 * then counted as part of its next call. */
RAW_TRACEPOINT_PROBE(sched_switch)
{
    u64 now = bpf_ktime_get_ns();
    u32 z = 0;
    struct ht_cache *k = cache.lookup(&z);
    if (!k)
        return 0;
    u64 id = bpf_get_current_pid_tgid();
    u32 tgid = id >> 32, tid = (u32)id;
    if (tid != 0 && is_target(tgid)) {
        struct ht_thread *t = threads.lookup(&tid);
        if (!t) {
            struct ht_thread zero = {};
            zero.tgid = tgid;
            threads.insert(&tid, &zero);
            t = threads.lookup(&tid);
            if (!t)
                bump(HT_C_THREADS_FULL);
        }
        if (t) {
            u64 in = k->last_switch_ns > t->last_in_ns ? k->last_switch_ns : t->last_in_ns;
            if (in && now > in)
                t->on_cpu_ns += now - in;
            t->switches += 1;
            if (!ctx->args[0] && (u32)ctx->args[3] != 0) {
                if (t->blocked_ns == 0) {
                    t->blocked_ns = now;
                    t->blocked_to = timeout_at_sleep();
                }
                u8 *b = blocked.lookup(&tid);   /* inlined, unlike an update() */
                if (b)
                    *b = 1;
            }
        }
    }
    k->last_switch_ns = now;
    return 0;
}

/* Runs in the parent (current), after the child is fully set up but before it first runs.
 * The tracepoint does not carry the clone flags: they are in the parent's saved registers
 * (clone's flags, clone3's struct pointer), which bpf_task_pt_regs reaches for current. */
TRACEPOINT_PROBE(sched, sched_process_fork)
{
    u64 id = bpf_get_current_pid_tgid();
    u32 ptgid = id >> 32, ptid = (u32)id;
    if (!is_target(ptgid))
        return 0;
    u32 child = args->child_pid;
    u32 flags = HT_F_NEW_PROCESS;
    struct ht_regs *r = (struct ht_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
    s32 nr = r ? HT_REGS_NR(r) : -1;
    u64 arg0 = r ? HT_REGS_ARG0(r) : 0;
    u32 kind = kind_of(nr) & HT_KIND_MASK;
    if (kind == HT_K_CLONE) {
        if (arg0 & HT_CLONE_THREAD)
            flags = 0;
    } else if (kind == HT_K_CLONE3) {
        u64 cflags = 0;   /* struct clone_args starts with u64 flags */
        if (bpf_probe_read_user(&cflags, sizeof(cflags), (void *)arg0) != 0)
            flags |= HT_F_GUESSED;
        else if (cflags & HT_CLONE_THREAD)
            flags = 0;
    } else if (kind != HT_K_FORK) {
        flags |= HT_F_GUESSED;   /* a kernel-internal clone (io_uring worker...): userspace checks */
    }
    u32 ctgid = (flags & HT_F_NEW_PROCESS) ? child : ptgid;
    if (flags & HT_F_NEW_PROCESS) {
        u8 one = 1;
        procs.update(&ctgid, &one);
    }
    /* not on CPU yet: its first switch-in starts its first slice */
    struct ht_thread t = {};
    t.tgid = ctgid;
    if (threads.update(&child, &t) != 0)
        bump(HT_C_THREADS_FULL);
    struct ht_event *e = events.ringbuf_reserve(sizeof(struct ht_event));
    if (!e) {
        bump(HT_C_RINGBUF_FULL);
        return 0;
    }
    __builtin_memset(e, 0, sizeof(*e));
    e->type = HT_EV_FORK;
    e->tgid = ptgid;
    e->tid = ptid;
    e->args[0] = child;
    e->args[1] = ctgid;
    e->flags = flags;
    e->enter_ns = e->exit_ns = bpf_ktime_get_ns();
    events.ringbuf_submit(e, 0);
    return 0;
}

/* exec keeps the tgid, so "procs" needs no change. When a thread other than the leader
 * execs, the kernel first kills every other thread (the leader included: its exit is seen
 * below) and the exec'ing thread takes over the leader's tid: old_pid -> pid. Its state
 * moves with it; the counts made under the old tid stay under it. */
TRACEPOINT_PROBE(sched, sched_process_exec)
{
    u64 id = bpf_get_current_pid_tgid();
    u32 tgid = id >> 32;
    if (!is_target(tgid))
        return 0;
    u32 pid = args->pid, old = args->old_pid;
    if (pid != old) {
        struct ht_thread *ot = threads.lookup(&old);
        if (ot) {
            struct ht_thread moved = *ot;
            moved.blocked_ns = 0;
            moved.blocked_to = 0;
            threads.update(&pid, &moved);
            threads.delete(&old);
        }
    }
    struct ht_event *e = events.ringbuf_reserve(sizeof(struct ht_event));
    if (!e) {
        bump(HT_C_RINGBUF_FULL);
        return 0;
    }
    __builtin_memset(e, 0, sizeof(*e));
    e->type = HT_EV_EXEC;
    e->tgid = tgid;
    e->tid = pid;
    e->args[0] = old;
    e->enter_ns = e->exit_ns = bpf_ktime_get_ns();
    events.ringbuf_submit(e, 0);
    return 0;
}

/* Fires in do_exit() for every exiting thread, before it becomes a zombie (the exit code is
 * in task_struct, which we do not read: userspace reads the zombie's /proc stat). The
 * exiting thread is current: its last slice ends now. Its counts stay in the cache or the
 * maps until userspace reads them. */
TRACEPOINT_PROBE(sched, sched_process_exit)
{
    u32 tid = args->pid;
    struct ht_thread *t = threads.lookup(&tid);
    if (!t)
        return 0;
    u64 now = bpf_ktime_get_ns();
    u32 tgid = t->tgid;
    u32 z = 0;
    struct ht_cache *k = cache.lookup(&z);
    u64 on_cpu = t->on_cpu_ns;
    if (k) {
        u64 in = k->last_switch_ns > t->last_in_ns ? k->last_switch_ns : t->last_in_ns;
        if (in && now > in)
            on_cpu += now - in;
    }
    u64 switches = t->switches;
    u64 group_dead = 2;
#ifdef HT_HAVE_GROUP_DEAD
    group_dead = args->group_dead ? 1 : 0;
    /* The whole thread group is gone: forget the tgid (pids are reused). Without group_dead
     * (kernels < 6.x) userspace clears it once /proc shows the process gone. */
    if (group_dead) {
        u8 zero = 0;
        procs.update(&tgid, &zero);
    }
#endif
    u8 *b = blocked.lookup(&tid);
    if (b)
        *b = 0;
    threads.delete(&tid);
    struct ht_event *e = events.ringbuf_reserve(sizeof(struct ht_event));
    if (!e) {
        bump(HT_C_RINGBUF_FULL);
        return 0;
    }
    __builtin_memset(e, 0, sizeof(*e));
    e->type = HT_EV_EXIT;
    e->tgid = tgid;
    e->tid = tid;
    e->args[0] = group_dead;
    e->args[1] = on_cpu;
    e->args[2] = switches;
    e->enter_ns = e->exit_ns = now;
    events.ringbuf_submit(e, 0);
    return 0;
}
