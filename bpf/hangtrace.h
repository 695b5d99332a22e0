/* hangtrace.h - the one contract between bpf/hangtrace.bpf.c and its Python mirror
 * (tracer/record/backends/ebpf/layout.py, checked by tests/unit/test_ebpf_layout.py).
 *
 * Rules for this file, so that the mirror test can parse it:
 *  - constants are plain "#define HT_NAME <integer>" lines;
 *  - structs use only __u32/__s32/__u64/__s64 fields, fixed arrays of them, and fixed arrays
 *    of structs declared before them, laid out so that no padding is needed (the test checks
 *    ctypes.sizeof against the sum of the fields);
 *  - no unions, no bitfields.
 * Both loaders compile it inside the program (__u32... from vmlinux.h or <linux/types.h>).
 */
#ifndef HANGTRACE_H
#define HANGTRACE_H

/* ---- record types on the ring buffer (struct ht_event.type) ---- */
#define HT_EV_SYSCALL 1     /* a completed call of a streamed kind                          */
#define HT_EV_FORK 2        /* tgid/tid: parent; args[0] child tid, args[1] child tgid      */
#define HT_EV_EXEC 3        /* tgid/tid: the process; args[0] old tid (the exec'ing thread)  */
#define HT_EV_EXIT 4        /* tgid/tid: the thread; args[0] group_dead (0, 1, 2 = unknown), */
                            /* args[1] on-CPU ns, args[2] switches                          */
#define HT_EV_FD 5          /* tgid/tid: the first read or write the process's program image */
                            /* made on fd args[0] (its fd table is to be read while it lives) */

/* ---- what the kernel does with each syscall nr (the "kinds" array, filled by userspace
 *      from tracer/linux/syscall_table.py, so the BPF code has no architecture's numbers).
 *      Every call is counted per (thread, nr). Kinds 1..HT_K_STREAMED_MAX are also streamed
 *      one by one (the first ones per thread, kind and 100 ms window: see HT_RATE_MAX);
 *      writes and reads are counted per (thread, fd) and never streamed. ---- */
#define HT_K_NONE 0          /* counted per nr only                                          */
#define HT_K_FUTEX 1         /* futex(uaddr, op, val, timeout|val2, ...)                     */
#define HT_K_POLL 2          /* poll(fds, nfds, int ms)                                      */
#define HT_K_PPOLL 3         /* ppoll(fds, nfds, struct timespec *, ...): time left written back */
#define HT_K_EPOLL 4         /* epoll_wait/epoll_pwait(epfd, events, max, int ms, ...)       */
#define HT_K_EPOLL2 5        /* epoll_pwait2(epfd, events, max, const struct timespec *, ..) */
#define HT_K_SELECT 6        /* select(n, r, w, e, struct timeval *): time left written back */
#define HT_K_PSELECT 7       /* pselect6(n, r, w, e, struct timespec *, ...): likewise       */
#define HT_K_IOCTL 8         /* ioctl(fd, request, argp): unstreamed ones per (fd, request)  */
#define HT_K_WAIT 9          /* wait4/waitid                                                 */
#define HT_K_YIELD 10        /* sched_yield                                                  */
#define HT_K_NANOSLEEP 11    /* nanosleep(const struct timespec *, ...)                      */
#define HT_K_CLOCK_NANOSLEEP 12 /* clock_nanosleep(clock, flags, const struct timespec *, ..) */
#define HT_K_ACCEPT 13       /* accept/accept4: fd in arg0, new fd returned                  */
#define HT_K_STREAMED_MAX 13 /* kinds 1..13 go to the ring buffer (within the budget)        */
#define HT_K_WRITE 14        /* write/send family: fd in arg0, bytes = the return value      */
#define HT_K_READ 15         /* read/recv family: fd in arg0, bytes = the return value       */
#define HT_K_CLONE 16        /* clone(flags, ...): flags read by the fork tracepoint         */
#define HT_K_CLONE3 17       /* clone3(struct clone_args *, size)                            */
#define HT_K_FORK 18         /* fork/vfork: always a new process                             */

