/* ht_pidns.bpf.h - which pid numbers hangtrace's programs filter on and report: those of the
 * pid namespace hangtrace runs in, the ones its /proc shows and its user types. On the host
 * (the init pid namespace) they are the kernel's own (bpf_get_current_pid_tgid, task->pid);
 * inside a container, a pod's sidecar with shareProcessNamespace or `kubectl debug`, they are
 * the namespace's, and the kernel's would match nothing hangtrace asked for (issue 42).
 *
 * Settings (tracer/linux/pidns.py, written by the loaders): pidns_dev, pidns_ino: the device
 * and inode of hangtrace's /proc/self/ns/pid, the dev in the kernel's encoding; 0 = the init
 * namespace, host pids. Both are .rodata constants (BCC: -D flags): on the host the verifier
 * drops the namespace branch, and the fast paths cost what they did.
 *
 * A task seen from inside a namespace has a number there when the namespace is the one it
 * lives in (its active pid namespace): bpf_get_ns_current_pid_tgid's rule (kernel 5.7+), used
 * for the current task; ns_nr() applies the same rule to a task that is not current (the
 * child of a fork, the task switched to), reading struct pid with CO-RE. Any other task (the
 * host's, another container's, one in a namespace nested below hangtrace's) is pid 0 here:
 * never followed.
 */
#ifndef HT_PIDNS_BPF_H
#define HT_PIDNS_BPF_H

HT_SETTING(u64, pidns_dev);
HT_SETTING(u64, pidns_ino);

/* tgid << 32 | pid of the current task as hangtrace numbers it (0: not in its namespace). */
static __always_inline u64 current_ids(void)
{
    if (!HT_SET(pidns_ino))
        return bpf_get_current_pid_tgid();
    struct bpf_pidns_info ns = {};
    if (bpf_get_ns_current_pid_tgid(HT_SET(pidns_dev), HT_SET(pidns_ino), &ns, sizeof(ns)))
        return 0;
    return (u64)ns.tgid << 32 | ns.pid;
}

#ifndef HT_BCC
#define HT_MAX_PIDNS_LEVEL 32   /* MAX_PID_NS_LEVEL */

/* The number of struct pid "p" in hangtrace's namespace when that is the namespace it was
 * made in (numbers[level], the deepest), else 0. */
static __always_inline u32 ns_nr(struct pid *p)
{
    if (!p)
        return 0;
    u32 level = BPF_CORE_READ(p, level);
    if (level > HT_MAX_PIDNS_LEVEL)
        return 0;
    struct upid *up = (struct upid *)((void *)p + bpf_core_field_offset(struct pid, numbers) +
                                      level * bpf_core_type_size(struct upid));
    struct pid_namespace *ns = BPF_CORE_READ(up, ns);
    if (!ns || BPF_CORE_READ(ns, ns.inum) != HT_SET(pidns_ino))
        return 0;
    return (u32)BPF_CORE_READ(up, nr);
}

/* (*tid, *tgid) of task "t" as hangtrace numbers them (0, 0: not in its namespace). */
static __always_inline void task_ids(struct task_struct *t, u32 *tid, u32 *tgid)
{
    if (!HT_SET(pidns_ino)) {
        *tid = t->pid;
        *tgid = t->tgid;
        return;
    }
    *tid = ns_nr(t->thread_pid);
    *tgid = 0;
    if (*tid)
        *tgid = t->pid == t->tgid ? *tid : ns_nr(t->group_leader->thread_pid);
    if (!*tgid)
        *tid = 0;
}
#endif

#endif /* HT_PIDNS_BPF_H */
