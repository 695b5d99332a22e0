/* ht_count.bpf.h - counting: the per-CPU cache, its flush to the hash maps, writes/reads per fd,
 * the calls of streamed kinds that were not streamed, by category.
 * Part of bpf/hangtrace.bpf.c, #included by it (BCC gets the parts spliced into its text:
 * see ht_dialect.bpf.h), after the maps and helpers it uses. */

/* ---------------------------------------------------------------- cache -> maps */
static __always_inline void flush_slot(struct ht_cache *k, u32 s)
{
    struct ht_cslot *c = &k->c[s & (HT_SLOTS - 1)];
    if (c->count == 0)
        return;
    struct ht_agg_key key = {.tid = k->tid, .tgid = k->tgid, .nr = c->nr};
    struct ht_agg *ag = bpf_map_lookup_elem(&aggr, &key);
    if (!ag) {
        struct ht_agg zero = {};
        bpf_map_update_elem(&aggr, &key, &zero, BPF_NOEXIST);
        ag = bpf_map_lookup_elem(&aggr, &key);
    }
    if (ag) {
        /* a key is only written from the CPU whose cache holds its thread: no atomics */
        ag->count += c->count;
        ag->streamed += c->streamed;
        ag->ns += c->ns;
    } else {
        bump(HT_C_AGG_FULL);
    }
    c->count = 0;
    c->streamed = 0;
    c->ns = 0;
}

/* "rep" of a write of "n" bytes (struct ht_fslot); 0 (none) where n does not fit (a write
 * moves at most 2 GiB: never). */
static __always_inline u32 fd_rep(u64 n)
{
    return n < 0xffffffff ? (u32)n + 1 : 0;
}

/* Whether a write of "n" bytes is of the size "rep" stands for (0, none, never is: n + 1 >= 1,
 * n being a write's return value or 0). */
static __always_inline int fd_is_rep(struct ht_fslot *f, u64 n)
{
    return (u64)f->rep == n + 1;
}

/* The writes "reps" stands for added to the slot's sums: each of size "rep" - 1 (a write
 * counted in full once, so the min and max already hold it). counts.py reads a cache's slots
 * the same way (fslot_fields). */
static __always_inline void fd_settle(struct ht_fslot *f)
{
    u64 r = f->reps;
    if (!r)
        return;
    u64 n = f->rep - 1;
    f->writes += r;
    f->wbytes += r * n;
    if (n <= HT_SMALL_WRITE) {
        f->wsmall += r;
        f->wsbytes += r * n;
    }
    f->reps = 0;
}

static __always_inline void flush_fd(struct ht_cache *k, u32 s)
{
    struct ht_fslot *c = &k->f[s & (HT_FD_SLOTS - 1)];
    fd_settle(c);
    if (c->writes == 0 && c->reads == 0)
        return;
    struct ht_fd_key key = {.tid = k->tid, .tgid = k->tgid, .fd = c->fd};
    struct ht_fd *f = bpf_map_lookup_elem(&fds, &key);
    if (!f) {
        struct ht_fd zero = {};
        bpf_map_update_elem(&fds, &key, &zero, BPF_NOEXIST);
        f = bpf_map_lookup_elem(&fds, &key);
    }
    if (f) {
        if (c->writes) {
            if (f->writes == 0 || c->wmin < f->wmin)
                f->wmin = c->wmin;
            if (c->wmax > f->wmax)
                f->wmax = c->wmax;
        }
        f->writes += c->writes;
        f->wbytes += c->wbytes;
        f->wsmall += c->wsmall;
        f->wsbytes += c->wsbytes;
        f->reads += c->reads;
        f->rbytes += c->rbytes;
        if (f->first_ns == 0 || c->first_ns < f->first_ns)
            f->first_ns = c->first_ns;
        if (c->last_ns > f->last_ns)
            f->last_ns = c->last_ns;
    } else {
        bump(HT_C_FDS_FULL);
    }
    s32 fd = c->fd;
    __builtin_memset(c, 0, sizeof(*c));
    c->fd = fd;
}