/* ---- the "kinds" array value: kind | slot << HT_SLOT_SHIFT | HT_KV_* bits ---- */
#define HT_SLOT_SHIFT 8
#define HT_KIND_MASK 255
#define HT_KV_MSGS 65536     /* sendmmsg/recvmmsg: the return value counts messages, not bytes */

/* ---- struct ht_event.flags ---- */
#define HT_F_TIMEOUT 1       /* aux holds a relative timeout in ns                           */
#define HT_F_NO_TIMEOUT 2    /* the call waits without a time limit                          */
#define HT_F_TIMEOUT_ABS 4   /* an absolute deadline was given (aux holds it, its clock's ns) */
#define HT_F_UNREADABLE 8    /* a pointer argument could not be read (page not present)      */
#define HT_F_AUX 16          /* aux holds a decoded value (RM cmd/hClass)                    */
#define HT_F_PFDS 32         /* pfds[] holds the first polled fds (-1 = unused slot)         */
#define HT_F_NEW_PROCESS 64  /* FORK: the child is a new process (not CLONE_THREAD)          */
#define HT_F_GUESSED 128     /* FORK: clone flags unknown, process assumed (userspace checks) */
#define HT_F_BLOCKED 256     /* SYSCALL: the call slept; enter_ns is when it first did        */

/* ---- counters (the "counters" array) ---- */
#define HT_C_RINGBUF_FULL 0  /* ring buffer reserve failed: a call counted, not streamed     */
#define HT_C_THREADS_FULL 1  /* thread map full: a thread's CPU time and waits not followed  */
#define HT_C_AGG_FULL 2      /* (tid, nr) map full: calls not counted                        */
#define HT_C_FDS_FULL 3      /* (tid, fd) map full: writes/reads not counted                 */
#define HT_C_IOCTLS_FULL 4   /* (tid, fd, request) or per-thread category map full           */
#define HT_NCOUNTERS 8

/* ---- the "gen" counters (BCC: an array; CO-RE: the globals ht_ugen, ht_kgen): what
 *      invalidates the per-CPU caches of who is current ---- */
#define HT_GEN_USER 0        /* userspace adds 1 after each change of "procs" or "blocked"    */
                             /* (starts at 1)                                                */
#define HT_GEN_KERNEL 1      /* the program adds 1 at every thread exit (a task stack, so a   */
                             /* pt_regs address, may be reused), tid-changing exec, and a    */
                             /* followed thread's first sleep since its last syscall exit    */
#define HT_NGEN 2

/* ---- sizes and limits ---- */
#define HT_MAX_NR 512            /* syscall numbers the kinds array covers                  */
#define HT_MAX_PFDS 4            /* pollfd entries copied from a poll/ppoll call            */
#define HT_MAX_THREADS 32768     /* threads followed                                        */
#define HT_MAX_AGG 65536         /* (tid, nr) pairs counted                                 */
#define HT_MAX_FDS 65536         /* (tid, fd) pairs counted                                 */
#define HT_MAX_IOCTLS 16384      /* (tid, fd, request) triples counted                      */
#define HT_MAX_FDSEEN 16384      /* (tgid, fd) pairs whose first use was told (HT_EV_FD)     */
#define HT_MAX_FAILS 16384       /* (tid, nr, errno) triples of failed calls not streamed    */
#define HT_SLOTS 16              /* per-CPU cache: syscall-nr slots (direct-mapped)          */
#define HT_FD_SLOTS 8            /* per-CPU cache: fd slots (fd & 7)                        */
#define HT_RINGBUF_PAGES 256     /* 1 MiB with 4 KiB pages                                  */
#define HT_RATE_WINDOW_NS 100000000  /* stream budget: HT_RATE_MAX calls per thread, cache  */
#define HT_RATE_MAX 25               /* slot and 100 ms window                              */
#define HT_SMALL_WRITE 8             /* writes of at most this many bytes: wake-up sized    */
#define HT_CLONE_THREAD 65536        /* CLONE_THREAD (0x00010000)                           */
#define HT_NV_IOC_TYPE 70            /* 'F': NVIDIA escape ioctls                           */
#define HT_NV_RM_CONTROL 42          /* 0x2a, NVOS54: cmd at offset 8                       */
#define HT_NV_RM_ALLOC 43            /* 0x2b, NVOS21/NVOS64: hClass at offset 12            */

