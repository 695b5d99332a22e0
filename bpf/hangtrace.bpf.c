/* hangtrace.bpf.c - in-kernel half of hangtrace's eBPF backend (compiled by BCC at attach).
 *
 * Contract (the Python half is tracer/record/backends/ebpf_backend.py; shared layout: hangtrace.h):
 *  - Tracepoints only (no kprobes: the kernels we run on may have none, and tracepoint
 *    argument layouts come from the running kernel's tracefs format files, so this compiles
 *    against another kernel's headers): the raw tracepoints sys_enter/sys_exit (their
 *    arguments are the registers, struct pt_regs, whose layout is the architecture's ABI),
 *    sched:sched_process_fork/exec/exit, sched:sched_switch.
 *  - Only threads of the processes in "targets" (a tgid set) are looked at. Userspace fills it
 *    with the tree at attach; the fork tracepoint adds children IN THE KERNEL, before the child
 *    runs its first instruction, so no syscall of a new process is missed (a userspace poll
 *    would race with the child's first calls); exit removes the tgid when the group is dead.
 *  - Every syscall of a target thread is counted per (tid, nr) with its time (a per-thread
 *    cache in "threads", flushed to "aggr" when a slot changes hands and at exit). Calls
 *    of the kinds in hangtrace.h (futex, poll family, writes, reads, ioctl, waits, yield,
 *    sleeps, accept) are also streamed one by one on the ring buffer, at most HT_RATE_MAX per
 *    thread per 100 ms; the rest of them are counted (ht_agg.dropped, summed by userspace).
 *    Ring buffer overflow is counted in HT_C_RINGBUF_FULL, never silent.
 *  - Nothing from a user buffer is ever copied: only syscall arguments, timeouts (struct
 *    timespec/timeval), the first pollfd fds, NVIDIA RM control cmd / alloc class (u32 fields
 *    of the ioctl parameter struct) and clone3's flags.
 */
#include "hangtrace.h"

#ifndef HT_PID_MAX
#define HT_PID_MAX 4194304   /* set by userspace from /proc/sys/kernel/pid_max */
#endif

/* tgid -> 1 for a followed process: an array indexed by tgid (pids are < pid_max). */
BPF_ARRAY(targets, u8, HT_PID_MAX);
BPF_HASH(threads, u32, struct ht_thread, HT_MAX_THREADS);
BPF_HASH(aggr, struct ht_agg_key, struct ht_agg, HT_MAX_AGG);
BPF_ARRAY(kinds, u32, HT_MAX_NR);
/* One all-zero struct ht_thread, never written: the value new entries are inserted with
 * (at 592 bytes, a zeroed copy on the BPF stack would not fit beside struct pt_regs). */
BPF_ARRAY(zero_thread, struct ht_thread, 1);
BPF_ARRAY(counters, u64, HT_NCOUNTERS);
BPF_RINGBUF_OUTPUT(events, HT_RINGBUF_PAGES);

struct ht_ts {
    __s64 sec;
    __s64 frac;   /* ns for a timespec, µs for a timeval */
};

static __always_inline void bump(u32 idx)
{
    u64 *c = counters.lookup(&idx);
    if (c)
        __sync_fetch_and_add(c, 1);
}

/* Read a struct timespec (or timeval, frac_ns = 1000) the call was given. A NULL pointer is an
 * infinite wait. The pointer is read at sys_enter: by sys_exit select() has overwritten its
 * timeval with the time left, and the memory may be gone. */
static __always_inline void read_timeout(struct ht_thread *t, u64 uptr, u64 frac_ns, u32 abs)
{
    struct ht_ts ts = {};
    if (uptr == 0) {
        t->cflags |= HT_F_NO_TIMEOUT;
        return;
    }
    if (bpf_probe_read_user(&ts, sizeof(ts), (void *)uptr) != 0) {
        /* not faulted in: tracepoint programs may not sleep, so they cannot page it in */
        t->cflags |= HT_F_UNREADABLE | (abs ? HT_F_TIMEOUT_ABS : HT_F_TIMEOUT);
        return;
    }
    t->aux = (u64)ts.sec * 1000000000ULL + (u64)ts.frac * frac_ns;
    t->cflags |= abs ? HT_F_TIMEOUT_ABS : HT_F_TIMEOUT;
}

