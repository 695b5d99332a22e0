/* hangtrace.bpf.c - in-kernel half of hangtrace's eBPF backend. One source, two loaders
 * (ht_dialect.bpf.h): a CO-RE object built once by scripts/build_bpf.py and loaded with
 * libbpf, or BCC compiling this text at attach.
 *
 * Contract (the Python half is tracer/record/backends/ebpf/; shared layout: hangtrace.h):
 *  - Tracepoints only (no kprobes, no fentry: the kernels we run on may have neither): sys_exit,
 *    sched_switch, sched_process_fork/exec/exit. libbpf attaches them as BTF raw tracepoints
 *    (tp_btf: typed arguments, kernel structs read directly with CO-RE offsets); BCC as raw
 *    tracepoints (sys_exit, sched_switch: registers and pointers read with probe reads) and
 *    trace events (fork/exec/exit: argument layout from the running kernel's tracefs).
 *  - Only sys_exit, not sys_enter: each syscall tracepoint that has a program costs every
 *    syscall of the machine (the slow path), and everything needed is still there at exit:
 *    the number and arguments in the saved registers (ht_regs.bpf.h), the result, and the
 *    user memory the call read. When a call started is only needed for the calls that slept:
 *    sched_switch records when a target thread first went to sleep ("blocked"/
 *    threads.blocked_ns), and the exit takes it.
 *  - Only threads of the processes in "procs" (an array indexed by tgid) are looked at: one
 *    inlined array lookup per syscall of any other process. Userspace fills it with the tree
 *    at attach; the fork tracepoint adds children IN THE KERNEL, before the child runs, so no
 *    syscall of a new process is missed.
 *  - Every call is counted per (thread, nr) with the time it spent blocked; writes/sends
 *    and reads/recvs per (thread, fd) with bytes, sizes and first/last time (never streamed);
 *    the calls of the kinds 1..HT_K_STREAMED_MAX are also streamed one by one on the ring
 *    buffer, at most HT_RATE_MAX per thread, cache slot and 100 ms; the others of those kinds
 *    are counted by category (futex waits/wakes, poll timeouts, ioctls per request). Calls
 *    not streamed that fail are counted per (thread, nr, errno) in "fails" (the answers an
 *    event loop gets all the time skipped: struct ht_fail_key). Counts
 *    live first in a per-CPU cache owned by the thread that last made a syscall on that CPU
 *    (no hash lookup on the fast path) and move to the hash maps when another thread takes
 *    the cache over, or when a slot changes hands. The common call (its owner's repeated
 *    write/read or uncategorized call, no sleep) is counted by sys_exit_fast with no helper
 *    call; the rest by sys_exit_full, a BPF function of its own (bench/README.md: the
 *    cost). Nothing is deleted while recording, so threads and processes that exit keep
 *    their counts until userspace reads them.
 *  - Nothing from a user buffer is ever copied: only syscall arguments, timeouts (struct
 *    timespec/timeval), the first pollfd fds, NVIDIA RM control cmd / alloc class (u32 fields
 *    of the ioctl parameter struct) and clone3's flags.
 */
#include "ht_dialect.bpf.h"
#include "hangtrace.h"

#ifndef HT_PID_MAX
#define HT_PID_MAX 4194304   /* PID_MAX_LIMIT; the loader sizes the arrays to kernel.pid_max */
#endif
#define HT_ETIMEDOUT 110

HT_LICENSE;
/* bit cmd set for the futex commands a thread sleeps in / that wake others (futex.py) */
HT_SETTING(u32, futex_wait_mask);
HT_SETTING(u32, futex_wake_mask);

HT_ARRAY(procs, u8, HT_PID_MAX);     /* index tgid: 0, or its program image (1..255): followed */
HT_ARRAY(blocked, u8, HT_PID_MAX);   /* index tid: 1 when it slept since its last syscall exit */
#ifndef HT_BCC
HT_ARRAY(cachecpu, u16, HT_PID_MAX); /* index tid: 1 + the CPU whose cache last said a followed
                                      * thread was current (0: none): forget_current */
