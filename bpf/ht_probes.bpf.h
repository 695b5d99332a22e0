/* ht_probes.bpf.h - the entry points of bpf/hangtrace.bpf.c, one set per loader: each takes
 * what its kind of tracepoint gives and calls the shared handler. Part of hangtrace.bpf.c,
 * #included at its end (BCC gets it spliced into its text).
 *
 * libbpf (tp_btf, typed arguments): the facts BCC has to guess come from task_struct with
 * CO-RE relocations: a fork's child tgid (a new process or a thread), the exiting thread's
 * group_dead (signal->live fell to 0), the state of the thread leaving the CPU (__state, or
 * state before 5.14), whether the thread switched to is followed.
 * BCC: raw tracepoints for sys_exit and sched_switch; trace events (tracefs format) for
 * fork/exec/exit; the clone flags from the parent's saved registers.
 */
#ifdef HT_BCC
RAW_TRACEPOINT_PROBE(sys_exit)
{
    return on_sys_exit((ht_regs_t *)ctx->args[0], (s64)ctx->args[1]);
}

/* (bool preempt, struct task_struct *prev, struct task_struct *next, unsigned prev_state) */
RAW_TRACEPOINT_PROBE(sched_switch)
{
    u64 id = current_ids();   /* next's pid would need task_struct offsets */
    return on_switch((u32)id, id >> 32, !ctx->args[0] && (u32)ctx->args[3] != 0, 1);
}

/* The trace event does not carry the clone flags: they are in the parent's saved registers
 * (clone's flags, clone3's struct pointer). */
TRACEPOINT_PROBE(sched, sched_process_fork)
{
    u64 id = current_ids();   /* the child's pid is the host's: BCC runs in the init pid
                               * namespace only (env.ebpf_problem) */
    u32 ptgid = id >> 32;
    if (!is_target(ptgid))
        return 0;
    u32 child = args->child_pid;
    u32 flags = HT_F_NEW_PROCESS;
    ht_regs_t *r = current_regs();
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
    return on_fork(ptgid, (u32)id, child, (flags & HT_F_NEW_PROCESS) ? child : ptgid, flags);
}

TRACEPOINT_PROBE(sched, sched_process_exec)
{
    return on_exec(current_ids() >> 32, args->pid, args->old_pid, args->pid != args->old_pid);
}

TRACEPOINT_PROBE(sched, sched_process_exit)
{
#ifdef HT_HAVE_GROUP_DEAD
    return on_exit(args->pid, args->group_dead ? 1 : 0);
#else
    return on_exit(args->pid, 2);
#endif
}

#else
/* task_struct's state field before 5.14 */
struct task_struct___pre514 {
    long state;
} __attribute__((preserve_access_index));

static __always_inline u32 task_state(struct task_struct *t)
{
    if (bpf_core_field_exists(t->__state))
        return t->__state;
    return (u32)((struct task_struct___pre514 *)t)->state;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(ht_sys_exit, struct pt_regs *regs, long ret)
{
    return on_sys_exit(regs, ret);
}

/* Tasks are numbered as hangtrace sees them (ht_pidns.bpf.h: task_ids; 0 = outside its pid
 * namespace, never followed). */
SEC("tp_btf/sched_switch")
int BPF_PROG(ht_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
    u32 ptid, ptgid, ntid, ntgid;
    task_ids(prev, &ptid, &ptgid);
    task_ids(next, &ntid, &ntgid);
    return on_switch(ptid, ptgid, !preempt && task_state(prev) != 0,
                     ntid != 0 && is_target(ntgid));
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(ht_sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
    u32 ptid, ptgid, ctid, ctgid;
    task_ids(parent, &ptid, &ptgid);
    if (!is_target(ptgid))
        return 0;
    task_ids(child, &ctid, &ctgid);
    if (!ctid)          /* made in a pid namespace nested below hangtrace's: not seen */
        return 0;
    return on_fork(ptgid, ptid, ctid, ctgid,
                   child->tgid != parent->tgid ? HT_F_NEW_PROCESS : 0);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(ht_sched_process_exec, struct task_struct *p, pid_t old_pid)
{
    u32 tid, tgid;
    task_ids(p, &tid, &tgid);
    int moved = p->pid != old_pid;
    /* the old tid in hangtrace's namespace: the kernel's own when that is the host's */
    return on_exec(tgid, tid, HT_SET(pidns_ino) ? 0 : old_pid, moved);
}

/* do_exit() decrements signal->live before this tracepoint: 0 means no thread of the
 * process is left (6.16+ also passes group_dead; this works on every kernel). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(ht_sched_process_exit, struct task_struct *p)
{
    u32 tid, tgid;
    task_ids(p, &tid, &tgid);
    return on_exit(tid, p->signal->live.counter == 0 ? 1 : 0);
}
#endif