static __always_inline void ms_timeout(struct ht_thread *t, u64 arg)
{
    s32 ms = (s32)arg;   /* an int argument: the low 32 bits of the register */
    if (ms < 0) {
        t->cflags |= HT_F_NO_TIMEOUT;
    } else {
        t->aux = (u64)ms * 1000000ULL;
        t->cflags |= HT_F_TIMEOUT;
    }
}

/* Decode at enter what is only readable (or only meaningful) before the call runs. */
static __always_inline void decode_enter(struct ht_thread *t, u32 kind)
{
    u64 *a = t->args;
    switch (kind) {
    case HT_K_FUTEX: {
        u32 cmd = (u32)a[1] & 127;   /* without FUTEX_PRIVATE_FLAG / FUTEX_CLOCK_REALTIME */
        if (cmd == 0)                 /* FUTEX_WAIT: relative timeout (even with CLOCK_REALTIME) */
            read_timeout(t, a[3], 1, 0);
        else if (cmd == 9 || cmd == 6 || cmd == 11 || cmd == 13)
            /* WAIT_BITSET, LOCK_PI, WAIT_REQUEUE_PI, LOCK_PI2: absolute deadlines */
            read_timeout(t, a[3], 1, 1);
        break;                        /* other ops: arg 3 is val2, not a timeout */
    }
    case HT_K_POLL:
    case HT_K_PPOLL: {
        u64 nfds = a[1];
        t->cflags |= HT_F_PFDS;
#pragma unroll
        for (int i = 0; i < HT_MAX_PFDS; i++) {
            s32 fd = -1;
            if ((u64)i < nfds)   /* struct pollfd { int fd; short events, revents; } */
                bpf_probe_read_user(&fd, sizeof(fd), (void *)(a[0] + 8 * i));
            t->pfds[i] = fd;
        }
        if (kind == HT_K_POLL)
            ms_timeout(t, a[2]);
        else
            read_timeout(t, a[2], 1, 0);
        break;
    }
    case HT_K_EPOLL:
        ms_timeout(t, a[3]);
        break;
    case HT_K_EPOLL2:
        read_timeout(t, a[3], 1, 0);
        break;
    case HT_K_SELECT:
        read_timeout(t, a[4], 1000, 0);
        break;
    case HT_K_PSELECT:
        read_timeout(t, a[4], 1, 0);
        break;
    case HT_K_NANOSLEEP:
        read_timeout(t, a[0], 1, 0);
        break;
    case HT_K_CLOCK_NANOSLEEP:
        read_timeout(t, a[2], 1, (u32)a[1] & 1);   /* TIMER_ABSTIME */
        break;
    case HT_K_IOCTL: {
        u32 req = (u32)a[1];
        u32 size = (req >> 16) & 0x3fff;
        u32 nr = req & 0xff;
        u32 v = 0;
        if (((req >> 8) & 0xff) != HT_NV_IOC_TYPE || a[2] == 0)
            break;
        /* NVOS54 (RM_CONTROL, 32 bytes): cmd at 8. NVOS21/NVOS64 (RM_ALLOC, 32/48 bytes):
         * hClass at 12. Inputs of the call, so read at enter. Decoded only when the size in
         * the request matches the struct: layouts may change between driver versions. */
        if (nr == HT_NV_RM_CONTROL && size == 32) {
            if (bpf_probe_read_user(&v, sizeof(v), (void *)(a[2] + 8)) == 0) {
                t->aux = v;
                t->cflags |= HT_F_AUX;
            }
        } else if (nr == HT_NV_RM_ALLOC && (size == 32 || size == 48)) {
            if (bpf_probe_read_user(&v, sizeof(v), (void *)(a[2] + 12)) == 0) {
                t->aux = v;
                t->cflags |= HT_F_AUX;
            }
        }
        break;
    }
    case HT_K_CLONE3: {
        u64 flags = 0;   /* struct clone_args starts with u64 flags */
        if (a[0] && bpf_probe_read_user(&flags, sizeof(flags), (void *)a[0]) == 0) {
            t->aux = flags;
            t->cflags |= HT_F_AUX;
        }
        break;
    }
    default:
        break;
    }
}