#endif
#ifdef HT_BCC
HT_ARRAY(kinds, u32, HT_MAX_NR);
#else
/* The "kinds" table as a global (map ".data.kinds", the whole table the value of key 0): read
 * by a direct load, no key on the stack (kind_of). */
u32 ht_kinds[HT_MAX_NR] SEC(".data.kinds") = {};
#endif
HT_HASH(threads, u32, struct ht_thread, HT_MAX_THREADS);
HT_HASH(aggr, struct ht_agg_key, struct ht_agg, HT_MAX_AGG);
HT_HASH(fds, struct ht_fd_key, struct ht_fd, HT_MAX_FDS);
HT_HASH(tcounts, struct ht_tkey, struct ht_tcount, HT_MAX_THREADS);
HT_HASH(ioctls, struct ht_ioc_key, struct ht_ioc, HT_MAX_IOCTLS);
HT_HASH(fails, struct ht_fail_key, struct ht_fail, HT_MAX_FAILS);
HT_HASH(fdseen, struct ht_seen_key, u8, HT_MAX_FDSEEN);
HT_PERCPU_ARRAY(cache, struct ht_cache, 1);
#ifdef HT_BCC
#define HT_KEY0 (&(u32){0})
#else
/* Key 0 of the per-CPU cache, read from .rodata: a load whose address is a constant, that
 * the CPU issues at once, where a key written to the stack is read back through a
 * store-to-load forward at the head of every syscall's chain of loads. */
const volatile u32 ht_key0 = 0;
#define HT_KEY0 ((void *)&ht_key0)
#endif
HT_ARRAY(counters, u64, HT_NCOUNTERS);
#ifdef HT_BCC
HT_ARRAY(gen, u64, HT_NGEN);         /* HT_GEN_*: what makes the per-CPU "cur_*" stale */
#else
/* The same two counters as globals: a direct load each (an array lookup costs a key on the
 * stack and a bounds check, on every syscall of the machine). Userspace writes ht_ugen, alone
 * in its own section (map ".data.gen": one 8-byte value under key 0, as gen[HT_GEN_USER] is
 * with BCC), so its write never races the kernel's increments of ht_kgen (.bss). */
u64 ht_ugen SEC(".data.gen") = 0;
u64 ht_kgen = 0;
#endif
HT_RINGBUF(events, HT_RINGBUF_PAGES);

/* Whose pid numbers: the host's or those of hangtrace's pid namespace (current_ids, task_ids). */
#include "ht_pidns.bpf.h"

/* Registers: the syscall's number and arguments (differs by loader and architecture). */
#include "ht_regs.bpf.h"

struct ht_ts {
    s64 sec;
    s64 frac;   /* ns for a timespec, µs for a timeval */
};

static __always_inline void bump(u32 idx)
{
    u64 *c = bpf_map_lookup_elem(&counters, &idx);
    if (c)
        __sync_fetch_and_add(c, 1);
}

/* Its "procs" value: 0 when not followed, else the program image it runs (1..255, moved on at
 * each exec: what HT_EV_FD is told once per). */
static __always_inline u32 is_target(u32 tgid)
{
    u8 *v = bpf_map_lookup_elem(&procs, &tgid);   /* an array: inlined, no helper call */
    return v ? *v : 0;
}

#ifdef HT_BCC
static __always_inline u64 gen_of(u32 which)
{
    u64 *g = bpf_map_lookup_elem(&gen, &which);   /* an array: inlined */
    return g ? *g : 0;
}
#define HT_UGEN() gen_of(HT_GEN_USER)
#define HT_KGEN() gen_of(HT_GEN_KERNEL)
#else
#define HT_UGEN() (*(volatile u64 *)&ht_ugen)
#define HT_KGEN() (*(volatile u64 *)&ht_kgen)
#endif