/* One ring buffer record (120 bytes). */
struct ht_event {
    __u32 type;
    __u32 tgid;
    __u32 tid;
    __s32 nr;
    __s64 ret;
    __u64 enter_ns;       /* bpf_ktime_get_ns (CLOCK_MONOTONIC): when it first slept, or = exit */
    __u64 exit_ns;
    __u64 args[6];
    __u64 aux;
    __u32 flags;
    __s32 pfds[4];
    __u32 kind;
};

/* Per-thread state that is not on the syscall fast path (value of "threads", key: tid):
 * CPU time of completed slices (for threads that exit: live ones are read from /proc), when
 * the thread first slept in its current call, and the timeout that call was given when the
 * kernel overwrites it before the exit (ppoll, select, pselect6). 48 bytes. */
struct ht_thread {
    __u32 tgid;
    __u32 pad;
    __u64 on_cpu_ns;
    __u64 last_in_ns;     /* set by userspace at attach for a thread running then */
    __u64 switches;
    __u64 blocked_ns;     /* first sleep since the last syscall exit (0: none) */
    __u64 blocked_to;     /* ns + 1 of the timeout read then (0: none read) */
};

/* One syscall-number slot of the per-CPU cache: the calls of "nr" not yet moved to "aggr"
 * (fields as struct ht_agg). 32 bytes. */
struct ht_cslot {
    __s32 nr;
    __u32 win;            /* calls streamed in the current window                         */
    __u64 count;
    __u64 streamed;
    __u64 ns;
};

/* One fd slot of the per-CPU cache (fd & 7): its traffic not yet moved to "fds" (fields as
 * struct ht_fd, plus "reps": the writes the fast path counted alone, each of the size of the
 * last write counted in full, "rep"; fd_settle in ht_count.bpf.h, and counts.py, add them to
 * the sums). 96 bytes. */
struct ht_fslot {
    __s32 fd;             /* -1: unused                                                   */
    __u32 rep;            /* the size "reps" repeat, + 1; 0: none                         */
    __u64 writes;
    __u64 wbytes;
    __u64 wmin;
    __u64 wmax;
    __u64 wsmall;
    __u64 wsbytes;
    __u64 reads;
    __u64 rbytes;
    __u64 first_ns;
    __u64 last_ns;
    __u64 reps;           /* writes since, each of size "rep" - 1: not yet in the sums     */
};

/* The per-CPU cache (one entry per CPU): the counts of the thread that last made a syscall
 * on this CPU ("tid"), flushed to the hash maps below when another thread takes the CPU's
 * cache over (and at thread exit). Userspace adds caches and maps, so counts are never
 * moved out of sight: "seq" changes around every flush (a reader that sees it change reads
 * again). And who the last task that made a syscall on this CPU was ("cur_*": its tid, tgid,
 * whether it is followed), known by its saved registers' address (one per task: the top of
 * its kernel stack) and valid while the two "gen" counters have not moved since: every
 * syscall of the machine compares two words instead of calling bpf_get_current_pid_tgid and
 * looking "procs" up. A slot's fields sit together (one or two cache lines per call). 1424
 * bytes. */