/* The head of the kernel's struct pt_regs, the first argument of the raw sys_enter/sys_exit
 * tracepoints. Declared here rather than taken from <linux/ptrace.h>: that header drags in
 * half the kernel's (another kernel's) headers and more than doubles the compile time of
 * the attach. The layout is the architecture's ABI (x86_64: the order of ptrace's
 * user_regs_struct; arm64: user_pt_regs followed by orig_x0, syscallno). Syscall arguments:
 * x86_64 di, si, dx, r10, r8, r9 (r10, not cx: the syscall instruction clobbers rcx); arm64
 * x0..x5, and x0 is still the first argument at enter (it becomes the result at exit). */
#if defined(bpf_target_x86)
struct ht_regs {
    u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax;
};
#define HT_ARGS(r) {(r).di, (r).si, (r).dx, (r).r10, (r).r8, (r).r9}
#define HT_NR(r) ((s32)(r).orig_ax)
#elif defined(bpf_target_arm64)
struct ht_regs {
    u64 regs[31];
    u64 sp, pc, pstate, orig_x0;
    s32 syscallno;
    u32 unused2;
};
#define HT_ARGS(r) {(r).regs[0], (r).regs[1], (r).regs[2], (r).regs[3], (r).regs[4], (r).regs[5]}
#define HT_NR(r) ((r).syscallno)
#else
#error "hangtrace.bpf.c: struct ht_regs is only declared for x86_64 and arm64"
#endif

/* The cheap test every syscall and context switch of the machine pays first: an array lookup
 * (the verifier inlines it, no helper call), not a hash lookup. */
static __always_inline int is_target(u32 tgid)
{
    u8 *v = targets.lookup(&tgid);
    return v && *v;
}

/* One count into the thread's cache slot; a slot held by another nr goes to "aggr" first. */
static __always_inline void flush_slot(struct ht_thread *t, u32 tid, u32 s)
{
    s &= HT_AGG_SLOTS - 1;
    if (t->c_count[s] == 0 && t->c_dropped[s] == 0)
        return;
    struct ht_agg_key key = {.tid = tid, .nr = (u32)t->c_nr[s]};
    struct ht_agg *ag = aggr.lookup(&key);
    if (!ag) {
        struct ht_agg zero = {};
        zero.tgid = t->tgid;
        aggr.insert(&key, &zero);   /* fails (EEXIST) only if another CPU raced us: fine */
        ag = aggr.lookup(&key);
    }
    if (ag) {
        /* Only the thread itself flushes its own keys, one CPU at a time: no atomics. */
        ag->count += t->c_count[s];
        ag->total_ns += t->c_ns[s];
        ag->dropped += t->c_dropped[s];
    } else {
        bump(HT_C_AGG_FULL);
    }
    t->c_count[s] = 0;
    t->c_ns[s] = 0;
    t->c_dropped[s] = 0;
}

static __always_inline void count(struct ht_thread *t, u32 tid, u32 slot, s32 nr, u64 dur,
                                  u32 dropped)
{
    u32 s = slot & (HT_AGG_SLOTS - 1);
    if (t->c_nr[s] != nr) {
        flush_slot(t, tid, s);
        t->c_nr[s] = nr;
    }
    t->c_count[s] += 1;
    t->c_ns[s] += dur;
    t->c_dropped[s] += dropped;
}

static __always_inline u32 kind_of(s32 nr)
{
    u32 kv = HT_K_NONE | ((HT_AGG_SLOTS - 1) << HT_SLOT_SHIFT);   /* nr out of the table */
    if (nr >= 0 && nr < HT_MAX_NR) {
        u32 k = nr;
        u32 *kp = kinds.lookup(&k);
        if (kp)
            kv = *kp;
    }
    return kv;
}