/* Who the task making this syscall (its saved registers at "regs") is, decided again: one
 * helper call (current_ids: the pid numbers of hangtrace's namespace) and a "procs" lookup,
 * kept in the per-CPU cache (k->cur_tid, k->cur_tgid, k->cur_target) for the next syscalls,
 * valid while the task is the same (its registers' address) and the "gen" sum "gen" has not
 * moved. Returns its "procs" value (0: not followed). The cache is looked at by on_sys_exit:
 * loads and compares, no call (a helper call is dear where returns are mitigated, as with
 * AMD's Safe RET). The registers say which task it is, not the last context switch this CPU
 * saw: a switch is not always where one would expect it (measured on this VM's kernel: tasks
 * ran on a CPU after a traced switch to another). */
static __always_inline u32 decide_current(struct ht_cache *k, ht_regs_t *regs, u64 gen)
{
    u64 id = current_ids();   /* 0: a task outside hangtrace's pid namespace */
    u32 target = is_target(id >> 32);
    k->cur_tid = (u32)id;
    k->cur_tgid = id >> 32;
    k->cur_target = target;
    k->cur_regs = (u64)regs;
    k->cur_gen = gen;
    return target;
}

/* A task stack is freed at exit and may soon hold another task's registers; an exec that
 * takes over the leader's tid changes who the registers are. Either makes every cache
 * stale. So does, where only this is at hand (forget_current), a followed thread's first
 * sleep since its last syscall exit (on_switch): a cache that still says who it is (decided
 * at an exit before that sleep) is what lets its next call take sys_exit_fast, which does
 * not look at "blocked". */
static __always_inline void caches_stale(void)
{
#ifdef HT_BCC
    u32 which = HT_GEN_KERNEL;
    u64 *g = bpf_map_lookup_elem(&gen, &which);
    if (g)
        __sync_fetch_and_add(g, 1);
#else
    __sync_fetch_and_add(&ht_kgen, 1);
#endif
}

/* A followed thread "tid" (tgid "tgid") that slept must not be found current by a per-CPU
 * cache decided before the sleep: its next exit has "blocked" to take (sys_exit_full), which
 * the cache-hit path does not look at. The CO-RE object keeps, per thread, the one CPU whose
 * cache holds it ("cachecpu", written by sys_exit_miss) and makes that cache alone forget it
 * (bpf_map_lookup_percpu_elem, kernel 5.19+): a write to another CPU's cache, harmless as its
 * only effect is a miss (the cache holds the thread's identity, compared whole, or another's,
 * left alone). Elsewhere (BCC, an older kernel) every CPU's cache is made stale, which costs
 * every CPU that makes a syscall a miss (a pid lookup) per followed sleep. */
#ifndef HT_BCC
static __always_inline void forget_on(u32 cpu, u32 tid, u32 tgid)   /* HT_HAVE_PERCPU_ELEM */
{
    struct ht_cache *o = HT_LOOKUP_ON_CPU(cache, HT_KEY0, cpu);
    if (o && o->cur_tid == tid && o->cur_tgid == tgid)
        o->cur_regs = 0;   /* no task's registers are at 0: a miss */
}
#endif

static __always_inline void forget_current(u32 tid, u32 tgid)
{
#ifndef HT_BCC
    if (HT_HAVE_PERCPU_ELEM) {
        u16 *cc = bpf_map_lookup_elem(&cachecpu, &tid);   /* an array: inlined */
        if (cc && *cc)
            forget_on(*cc - 1, tid, tgid);
        return;
    }
#endif
    caches_stale();
}

/* The cache of this CPU ("cpu") now says that followed thread "tid" is current: the one it
 * was in before (another CPU's) forgets it, so that only one cache holds it (forget_current). */
static __always_inline void cached_on(u32 cpu, u32 tid, u32 tgid)
{
#ifndef HT_BCC
    if (HT_HAVE_PERCPU_ELEM) {
        u16 *cc = bpf_map_lookup_elem(&cachecpu, &tid);
        if (!cc)
            return;
        if (*cc && *cc - 1 != cpu)
            forget_on(*cc - 1, tid, tgid);
        *cc = cpu + 1;
    }
#endif
}

