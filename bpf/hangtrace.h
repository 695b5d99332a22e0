/* hangtrace.h - the one contract between bpf/hangtrace.bpf.c and its Python mirror
 * (tracer/record/backends/ebpf_layout.py, checked by tests/test_ebpf_layout.py).
 *
 * Rules for this file, so that the mirror test can parse it:
 *  - constants are plain "#define HT_NAME <integer>" lines;
 *  - structs use only __u32/__s32/__u64/__s64 fields and fixed arrays of them, laid out so
 *    that no padding is needed (the test checks ctypes.sizeof against the sum of the fields);
 *  - no unions, no bitfields, no nested structs.
 * BCC compiles it inside the BPF program (kernel types come from <linux/types.h>).
 */
#ifndef HANGTRACE_H
#define HANGTRACE_H

/* ---- record types on the ring buffer (struct ht_event.type) ---- */
#define HT_EV_SYSCALL 1     /* a completed call of a streamed kind                          */
#define HT_EV_FORK 2        /* tgid/tid: parent; args[0] child tid, args[1] child tgid      */
#define HT_EV_EXEC 3        /* tgid/tid: the process; args[0] old tid (the exec'ing thread)  */
#define HT_EV_EXIT 4        /* tgid/tid: the thread; args[0] group_dead (0, 1, 2 = unknown), */
                            /* args[1] on-CPU ns, args[2] switches                          */

/* ---- what the kernel does with each syscall nr (the "kinds" array, filled by userspace
 *      from tracer/linux/syscall_table.py, so the BPF code has no architecture's numbers) ---- */
#define HT_K_NONE 0          /* counted in the aggregation map only                          */
#define HT_K_FUTEX 1         /* futex(uaddr, op, val, timeout|val2, ...)                     */
#define HT_K_POLL 2          /* poll(fds, nfds, int ms)                                      */
#define HT_K_PPOLL 3         /* ppoll(fds, nfds, const struct timespec *, ...)               */
#define HT_K_EPOLL 4         /* epoll_wait/epoll_pwait(epfd, events, max, int ms, ...)       */
#define HT_K_EPOLL2 5        /* epoll_pwait2(epfd, events, max, const struct timespec *, ..) */
#define HT_K_SELECT 6        /* select(n, r, w, e, struct timeval *)                         */
#define HT_K_PSELECT 7       /* pselect6(n, r, w, e, const struct timespec *, ...)           */
#define HT_K_WRITE 8         /* write-like: fd in arg0, size from the return value           */
#define HT_K_READ 9          /* read-like: fd in arg0                                        */
#define HT_K_IOCTL 10        /* ioctl(fd, request, argp)                                     */
#define HT_K_WAIT 11         /* wait4/waitid                                                 */
#define HT_K_YIELD 12        /* sched_yield                                                  */
#define HT_K_NANOSLEEP 13    /* nanosleep(const struct timespec *, ...)                      */
#define HT_K_CLOCK_NANOSLEEP 14 /* clock_nanosleep(clock, flags, const struct timespec *, ..) */
#define HT_K_ACCEPT 15       /* accept/accept4: fd in arg0, new fd returned                  */
#define HT_K_CLONE 16        /* clone(flags, ...): not streamed, flags used on fork          */
#define HT_K_CLONE3 17       /* clone3(struct clone_args *, size): flags read at enter       */
#define HT_K_FORK 18         /* fork/vfork: always a new process                             */
#define HT_K_STREAMED_MAX 15 /* kinds 1..15 go to the ring buffer, the others are counted    */

/* ---- struct ht_event.flags / in-flight flags ---- */
#define HT_F_TIMEOUT 1       /* aux holds a relative timeout in ns                           */
#define HT_F_NO_TIMEOUT 2    /* the call waits without a time limit                          */
#define HT_F_TIMEOUT_ABS 4   /* an absolute deadline was given (aux holds it, its clock's ns) */
#define HT_F_UNREADABLE 8    /* a pointer argument could not be read (page not present)      */
#define HT_F_AUX 16          /* aux holds a decoded value (RM cmd/hClass, clone3 flags)      */
#define HT_F_PFDS 32         /* pfds[] holds the first polled fds (-1 = unused slot)         */
#define HT_F_NEW_PROCESS 64  /* FORK: the child is a new process (not CLONE_THREAD)          */
#define HT_F_GUESSED 128     /* FORK: clone flags unknown, process assumed (userspace checks) */
#define HT_F_DROPPED 256     /* a streamed kind over the rate: counted only, args not read    */