/* Raw tracepoints, not the raw_syscalls trace events: a trace event program first has the
 * kernel build a perf record of the event's fields (perf_trace_buf_alloc, all six arguments
 * copied), for every syscall of every process once attached; a raw tracepoint program is
 * called directly with the tracepoint's own arguments, (struct pt_regs *, long id) at enter,
 * (struct pt_regs *, long ret) at exit. Measured on sysloop: the empty trace event pair costs
 * about 0.6x of an untraced syscall, the empty raw pair about 0.1x. The registers are read
 * (one bpf_probe_read_kernel) only for the calls whose arguments are used. */
RAW_TRACEPOINT_PROBE(sys_enter)
{
    u64 id = bpf_get_current_pid_tgid();
    u32 tgid = id >> 32, tid = (u32)id;
    if (!is_target(tgid))
        return 0;
    struct ht_thread *t = threads.lookup(&tid);
    if (!t) {
        /* A thread userspace did not list at attach (born between its scan and the attach of
         * the fork tracepoint). It is running this very instant: on CPU since now. Only this
         * CPU touches the entry while the thread runs here, so it is filled in after the
         * insert. */
        u32 z = 0;
        struct ht_thread *zero = zero_thread.lookup(&z);
        if (!zero)
            return 0;
        if (threads.insert(&tid, zero) != 0) {
            bump(HT_C_THREADS_FULL);
            return 0;
        }
        t = threads.lookup(&tid);
        if (!t)
            return 0;
        t->tgid = tgid;
        t->flags = HT_T_ON_CPU;
        t->last_in_ns = bpf_ktime_get_ns();
    }
    s32 nr = (s32)ctx->args[1];
    u32 kv = kind_of(nr);
    u32 kind = kv & HT_KIND_MASK;
    /* An enter while IN_CALL is already set means the previous call never reported its exit:
     * exit/exit_group (the thread is gone before any exit), a successful execve by another
     * thread (its enter was recorded under its old tid). The new call simply replaces it. */
    t->flags |= HT_T_IN_CALL;
    t->nr = nr;
    t->kind = kind;
    t->slot = kv >> HT_SLOT_SHIFT;
    t->cflags = 0;
    /* bpf_ktime_get_ns costs as much as the rest of this program (about 40 ns in a KVM guest),
     * so a call that is only counted does not read the clock: enter_ns = 0 means "not timed"
     * and sched_switch sets it when the call first leaves the CPU (it blocked: from then on
     * it is a wait, and the wait is what the analyzer needs the start of). */
    t->enter_ns = 0;
    if (kind == HT_K_NONE)
        return 0;   /* counted at exit; its arguments are never used */
    if (kind <= HT_K_STREAMED_MAX && t->win_count >= HT_RATE_MAX) {
        /* Over the stream budget: counted only, arguments not read (if it is still in flight
         * at stop, userspace takes them from /proc/PID/task/TID/syscall). Whether a new window
         * has begun needs the clock, but only once per scheduler tick: jiffies (one load) says
         * when the tick has moved, so a flood reads the clock at most HZ times a second and a
         * thread that went quiet gets its budget back at its first call one tick later. */
        u64 j = bpf_jiffies64();
        if (j == t->win_jiffies) {
            t->cflags = HT_F_DROPPED;
            return 0;
        }
        t->win_jiffies = j;
    }
    u64 now = bpf_ktime_get_ns();
    if (kind <= HT_K_STREAMED_MAX) {
        if (now - t->win_start_ns >= HT_RATE_WINDOW_NS) {
            t->win_start_ns = now;
            t->win_count = 0;
        }
        if (t->win_count >= HT_RATE_MAX) {
            t->cflags = HT_F_DROPPED;
            return 0;
        }
        t->win_count += 1;
    }
    t->enter_ns = now;
    struct ht_regs regs = {};
    bpf_probe_read_kernel(&regs, sizeof(regs), (void *)ctx->args[0]);
    u64 a[6] = HT_ARGS(regs);
    t->aux = 0;
#pragma unroll
    for (int i = 0; i < 6; i++)
        t->args[i] = a[i];
    decode_enter(t, kind);
    return 0;
}