static __always_inline void flush_cats(struct ht_cache *k)
{
    u64 any = 0;
#pragma unroll
    for (int i = 0; i < HT_NCATS; i++)
        any |= k->cat[i];
    if (!any)
        return;
    struct ht_tkey key = {.tid = k->tid, .tgid = k->tgid};
    struct ht_tcount *tc = bpf_map_lookup_elem(&tcounts, &key);
    if (!tc) {
        struct ht_tcount zero = {};
        bpf_map_update_elem(&tcounts, &key, &zero, BPF_NOEXIST);
        tc = bpf_map_lookup_elem(&tcounts, &key);
    }
#pragma unroll
    for (int i = 0; i < HT_NCATS; i++) {
        if (tc)
            tc->cat[i] += k->cat[i];
        k->cat[i] = 0;
    }
    if (!tc)
        bump(HT_C_IOCTLS_FULL);
}

/* Move everything the cache holds to the maps, under its owner; "seq" is odd meanwhile. */
static __always_inline void flush_all(struct ht_cache *k)
{
    k->seq += 1;
#pragma clang loop unroll(disable)
    for (u32 s = 0; s < HT_SLOTS; s++)
        flush_slot(k, s);
#pragma clang loop unroll(disable)
    for (u32 s = 0; s < HT_FD_SLOTS; s++)
        flush_fd(k, s);
    flush_cats(k);
    k->seq += 1;
}

static __always_inline void take_over(struct ht_cache *k, u32 tid, u32 tgid)
{
    flush_all(k);
    k->tid = tid;
    k->tgid = tgid;
    k->win_ns = 0;
#pragma unroll
    for (int i = 0; i < HT_SLOTS; i++)
        k->c[i].win = 0;
}

/* ---------------------------------------------------------------- counting */
/* The process's first successful read or write on "fd" in its program image (k->cur_target):
 * told on the ring buffer (HT_EV_FD) so that userspace reads its fd table while the fd is open;
 * a process that ended before its next periodic read left its fds unnamed. Looked at only when
 * an fd slot of the cache starts afresh (a new fd in it, or after a flush), not per call. */
static __always_inline void note_fd(struct ht_cache *k, s32 fd)
{
    struct ht_seen_key key = {};
    key.tgid = k->tgid;
    key.fd = fd;
    u8 image = (u8)k->cur_target;
    u8 *seen = bpf_map_lookup_elem(&fdseen, &key);
    if (seen && *seen == image)
        return;
    if (seen)
        *seen = image;
    else if (bpf_map_update_elem(&fdseen, &key, &image, BPF_NOEXIST) != 0)
        return;   /* the map is full: the periodic reads name it, as before */
    struct ht_event *e = new_record(HT_EV_FD, k->tgid, k->tid, bpf_ktime_get_ns());
    if (!e)
        return;
    e->args[0] = (u32)fd;
    bpf_ringbuf_submit(e, 0);
}

/* A write/read of "n" bytes at "now" counted in fd slot "f" (count_fd). */
static __always_inline void fd_add(struct ht_fslot *f, u32 kind, u64 n, u64 now)
{
    f->last_ns = now;
    if (kind == HT_K_WRITE) {
        if (f->writes == 0 || n < f->wmin)
            f->wmin = n;
        if (n > f->wmax)
            f->wmax = n;
        f->writes += 1;
        f->wbytes += n;
        if (n <= HT_SMALL_WRITE) {
            f->wsmall += 1;
            f->wsbytes += n;
        }
    } else {
        f->reads += 1;
        f->rbytes += n;
    }
}

/* Whether a write/read that returned "ret" is counted per fd: not failed writes, nor reads
 * that returned nothing (EOF, EAGAIN, errors). */
#if HT_K_READ != HT_K_WRITE + 1
#error "fd_counted: HT_K_READ is HT_K_WRITE + 1"
#endif
static __always_inline int fd_counted(u32 kind, s64 ret)
{
    return ret >= (s64)(kind - HT_K_WRITE);   /* 0 for a write, 1 for a read: one compare */
}