/* ---- struct ht_thread.flags ---- */
#define HT_T_ON_CPU 1        /* on a CPU since last_in_ns                                    */
#define HT_T_IN_CALL 2       /* an enter was seen, its exit not yet: the in-flight fields    */
#define HT_T_SEEN 4          /* some sys_exit of this thread was seen since the attach       */

/* ---- counters (the "counters" array) ---- */
#define HT_C_RINGBUF_FULL 0  /* ring buffer reserve failed: events lost                      */
#define HT_C_RATE_LIMITED 1  /* (unused in the kernel: userspace sums ht_agg.dropped)        */
#define HT_C_THREADS_FULL 2  /* thread map full: a thread of a target is not followed        */
#define HT_C_AGG_FULL 3      /* aggregation map full: a (tid, nr) pair is not counted        */
#define HT_C_TARGETS_FULL 4  /* tgid map full: a forked process is not followed              */
#define HT_NCOUNTERS 8

/* ---- sizes and limits ---- */
#define HT_MAX_NR 512            /* syscall numbers the kinds array covers                  */
#define HT_MAX_PFDS 4            /* pollfd entries copied from a poll/ppoll call            */
#define HT_MAX_TARGETS 16384     /* processes followed                                      */
#define HT_MAX_THREADS 32768     /* threads followed                                        */
#define HT_MAX_AGG 65536         /* (tid, nr) pairs counted                                 */
#define HT_AGG_SLOTS 16          /* per-thread count cache (struct ht_thread.c_*), direct-mapped */
#define HT_SLOT_SHIFT 8          /* "kinds" value: kind | slot << HT_SLOT_SHIFT                */
#define HT_KIND_MASK 255
#define HT_RINGBUF_PAGES 256     /* 1 MiB with 4 KiB pages                                  */
#define HT_RATE_WINDOW_NS 100000000  /* per-thread stream budget: HT_RATE_MAX events ...    */
#define HT_RATE_MAX 100              /* ... per 100 ms window                               */
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
    __u64 enter_ns;       /* bpf_ktime_get_ns (CLOCK_MONOTONIC) */
    __u64 exit_ns;
    __u64 args[6];
    __u64 aux;
    __u32 flags;
    __s32 pfds[4];
    __u32 kind;
};

/* Per-thread state (value of the "threads" map, key: tid): CPU accounting, the stream
 * budget, the call in flight (an enter seen without its exit yet), and a small cache of the
 * per-syscall counts (slot = "kinds"[nr] >> HT_SLOT_SHIFT, one nr per slot at a time; a slot
 * taken by another nr is flushed to "aggr" first, and so is every slot at thread exit).
 * 600 bytes. */
struct ht_thread {
    __u32 tgid;
    __u32 flags;
    __u64 on_cpu_ns;
    __u64 last_in_ns;
    __u64 switches;
    __u64 win_start_ns;
    __u32 win_count;
    __s32 nr;
    __u64 enter_ns;       /* 0: a call not timed, that has not left the CPU yet */
    __u64 args[6];
    __u64 aux;
    __u32 cflags;
    __u32 kind;
    __s32 pfds[4];
    __u32 slot;           /* count-cache slot of the call in flight */
    __u32 pad;
    __s32 c_nr[16];       /* cached counts: nr, calls, ns inside them, over the rate */
    __u64 c_count[16];
    __u64 c_ns[16];
    __u64 c_dropped[16];
    __u64 win_jiffies;    /* jiffies when the clock was last read over the stream budget */
};

/* Aggregation map: key (tid, nr) -> value. */
struct ht_agg_key {
    __u32 tid;
    __u32 nr;
};

struct ht_agg {
    __u64 count;          /* completed calls (those whose enter was not seen included) */
    __u64 total_ns;       /* time inside them (calls with a seen enter only)            */
    __u64 dropped;        /* of a streamed kind but over the rate: not streamed         */
    __u32 tgid;
    __u32 pad;
};

#endif /* HANGTRACE_H */