RAW_TRACEPOINT_PROBE(sys_exit)
{
    u64 id = bpf_get_current_pid_tgid();
    u32 tgid = id >> 32, tid = (u32)id;
    if (!is_target(tgid))
        return 0;
    struct ht_thread *t = threads.lookup(&tid);
    if (!t)
        return 0;
    t->flags |= HT_T_SEEN;
    if (!(t->flags & HT_T_IN_CALL)) {
        /* The exit of a call entered before the attach (the thread was blocked in it when we
         * arrived), or of one whose enter the kernel did not report (seccomp or ptrace skipped
         * it): count it, its duration is unknown. Its nr is only in the registers. The nr
         * recorded at enter is trusted otherwise: rt_sigreturn, for one, exits with orig_ax
         * already reset to -1 by the restored frame. */
        struct ht_regs regs = {};
        s32 nr = -1;
        if (bpf_probe_read_kernel(&regs, sizeof(regs), (void *)ctx->args[0]) == 0)
            nr = HT_NR(regs);
        count(t, tid, kind_of(nr) >> HT_SLOT_SHIFT, nr, 0, 0);
        return 0;
    }
    t->flags &= ~HT_T_IN_CALL;
    s32 nr = t->nr;
    u32 kind = t->kind;
    if (kind == HT_K_NONE || kind > HT_K_STREAMED_MAX || (t->cflags & HT_F_DROPPED)) {
        /* Counted only. Its time is known only if it blocked (enter_ns set by sched_switch,
         * and then the clock read is cheap next to the context switches): ht_agg.total_ns
         * of such calls is the time they spent blocked, not their full duration. */
        u64 dur = t->enter_ns ? bpf_ktime_get_ns() - t->enter_ns : 0;
        count(t, tid, t->slot, nr, dur, (t->cflags & HT_F_DROPPED) ? 1 : 0);
        return 0;
    }
    u64 now = bpf_ktime_get_ns();
    u64 dur = now - t->enter_ns;
    count(t, tid, t->slot, nr, dur, 0);
    struct ht_event *e = events.ringbuf_reserve(sizeof(struct ht_event));
    if (!e) {
        bump(HT_C_RINGBUF_FULL);
        return 0;
    }
    e->type = HT_EV_SYSCALL;
    e->tgid = tgid;
    e->tid = tid;
    e->nr = nr;
    e->ret = (s64)ctx->args[1];
    e->enter_ns = t->enter_ns;
    e->exit_ns = now;
#pragma unroll
    for (int i = 0; i < 6; i++)
        e->args[i] = t->args[i];
    e->aux = t->aux;
    e->flags = t->cflags;
#pragma unroll
    for (int i = 0; i < HT_MAX_PFDS; i++)
        e->pfds[i] = t->pfds[i];
    e->kind = kind;
    events.ringbuf_submit(e, 0);
    return 0;
}

/* sched_switch runs in the scheduler on the CPU that switches: prev is leaving it, next is
 * entering it. A thread's entry is only touched from the CPU it runs on (or ran on last), so
 * the plain read-modify-write below does not race with its syscall probes. */
TRACEPOINT_PROBE(sched, sched_switch)
{
    u32 prev = args->prev_pid, next = args->next_pid;
    u64 now = bpf_ktime_get_ns();
    struct ht_thread *t = NULL;
    /* prev is current here (the switch has not happened yet): its tgid filters it cheaply */
    if (is_target(bpf_get_current_pid_tgid() >> 32))
        t = threads.lookup(&prev);
    if (t && (t->flags & HT_T_ON_CPU)) {
        t->on_cpu_ns += now - t->last_in_ns;
        t->flags &= ~HT_T_ON_CPU;
    }
    if (t && (t->flags & HT_T_IN_CALL) && t->enter_ns == 0)
        t->enter_ns = now;   /* an untimed call leaves the CPU: it blocks from now (sys_enter) */
    t = threads.lookup(&next);
    if (t) {
        t->last_in_ns = now;
        t->flags |= HT_T_ON_CPU;
        t->switches += 1;
    }
    return 0;
}

/* Runs in the parent (current), after the child is fully set up but before it first runs.
 * The tracepoint does not carry the clone flags: they come from the parent's call in flight
 * (clone's arg 0, clone3's struct read at enter; fork/vfork never share the thread group). */
