/* ht_regs.bpf.h - a syscall's number and arguments from the saved user registers.
 * Part of bpf/hangtrace.bpf.c, #included by it (BCC gets it spliced into its text).
 *
 * At sys_exit x86_64 still holds all six arguments; arm64 has overwritten x0 with the result
 * and keeps the first argument in orig_x0. The field names below are the kernel's struct
 * pt_regs ones on both architectures:
 *  - libbpf: the tp_btf program gets a BTF pointer to struct pt_regs, so each field is one
 *    direct load, its offset relocated by CO-RE (no helper call on the fast path);
 *  - BCC: struct ht_regs repeats the ABI's layout (struct pt_regs is user ABI through
 *    ptrace), read with bpf_probe_read_kernel, one small read for the number and the first
 *    argument (the dearest step there) and one for the rest when a call needs them.
 */
#if defined(bpf_target_x86)
#ifdef HT_BCC
struct ht_regs {
    u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax;
};
#endif
#define HT_REGS_NR(r) ((s32)(r)->orig_ax)
#define HT_REGS_ARG0(r) ((r)->di)
#define HT_REGS_ARG1(r) ((r)->si)
#define HT_REGS_ARG2(r) ((r)->dx)
#define HT_REGS_ARG3(r) ((r)->r10)
#define HT_REGS_ARG4(r) ((r)->r8)
#define HT_REGS_ARG5(r) ((r)->r9)
#elif defined(bpf_target_arm64)
#ifdef HT_BCC
struct ht_regs {
    u64 regs[31];
    u64 sp, pc, pstate, orig_x0;
    s32 syscallno;
    u32 unused2;
};
#endif
#define HT_REGS_NR(r) ((r)->syscallno)
#define HT_REGS_ARG0(r) ((r)->orig_x0)
#define HT_REGS_ARG1(r) ((r)->regs[1])
#define HT_REGS_ARG2(r) ((r)->regs[2])
#define HT_REGS_ARG3(r) ((r)->regs[3])
#define HT_REGS_ARG4(r) ((r)->regs[4])
#define HT_REGS_ARG5(r) ((r)->regs[5])
#else
#error "hangtrace.bpf.c: syscall registers are only known for x86_64 and arm64"
#endif

struct ht_call {
    s32 nr;
    u64 a[6];
};

#ifdef HT_BCC
/* The number and first argument: one small read. */
static __always_inline int read_nr(ht_regs_t *regs, struct ht_call *c)
{
#if defined(bpf_target_x86)
    struct { u64 di, orig_ax; } x = {};
    if (bpf_probe_read_kernel(&x, sizeof(x), (void *)regs + 112) != 0)
        return -1;
    c->nr = (s32)x.orig_ax;
    c->a[0] = x.di;
#else
    struct { u64 orig_x0; s32 syscallno; u32 unused2; } x = {};
    if (bpf_probe_read_kernel(&x, sizeof(x), (void *)regs + 272) != 0)
        return -1;
    c->nr = x.syscallno;
    c->a[0] = x.orig_x0;
#endif
    return 0;
}

/* The other five arguments, for the calls that need them. */
static __always_inline void read_args(ht_regs_t *regs, struct ht_call *c)
{
#if defined(bpf_target_x86)
    struct { u64 r10, r9, r8, ax, cx, dx, si; } x = {};   /* offsets 56 .. 112 */
    bpf_probe_read_kernel(&x, sizeof(x), (void *)regs + 56);
    c->a[1] = x.si;
    c->a[2] = x.dx;
    c->a[3] = x.r10;
    c->a[4] = x.r8;
    c->a[5] = x.r9;
#else
    u64 r[6] = {};
    bpf_probe_read_kernel(&r, sizeof(r), (void *)regs);
    c->a[1] = r[1];
    c->a[2] = r[2];
    c->a[3] = r[3];
    c->a[4] = r[4];
    c->a[5] = r[5];
#endif
}

#else
static __always_inline int read_nr(ht_regs_t *regs, struct ht_call *c)
{
    c->nr = HT_REGS_NR(regs);
    c->a[0] = HT_REGS_ARG0(regs);
    return 0;
}

static __always_inline void read_args(ht_regs_t *regs, struct ht_call *c)
{
    c->a[1] = HT_REGS_ARG1(regs);
    c->a[2] = HT_REGS_ARG2(regs);
    c->a[3] = HT_REGS_ARG3(regs);
    c->a[4] = HT_REGS_ARG4(regs);
    c->a[5] = HT_REGS_ARG5(regs);
}
#endif

/* The registers of the current task's syscall (sched_switch, fork: not given them), or NULL
 * where the kernel lacks bpf_task_pt_regs (< 5.15: a feature probe, resolved at load). */
static __always_inline ht_regs_t *current_regs(void)
{
    if (!HT_HAVE_TASK_PT_REGS)
        return 0;
    return (ht_regs_t *)bpf_task_pt_regs(bpf_get_current_task_btf());
}