struct ht_cache {
    __u32 tid;
    __u32 tgid;
    __u32 seq;
    __u32 pad;
    __u32 cur_tid;
    __u32 cur_tgid;
    __u32 cur_target;     /* its "procs" value: 0 not followed, else its image (1..255)    */
    __u32 pad2;
    __u64 cur_gen;        /* gen[HT_GEN_USER] + gen[HT_GEN_KERNEL] when decided            */
    __u64 cur_regs;       /* the address of its struct pt_regs: which task it is           */
    __u64 last_switch_ns; /* when the thread now on this CPU was switched in               */
    __u64 tick_j;         /* jiffies of the current tick ...                               */
    __u64 tick_ns;        /* ... and the clock read at the first exit within it             */
    __u64 win_ns;         /* the owner's stream window start                                */
    struct ht_cslot c[16];   /* by syscall-number slot (the "kinds" value's slot)           */
    struct ht_fslot f[8];    /* by fd & 7                                                   */
    __u64 cat[8];         /* unstreamed categories, indexed HT_CAT_* (struct ht_tcount)     */
};

/* ht_cache.cat / ht_tcount.cat indices: calls of streamed kinds that were NOT streamed. */
#define HT_CAT_FUTEX_WAITS 0
#define HT_CAT_FUTEX_WAITS_TIMEOUT 1
#define HT_CAT_FUTEX_TIMEOUTS 2
#define HT_CAT_FUTEX_WAKES 3
#define HT_CAT_POLLS 4
#define HT_CAT_POLL_TIMEOUTS 5
#define HT_CAT_POLL_INFINITE 6
#define HT_CAT_ACCEPTS 7
#define HT_NCATS 8

/* Every map key starts with the thread and its process: a tid reused by another process
 * during the recording (pid numbers wrap) is another thread. */
struct ht_tkey {
    __u32 tid;
    __u32 tgid;
};

/* Aggregation map: key (tid, tgid, nr) -> value. */
struct ht_agg_key {
    __u32 tid;
    __u32 tgid;
    __s32 nr;
    __u32 pad;
};

struct ht_agg {
    __u64 count;          /* completed calls                                              */
    __u64 streamed;       /* of which sent one by one on the ring buffer                  */
    __u64 ns;             /* time the calls spent blocked (from their first sleep)        */
};

/* Per (tgid, fd): the program image ("procs" value) whose first use of it was told. */
struct ht_seen_key {
    __u32 tgid;
    __s32 fd;
};

/* Per (tid, tgid, fd): every write/send and read/recv, none streamed. */
struct ht_fd_key {
    __u32 tid;
    __u32 tgid;
    __s32 fd;
    __u32 pad;
};

struct ht_fd {
    __u64 writes;         /* calls that returned >= 0                                     */
    __u64 wbytes;
    __u64 wmin;
    __u64 wmax;
    __u64 wsmall;         /* of the writes, those of at most HT_SMALL_WRITE bytes ...     */
    __u64 wsbytes;        /* ... and their bytes                                          */
    __u64 reads;          /* calls that returned data (> 0)                               */
    __u64 rbytes;
    __u64 first_ns;       /* CLOCK_MONOTONIC of the first and last call (tick precision)  */
    __u64 last_ns;
};

/* Per thread (key ht_tkey): the calls of streamed kinds that were NOT streamed, by category
 * (HT_CAT_*). */
struct ht_tcount {
    __u64 cat[8];
};

/* Per (tid, tgid, fd, request): ioctls not streamed. */
struct ht_ioc_key {
    __u32 tid;
    __u32 tgid;
    __s32 fd;
    __u32 request;
};

struct ht_ioc {
    __u64 count;
};

/* Per (tid, tgid, nr, errno): calls not streamed that failed with that errno, but for the
 * answers an event loop gets all the time (EAGAIN, EINTR, ETIMEDOUT, EINPROGRESS and the
 * kernel's ERESTART*: skipped here so that they cost no map update); the analyzer drops
 * the other normal answers (accumulate/stats.NOT_FAILURES). */
struct ht_fail_key {
    __u32 tid;
    __u32 tgid;
    __s32 nr;
    __u32 err;
};

struct ht_fail {
    __u64 count;
};

#endif /* HANGTRACE_H */