static __always_inline void count_fd(struct ht_cache *k, u32 kind, s32 fd, s64 ret, u32 msgs)
{
    if (!fd_counted(kind, ret))
        return;
    u32 s = (u32)fd & (HT_FD_SLOTS - 1);
    struct ht_fslot *f = &k->f[s];
    if (f->fd != fd) {
        k->seq += 1;
        flush_fd(k, s);
        k->seq += 1;
        f->fd = fd;
    }
    if (f->first_ns == 0)
        note_fd(k, fd);
    u64 now = tick_ns(k);
    if (f->first_ns == 0)
        f->first_ns = now;
    if (f->reps) {   /* the sums change under a reader's eyes: "seq" odd meanwhile */
        k->seq += 1;
        fd_settle(f);
        k->seq += 1;
    }
    u64 n = msgs ? 0 : (u64)ret;   /* sendmmsg/recvmmsg: a message count */
    fd_add(f, kind, n, now);
    if (kind == HT_K_WRITE)
        f->rep = fd_rep(n);   /* the next writes of its size: sys_exit_fast adds to "reps" */
}

/* A call of a streamed kind that is not streamed: the facts the analysis needs, by category
 * (futex.py and the accumulator decide the same from a streamed call). */
static __always_inline void count_category(struct ht_cache *k, u32 tid, u32 tgid, u32 kind,
                                           struct ht_call *c, s64 ret)
{
    u64 *a = c->a;
    switch (kind) {
    case HT_K_FUTEX: {
        u32 cmd = (u32)a[1] & 127;
        if (cmd < 32 && ((HT_SET(futex_wait_mask) >> cmd) & 1)) {
            k->cat[HT_CAT_FUTEX_WAITS] += 1;
            if (a[3] != 0)
                k->cat[HT_CAT_FUTEX_WAITS_TIMEOUT] += 1;
            if (ret == -HT_ETIMEDOUT)
                k->cat[HT_CAT_FUTEX_TIMEOUTS] += 1;
        } else if (cmd < 32 && ((HT_SET(futex_wake_mask) >> cmd) & 1)) {
            k->cat[HT_CAT_FUTEX_WAKES] += 1;
        }
        break;
    }
    case HT_K_POLL:
    case HT_K_PPOLL:
    case HT_K_EPOLL:
    case HT_K_EPOLL2:
    case HT_K_SELECT:
    case HT_K_PSELECT: {
        int infinite;
        if (kind == HT_K_POLL)
            infinite = (s32)a[2] < 0;
        else if (kind == HT_K_EPOLL)
            infinite = (s32)a[3] < 0;
        else if (kind == HT_K_PPOLL)
            infinite = a[2] == 0;
        else if (kind == HT_K_EPOLL2)
            infinite = a[3] == 0;
        else
            infinite = a[4] == 0;
        k->cat[HT_CAT_POLLS] += 1;
        if (infinite)
            k->cat[HT_CAT_POLL_INFINITE] += 1;
        if (ret == 0 || ret == -HT_ETIMEDOUT)
            k->cat[HT_CAT_POLL_TIMEOUTS] += 1;
        break;
    }
    case HT_K_ACCEPT:
        if (ret >= 0)
            k->cat[HT_CAT_ACCEPTS] += 1;
        break;
    case HT_K_IOCTL: {
        struct ht_ioc_key key = {.tid = tid, .tgid = tgid, .fd = (s32)a[0], .request = (u32)a[1]};
        struct ht_ioc *io = bpf_map_lookup_elem(&ioctls, &key);
        if (!io) {
            struct ht_ioc zero = {};
            bpf_map_update_elem(&ioctls, &key, &zero, BPF_NOEXIST);
            io = bpf_map_lookup_elem(&ioctls, &key);
        }
        if (io)
            __sync_fetch_and_add(&io->count, 1);
        else
            bump(HT_C_IOCTLS_FULL);
        break;
    }
    default:
        break;   /* waits, yields, sleeps: their counts per nr say it all */
    }
}
