/* ht_stream.bpf.h - streaming: the record a call streamed one by one carries (timeouts and
 * NVIDIA commands read from user memory), and the per-thread budget.
 * Part of bpf/hangtrace.bpf.c, #included by it (BCC gets the parts spliced into its text:
 * see ht_dialect.bpf.h), after the maps and helpers it uses. */

/* ---------------------------------------------------------------- streaming */
/* A struct timespec/timeval the call was given (frac_ns = 1000 for a timeval). A NULL pointer
 * is an infinite wait. Read at exit: still the call's own memory, and unchanged except where
 * the kernel wrote the time left back (ppoll, select, pselect6: "left"). For those, the value
 * read when the call first slept ("to", ns + 1) is the one it was given; a call that did not
 * sleep returned at once, so the time left is about all of it. */
static __always_inline void read_timeout(struct ht_event *e, u64 uptr, u64 frac_ns, u32 abs,
                                         u32 left, u64 to)
{
    struct ht_ts ts = {};
    if (uptr == 0) {
        e->flags |= HT_F_NO_TIMEOUT;
        return;
    }
    if (left && to) {
        e->aux = to - 1;
        e->flags |= HT_F_TIMEOUT;
        return;
    }
    if (bpf_probe_read_user(&ts, sizeof(ts), (void *)uptr) != 0) {
        /* not faulted in: tracepoint programs may not sleep, so they cannot page it in */
        e->flags |= HT_F_UNREADABLE | (abs ? HT_F_TIMEOUT_ABS : HT_F_TIMEOUT);
        return;
    }
    e->aux = (u64)ts.sec * 1000000000ULL + (u64)ts.frac * frac_ns;
    e->flags |= abs ? HT_F_TIMEOUT_ABS : HT_F_TIMEOUT;
}

static __always_inline void ms_timeout(struct ht_event *e, u64 arg)
{
    s32 ms = (s32)arg;   /* an int argument: the low 32 bits of the register */
    if (ms < 0) {
        e->flags |= HT_F_NO_TIMEOUT;
    } else {
        e->aux = (u64)ms * 1000000ULL;
        e->flags |= HT_F_TIMEOUT;
    }
}

/* One read_timeout call site: each inlined copy of it costs BCC's compile (the attach) time. */
static __always_inline void decode(struct ht_event *e, u32 kind, u64 to)
{
    u64 *a = e->args;
    u64 ptr = 0, frac_ns = 1;
    u32 abs = 0, left = 0, by_ptr = 1;
    switch (kind) {
    case HT_K_FUTEX: {
        u32 cmd = (u32)a[1] & 127;
        by_ptr = cmd < 32 && ((HT_SET(futex_wait_mask) >> cmd) & 1);   /* other ops: arg 3 is val2 */
        ptr = a[3];
        abs = cmd != 0;                /* FUTEX_WAIT: relative; the other waits: absolute */
        break;
    }
    case HT_K_POLL:
    case HT_K_PPOLL: {
        u64 nfds = a[1];
        e->flags |= HT_F_PFDS;
#pragma unroll
        for (int i = 0; i < HT_MAX_PFDS; i++) {
            s32 fd = -1;
            if ((u64)i < nfds)   /* struct pollfd { int fd; short events, revents; } */
                bpf_probe_read_user(&fd, sizeof(fd), (void *)(a[0] + 8 * i));
            e->pfds[i] = fd;
        }
        if (kind == HT_K_POLL) {
            ms_timeout(e, a[2]);
            by_ptr = 0;
        } else {
            ptr = a[2];
            left = 1;
        }
        break;
    }
    case HT_K_EPOLL:
        ms_timeout(e, a[3]);
        by_ptr = 0;
        break;
    case HT_K_EPOLL2:
        ptr = a[3];
        break;
    case HT_K_SELECT:
        ptr = a[4];
        frac_ns = 1000;
        left = 1;
        break;
    case HT_K_PSELECT:
        ptr = a[4];
        left = 1;
        break;
    case HT_K_NANOSLEEP:
        ptr = a[0];
        break;
    case HT_K_CLOCK_NANOSLEEP:
        ptr = a[2];
        abs = (u32)a[1] & 1;   /* TIMER_ABSTIME */
        break;
    case HT_K_IOCTL: {
        u32 req = (u32)a[1];
        u32 size = (req >> 16) & 0x3fff;
        u32 nr = req & 0xff;
        u32 off = 0, v = 0;
        by_ptr = 0;
        if (((req >> 8) & 0xff) != HT_NV_IOC_TYPE || a[2] == 0)
            break;
        /* NVOS54 (RM_CONTROL, 32 bytes): cmd at 8. NVOS21/NVOS64 (RM_ALLOC, 32/48 bytes):
         * hClass at 12. Inputs the driver does not change. Decoded only when the size in the
         * request matches the struct: layouts may change between driver versions. */
        if (nr == HT_NV_RM_CONTROL && size == 32)
            off = 8;
        else if (nr == HT_NV_RM_ALLOC && (size == 32 || size == 48))
            off = 12;
        if (off && bpf_probe_read_user(&v, sizeof(v), (void *)(a[2] + off)) == 0) {
            e->aux = v;
            e->flags |= HT_F_AUX;
        }
        break;
    }
    default:
        by_ptr = 0;
        break;
    }
    if (by_ptr)
        read_timeout(e, ptr, frac_ns, abs, left, to);
}

/* Within the budget: at most HT_RATE_MAX calls per slot per window; the window is read from
 * the per-tick clock, so a flood costs no clock read per call. */
static __always_inline int in_budget(struct ht_cache *k, u32 s)
{
    u64 now = tick_ns(k);
    s &= HT_SLOTS - 1;
    if (now - k->win_ns >= HT_RATE_WINDOW_NS) {
        k->win_ns = now;
#pragma unroll
        for (int i = 0; i < HT_SLOTS; i++)
            k->c[i].win = 0;
    }
    if (k->c[s].win >= HT_RATE_MAX)
        return 0;
    k->c[s].win += 1;
    return 1;
}

static __always_inline int stream(struct ht_call *c, u32 tgid, u32 tid, u32 kind, s64 ret,
                                  u64 slept_since, u64 now, u64 to)
{
    struct ht_event *e = bpf_ringbuf_reserve(&events, sizeof(struct ht_event), 0);
    if (!e) {
        bump(HT_C_RINGBUF_FULL);
        return 0;
    }
    e->type = HT_EV_SYSCALL;
    e->tgid = tgid;
    e->tid = tid;
    e->nr = c->nr;
    e->ret = ret;
    e->enter_ns = slept_since ? slept_since : now;
    e->exit_ns = now;
#pragma unroll
    for (int i = 0; i < 6; i++)
        e->args[i] = c->a[i];
    e->aux = 0;
    e->flags = slept_since ? HT_F_BLOCKED : 0;
#pragma unroll
    for (int i = 0; i < HT_MAX_PFDS; i++)
        e->pfds[i] = -1;
    e->kind = kind;
    decode(e, kind, to);
    bpf_ringbuf_submit(e, 0);
    return 1;
}