TRACEPOINT_PROBE(sched, sched_process_fork)
{
    u64 id = bpf_get_current_pid_tgid();
    u32 ptgid = id >> 32, ptid = (u32)id;
    if (!is_target(ptgid))
        return 0;
    u32 child = args->child_pid;
    u32 flags = HT_F_NEW_PROCESS;
    struct ht_thread *pt = threads.lookup(&ptid);
    if (pt && (pt->flags & HT_T_IN_CALL) && pt->kind == HT_K_CLONE) {
        if (pt->args[0] & HT_CLONE_THREAD)
            flags = 0;
    } else if (pt && (pt->flags & HT_T_IN_CALL) && pt->kind == HT_K_CLONE3 &&
               (pt->cflags & HT_F_AUX)) {
        if (pt->aux & HT_CLONE_THREAD)
            flags = 0;
    } else if (!(pt && (pt->flags & HT_T_IN_CALL) && pt->kind == HT_K_FORK)) {
        flags |= HT_F_GUESSED;   /* a kernel-internal clone (io_uring worker...): userspace checks */
    }
    u32 ctgid = (flags & HT_F_NEW_PROCESS) ? child : ptgid;
    if (flags & HT_F_NEW_PROCESS) {
        u8 one = 1;
        if (targets.update(&ctgid, &one) != 0)
            bump(HT_C_TARGETS_FULL);
    }
    /* not on CPU yet: its first sched_switch in starts the clock. The child does not run
     * before this returns, so its entry is filled in after the insert. */
    u32 z = 0;
    struct ht_thread *zero = zero_thread.lookup(&z);
    if (zero && threads.update(&child, zero) == 0) {
        struct ht_thread *ct = threads.lookup(&child);
        if (ct)
            ct->tgid = ctgid;
    } else {
        bump(HT_C_THREADS_FULL);
    }
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

/* exec keeps the tgid, so "targets" needs no change. When a thread other than the leader
 * execs, the kernel first kills every other thread (the leader included: its exit is seen
 * below) and the exec'ing thread takes over the leader's tid: old_pid -> pid. Its state moves
 * with it, and its execve enter, recorded under old_pid, never gets an exit under that tid. */
TRACEPOINT_PROBE(sched, sched_process_exec)
{
    u64 id = bpf_get_current_pid_tgid();
    u32 tgid = id >> 32;
    if (!is_target(tgid))
        return 0;
    u32 pid = args->pid, old = args->old_pid;
    if (pid != old) {
        struct ht_thread *ot = threads.lookup(&old);
        if (ot && threads.update(&pid, ot) == 0) {
            struct ht_thread *nt = threads.lookup(&pid);
            if (nt)
                nt->flags &= ~HT_T_IN_CALL;
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
 * in task_struct, which we do not read: these programs are built against another kernel's
 * headers, so task_struct offsets are unknown; userspace reads the zombie's /proc stat).
 * exit/exit_group never return, so this is also where their call in flight ends. */
TRACEPOINT_PROBE(sched, sched_process_exit)
{
    u32 tid = args->pid;
    struct ht_thread *t = threads.lookup(&tid);
    if (!t)
        return 0;
    u64 now = bpf_ktime_get_ns();
    u32 tgid = t->tgid;
    u64 on_cpu = t->on_cpu_ns;
    if (t->flags & HT_T_ON_CPU)
        on_cpu += now - t->last_in_ns;   /* it is running: this is its last slice */
    u64 switches = t->switches;
    u64 group_dead = 2;
#ifdef HT_HAVE_GROUP_DEAD
    group_dead = args->group_dead ? 1 : 0;
    /* The whole thread group is gone: forget the tgid (pids are reused). Without group_dead
     * (kernels < 6.x) userspace removes it once /proc shows the process gone. */
    if (group_dead) {
        u8 zero = 0;
        targets.update(&tgid, &zero);
    }
#endif
    /* The counts still cached in the entry go to "aggr" before it is deleted (this runs in
     * the exiting thread itself, so nothing else touches the cache now). */
#pragma clang loop unroll(disable)   /* a bounded loop: 16 inlined copies slow the attach */
    for (u32 s = 0; s < HT_AGG_SLOTS; s++)
        flush_slot(t, tid, s);
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
