/* ht_count.bpf.h - counting: the per-CPU cache, its flush to the hash maps, writes/reads per fd,
 * the calls of streamed kinds that were not streamed, by category.
 * Part of bpf/hangtrace.bpf.c, #included by it (BCC gets the parts spliced into its text:
 * see ht_dialect.bpf.h), after the maps and helpers it uses. */

/* ---------------------------------------------------------------- cache -> maps */
static __always_inline void flush_slot(struct ht_cache *k, u32 s)
{
    s &= HT_SLOTS - 1;
    if (k->c_count[s] == 0)
        return;
    struct ht_agg_key key = {.tid = k->tid, .tgid = k->tgid, .nr = k->c_nr[s]};
    struct ht_agg *ag = bpf_map_lookup_elem(&aggr, &key);
    if (!ag) {
        struct ht_agg zero = {};
        bpf_map_update_elem(&aggr, &key, &zero, BPF_NOEXIST);
        ag = bpf_map_lookup_elem(&aggr, &key);
    }
    if (ag) {
        /* a key is only written from the CPU whose cache holds its thread: no atomics */
        ag->count += k->c_count[s];
        ag->streamed += k->c_streamed[s];
        ag->ns += k->c_ns[s];
    } else {
        bump(HT_C_AGG_FULL);
    }
    k->c_count[s] = 0;
    k->c_streamed[s] = 0;
    k->c_ns[s] = 0;
}

static __always_inline void flush_fd(struct ht_cache *k, u32 s)
{
    s &= HT_FD_SLOTS - 1;
    if (k->f_writes[s] == 0 && k->f_reads[s] == 0)
        return;
    struct ht_fd_key key = {.tid = k->tid, .tgid = k->tgid, .fd = k->f_fd[s]};
    struct ht_fd *f = bpf_map_lookup_elem(&fds, &key);
    if (!f) {
        struct ht_fd zero = {};
        bpf_map_update_elem(&fds, &key, &zero, BPF_NOEXIST);
        f = bpf_map_lookup_elem(&fds, &key);
    }
    if (f) {
        if (k->f_writes[s]) {
            if (f->writes == 0 || k->f_wmin[s] < f->wmin)
                f->wmin = k->f_wmin[s];
            if (k->f_wmax[s] > f->wmax)
                f->wmax = k->f_wmax[s];
        }
        f->writes += k->f_writes[s];
        f->wbytes += k->f_wbytes[s];
        f->wsmall += k->f_wsmall[s];
        f->wsbytes += k->f_wsbytes[s];
        f->reads += k->f_reads[s];
        f->rbytes += k->f_rbytes[s];
        if (f->first_ns == 0 || k->f_first_ns[s] < f->first_ns)
            f->first_ns = k->f_first_ns[s];
        if (k->f_last_ns[s] > f->last_ns)
            f->last_ns = k->f_last_ns[s];
    } else {
        bump(HT_C_FDS_FULL);
    }
    k->f_writes[s] = 0;
    k->f_wbytes[s] = 0;
    k->f_wmin[s] = 0;
    k->f_wmax[s] = 0;
    k->f_wsmall[s] = 0;
    k->f_wsbytes[s] = 0;
    k->f_reads[s] = 0;
    k->f_rbytes[s] = 0;
    k->f_first_ns[s] = 0;
    k->f_last_ns[s] = 0;
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
        k->c_win[i] = 0;
}

/* ---------------------------------------------------------------- counting */
static __always_inline void count_fd(struct ht_cache *k, u32 kind, s32 fd, s64 ret, u32 msgs)
{
    if (kind == HT_K_WRITE ? ret < 0 : ret <= 0)
        return;   /* failed writes; reads that returned nothing (EOF, EAGAIN, errors) */
    u32 s = (u32)fd & (HT_FD_SLOTS - 1);
    if (k->f_fd[s] != fd) {
        k->seq += 1;
        flush_fd(k, s);
        k->seq += 1;
        k->f_fd[s] = fd;
    }
    u64 now = tick_ns(k);
    u64 n = msgs ? 0 : (u64)ret;   /* sendmmsg/recvmmsg return a message count */
    if (k->f_first_ns[s] == 0)
        k->f_first_ns[s] = now;
    k->f_last_ns[s] = now;
    if (kind == HT_K_WRITE) {
        if (k->f_writes[s] == 0 || n < k->f_wmin[s])
            k->f_wmin[s] = n;
        if (n > k->f_wmax[s])
            k->f_wmax[s] = n;
        k->f_writes[s] += 1;
        k->f_wbytes[s] += n;
        if (n <= HT_SMALL_WRITE) {
            k->f_wsmall[s] += 1;
            k->f_wsbytes[s] += n;
        }
    } else {
        k->f_reads[s] += 1;
        k->f_rbytes[s] += n;
    }
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