static __always_inline u32 kind_of(s32 nr)
{
    u32 kv = HT_K_NONE | ((HT_SLOTS - 1) << HT_SLOT_SHIFT);   /* nr out of the table */
    if (nr >= 0 && nr < HT_MAX_NR) {
#ifdef HT_BCC
        u32 k = nr;
        u32 *kp = bpf_map_lookup_elem(&kinds, &k);
        if (kp)
            kv = *kp;
#else
        u32 i = (u32)nr;
        barrier_var(i);   /* keeps the mask, a bound the verifier sees (clang drops it else) */
        kv = ht_kinds[i & (HT_MAX_NR - 1)];
#endif
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

static __always_inline struct ht_event *new_record(u32 type, u32 tgid, u32 tid, u64 now)
{
    struct ht_event *e = bpf_ringbuf_reserve(&events, sizeof(struct ht_event), 0);
    if (!e) {
        bump(HT_C_RINGBUF_FULL);
        return 0;
    }
    __builtin_memset(e, 0, sizeof(*e));
    e->type = type;
    e->tgid = tgid;
    e->tid = tid;
    e->enter_ns = e->exit_ns = now;
    return e;
}

/* Counting: the per-CPU cache, its flush to the maps, per-fd and per-category counts. */
#include "ht_count.bpf.h"

/* Streaming: what a call streamed one by one carries, and the budget. */
#include "ht_stream.bpf.h"

/* When the thread first slept in the call that now ends (0: it did not sleep), and the
 * timeout read then (*to: ns + 1, 0 if none). */
static __always_inline u64 take_blocked(u32 tid, u64 *to)
{
    u8 *b = bpf_map_lookup_elem(&blocked, &tid);
    if (!b || !*b)
        return 0;
    *b = 0;
    struct ht_thread *t = bpf_map_lookup_elem(&threads, &tid);
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
    ht_regs_t *r = current_regs();
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

/* ---------------------------------------------------------------- handlers */
/* A syscall of any process returns. */
/* A call not streamed that failed (struct ht_fail_key in hangtrace.h says which count). */
static __always_inline void count_failure(u32 tid, u32 tgid, s32 nr, s64 ret)
{
    if (ret >= 0 || ret < -4095)
        return;
    u32 err = (u32)(-ret);
    if (err == 11 || err == 4 || err == HT_ETIMEDOUT || err == 115 || (err >= 512 && err <= 516))
        return;
    struct ht_fail_key key = {};
    key.tid = tid;
    key.tgid = tgid;
    key.nr = nr;
    key.err = err;
    struct ht_fail *f = bpf_map_lookup_elem(&fails, &key);
    if (f) {
        __sync_fetch_and_add(&f->count, 1);
        return;
    }
    struct ht_fail one = {};
    one.count = 1;
    bpf_map_update_elem(&fails, &key, &one, BPF_NOEXIST);
}

/* The common case of a followed thread's call, counted with loads and adds in the cache
 * and arrays alone: no helper call, no hash map, so that the compiler keeps it in registers
 * (the full path's helper calls made it spill everything it held to the stack). It is the
 * cache's owner and did not sleep since its last call (the caller's cache hit: a sleep makes
 * the cache forget it, forget_current), the number's slot counts that number, and the call is either a write/read that
 * count_fd counts, on the fd its slot holds (not the fd's first use), a write of the size of
 * the slot's last write counted in full ("rep": one more of it, in "reps"), within the
 * current tick, or one of a kind counted per number only that did not fail (nothing for
 * count_failure). Exactly what
 * the full path (sys_exit_full) does then; 0: not such a call, nothing done. */
static __always_inline int sys_exit_fast(struct ht_cache *k, ht_regs_t *regs, s64 ret)
{
    u64 j = bpf_jiffies64();   /* inlined: a load; first, while little is live across it */
    if (*(u64 *)&k->tid != *(u64 *)&k->cur_tid)   /* (tid, tgid) against (cur_tid, cur_tgid) */
        return 0;
    struct ht_call c;
    /* one unsigned compare: a number out of the table (negative ones too) takes the full path */
    if (read_nr(regs, &c) != 0 || (u32)c.nr >= HT_MAX_NR)
        return 0;
    u32 kv = kind_of(c.nr);
    u32 kind = kv & HT_KIND_MASK;
    struct ht_cslot *cs = &k->c[(kv >> HT_SLOT_SHIFT) & (HT_SLOTS - 1)];
    if (cs->nr != c.nr)
        return 0;
    if (kind - HT_K_WRITE <= HT_K_READ - HT_K_WRITE) {   /* a write or a read: one compare */
        s32 fd = (s32)c.a[0];
        struct ht_fslot *f = &k->f[(u32)fd & (HT_FD_SLOTS - 1)];
        u64 n = (kv & HT_KV_MSGS) ? 0 : (u64)ret;
        if (!fd_counted(kind, ret) || f->fd != fd || !f->first_ns || j != k->tick_j)
            return 0;
        if (kind == HT_K_READ) {
            f->reads += 1;
            f->rbytes += n;
        } else if (fd_is_rep(f, n)) {
            f->reps += 1;   /* the size of the slot's last write counted in full: one more */
        } else {
            return 0;
        }
        f->last_ns = k->tick_ns;
    } else if ((kind != HT_K_NONE && kind <= HT_K_STREAMED_MAX) || ret < 0) {
        return 0;
    }
    cs->count += 1;
    return 1;
}

/* Every other call of a followed thread: counted, streamed, its sleep taken. A BPF function of
 * its own for libbpf (called, not inlined: its spills stay out of the fast path); BCC inlines
 * it. */
static HT_SUBPROG int sys_exit_full(struct ht_cache *k, ht_regs_t *regs, s64 ret)
{
    struct ht_call c;
    if (read_nr(regs, &c) != 0 || c.nr < 0)   /* -1: no call of the program's (a uretprobe's */
        return 0;                              /* return trap, a call a tracer skipped)      */
    u32 tid = k->cur_tid, tgid = k->cur_tgid;
    u32 kv = kind_of(c.nr);
    u32 kind = kv & HT_KIND_MASK;
    u32 s = (kv >> HT_SLOT_SHIFT) & (HT_SLOTS - 1);
    if (*(u64 *)&k->tid != *(u64 *)&k->cur_tid)   /* (tid, tgid) against (cur_tid, cur_tgid) */
        take_over(k, tid, tgid);
    u64 to = 0;
    u64 since = take_blocked(tid, &to);
    u64 now = since ? bpf_ktime_get_ns() : 0;
    struct ht_cslot *cs = &k->c[s];
    if (cs->nr != c.nr) {
        k->seq += 1;
        flush_slot(k, s);
        k->seq += 1;
        cs->nr = c.nr;
    }
    cs->count += 1;
    if (since && now > since)
        cs->ns += now - since;
    if (kind == HT_K_WRITE || kind == HT_K_READ) {
        count_fd(k, kind, (s32)c.a[0], ret, kv & HT_KV_MSGS);
        count_failure(tid, tgid, c.nr, ret);
        return 0;
    }
    if (kind == HT_K_NONE || kind > HT_K_STREAMED_MAX) {
        count_failure(tid, tgid, c.nr, ret);
        return 0;
    }
    read_args(regs, &c);
    if (in_budget(k, s)) {
        if (!now)
            now = bpf_ktime_get_ns();
        if (stream(&c, tgid, tid, kind, ret, since, now, to)) {
            cs->streamed += 1;
            return 0;
        }
    }
    count_category(k, tid, tgid, kind, &c, ret);
    count_failure(tid, tgid, c.nr, ret);
    return 0;
}

/* A syscall whose task the per-CPU cache does not know (another task than at the CPU's last
 * exit, or the "gen" sum moved since): who it is decided again, then the full path if it is
 * followed. A BPF function of its own for libbpf, like sys_exit_full: the helper call in
 * decide_current would make the compiler spill on the per-call path. */
static HT_SUBPROG int sys_exit_miss(struct ht_cache *k, ht_regs_t *regs, s64 ret, u64 gen)
{
    if (!decide_current(k, regs, gen))
        return 0;
    cached_on(bpf_get_smp_processor_id(), k->cur_tid, k->cur_tgid);
    return sys_exit_full(k, regs, ret);
}

static __always_inline int on_sys_exit(ht_regs_t *regs, s64 ret)
{
    struct ht_cache *k = bpf_map_lookup_elem(&cache, HT_KEY0);   /* per-CPU array: inlined */
    if (!k)
        return 0;
    /* both only grow: their sum is unchanged only while neither moved */
    u64 gen = HT_UGEN() + HT_KGEN();
    if (k->cur_regs != (u64)regs || k->cur_gen != gen)
        return sys_exit_miss(k, regs, ret, gen);
    /* the same task as at an exit since which nothing moved: it has not slept since */
    if (!k->cur_target || sys_exit_fast(k, regs, ret))
        return 0;
    return sys_exit_full(k, regs, ret);
}

/* sched_switch, on the CPU that switches, prev (tid, tgid) being current: its slice ends now;
 * the next one on this CPU starts now ("last_switch_ns"). A target thread that leaves the CPU
 * to sleep (not preempted, its state not TASK_RUNNING: "sleeps") is blocked from now on: its
 * syscall exit takes the time. Sleeping outside a syscall (a page fault on a file mapping)
 * is rare, and is then counted as part of its next call. "next_target": 0 when the caller
 * knows the thread switched to is not followed; a switch between two threads not followed
 * reads no clock (every context switch of the machine runs this). */
static __always_inline int on_switch(u32 tid, u32 tgid, int sleeps, int next_target)
{
    u32 z = 0;
    struct ht_cache *k = bpf_map_lookup_elem(&cache, &z);
    if (!k)
        return 0;
    int prev_target = tid != 0 && is_target(tgid);
    if (!prev_target && !next_target)
        return 0;
    u64 now = bpf_ktime_get_ns();
    if (prev_target) {
        struct ht_thread *t = bpf_map_lookup_elem(&threads, &tid);
        if (!t) {
            struct ht_thread zero = {};
            zero.tgid = tgid;
            bpf_map_update_elem(&threads, &tid, &zero, BPF_NOEXIST);
            t = bpf_map_lookup_elem(&threads, &tid);
            if (!t)
                bump(HT_C_THREADS_FULL);
        }
        if (t) {
            u64 in = k->last_switch_ns > t->last_in_ns ? k->last_switch_ns : t->last_in_ns;
            if (in && now > in)
                t->on_cpu_ns += now - in;
            t->switches += 1;
            if (sleeps) {
                if (t->blocked_ns == 0) {
                    t->blocked_ns = now;
                    t->blocked_to = timeout_at_sleep();
                    forget_current(tid, tgid);   /* its next exit: sys_exit_full, "blocked" */
                }
                u8 *b = bpf_map_lookup_elem(&blocked, &tid);   /* inlined, unlike an update */
                if (b)
                    *b = 1;
            }
        }
    }
    k->last_switch_ns = now;
    return 0;
}

/* A thread of a target (ptgid, ptid: current) made thread or process "child" (its tgid
 * "ctgid"), fully set up but not run yet. flags: HT_F_NEW_PROCESS, HT_F_GUESSED. */
static __always_inline int on_fork(u32 ptgid, u32 ptid, u32 child, u32 ctgid, u32 flags)
{
    u64 now = bpf_ktime_get_ns();
    if (flags & HT_F_NEW_PROCESS) {
        /* its program image: any but 0, and most likely not the one of a process that had
         * this pid before (whose fds' first uses were told: HT_EV_FD) */
        u8 image = (u8)(now >> 10);
        if (!image)
            image = 1;
        bpf_map_update_elem(&procs, &ctgid, &image, BPF_ANY);
    }
    /* not on CPU yet: its first switch-in starts its first slice */
    struct ht_thread t = {};
    t.tgid = ctgid;
    if (bpf_map_update_elem(&threads, &child, &t, BPF_ANY) != 0)
        bump(HT_C_THREADS_FULL);
    struct ht_event *e = new_record(HT_EV_FORK, ptgid, ptid, now);
    if (!e)
        return 0;
    e->args[0] = child;
    e->args[1] = ctgid;
    e->flags = flags;
    bpf_ringbuf_submit(e, 0);
    return 0;
}

/* exec keeps the tgid, so "procs" needs no change. When a thread other than the leader
 * execs, the kernel first kills every other thread (the leader included: its exit is seen
 * below) and the exec'ing thread takes over the leader's tid: old -> pid. Its state moves
 * with it; the counts made under the old tid stay under it. "moved": the tid changed; "old"
 * is 0 when its number in hangtrace's pid namespace is not known (the kernel gives the
 * host's): its state then stays under the old tid. */
static __always_inline int on_exec(u32 tgid, u32 pid, u32 old, int moved)
{
    u8 *image = bpf_map_lookup_elem(&procs, &tgid);
    if (!image || !*image) {
        if (moved)
            caches_stale();
        return 0;
    }
    /* a new program image: its fds are told again at their first use (HT_EV_FD); the per-CPU
     * caches hold the old value */
    *image = *image == 255 ? 1 : *image + 1;
    caches_stale();
    if (moved && old && pid != old) {
        struct ht_thread *ot = bpf_map_lookup_elem(&threads, &old);
        if (ot) {
            struct ht_thread moved = *ot;
            moved.blocked_ns = 0;
            moved.blocked_to = 0;
            bpf_map_update_elem(&threads, &pid, &moved, BPF_ANY);
            bpf_map_delete_elem(&threads, &old);
        }
    }
    struct ht_event *e = new_record(HT_EV_EXEC, tgid, pid, bpf_ktime_get_ns());
    if (!e)
        return 0;
    e->args[0] = moved ? old : pid;
    bpf_ringbuf_submit(e, 0);
    return 0;
}

/* Thread "tid" (current) exits, in do_exit() before it becomes a zombie (the exit code is
 * read by userspace from the zombie's /proc stat). group_dead: 1 when it is the process's
 * last thread, 0 when not, 2 when unknown (userspace looks at /proc). Its last slice ends
 * now. Its counts stay in the cache or the maps until userspace reads them. */
static __always_inline int on_exit(u32 tid, u64 group_dead)
{
    caches_stale();
    struct ht_thread *t = bpf_map_lookup_elem(&threads, &tid);
    if (!t)
        return 0;
    u64 now = bpf_ktime_get_ns();
    u32 tgid = t->tgid;
    u32 z = 0;
    struct ht_cache *k = bpf_map_lookup_elem(&cache, &z);
    u64 on_cpu = t->on_cpu_ns;
    if (k) {
        u64 in = k->last_switch_ns > t->last_in_ns ? k->last_switch_ns : t->last_in_ns;
        if (in && now > in)
            on_cpu += now - in;
    }
    u64 switches = t->switches;
    if (group_dead == 1) {
        /* the whole thread group is gone: forget the tgid (pids are reused); when unknown,
         * userspace clears it once /proc shows the process gone */
        u8 zero = 0;
        bpf_map_update_elem(&procs, &tgid, &zero, BPF_ANY);
    }
    u8 *b = bpf_map_lookup_elem(&blocked, &tid);
    if (b)
        *b = 0;
    bpf_map_delete_elem(&threads, &tid);
    struct ht_event *e = new_record(HT_EV_EXIT, tgid, tid, now);
    if (!e)
        return 0;
    e->args[0] = group_dead;
    e->args[1] = on_cpu;
    e->args[2] = switches;
    bpf_ringbuf_submit(e, 0);
    return 0;
}

/* ---------------------------------------------------------------- entry points */
#include "ht_probes.bpf.h"
