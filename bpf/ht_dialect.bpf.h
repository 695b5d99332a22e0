/* ht_dialect.bpf.h - what differs between hangtrace's two BPF loaders; everything else in
 * bpf/NAME.bpf.c is written once.
 *
 *  - libbpf (the default): scripts/build_bpf.py compiles each bpf/NAME.bpf.c once with
 *    clang -target bpf against bpf/vmlinux/<arch>/vmlinux.h (generated from BTF) into
 *    NAME.bpf.o; tracer/record/backends/ebpf/core_loader.py loads it. Kernel structs are read
 *    with CO-RE relocations (vmlinux.h marks every struct preserve_access_index), so the one
 *    object runs on any kernel with BTF. Settings the loader fills in before load live in
 *    .rodata (HT_SETTING).
 *  - BCC (the fallback, HT_BCC defined): tracer/record/backends/ebpf/bcc_loader.py splices the
 *    ht_*.bpf.h parts into the main text and rewrites the libbpf map calls into BCC's
 *    method syntax (BCC allows map calls neither in macros nor in included files):
 *        bpf_map_lookup_elem(&m, k)            -> m.lookup(k)
 *        bpf_map_update_elem(&m, k, v, BPF_ANY) -> m.update(k, v)   (BPF_NOEXIST: m.insert)
 *        bpf_map_delete_elem(&m, k)            -> m.delete(k)
 *        bpf_ringbuf_reserve(&m, size, 0)      -> m.ringbuf_reserve(size)
 *    Settings are -D flags (HT_SET_<name>), kernel structs are not read (BCC would compile
 *    against this machine's headers, maybe another kernel's): what CO-RE reads from
 *    task_struct comes from tracefs-format tracepoints and registers instead.
 * Map declarations: HT_ARRAY / HT_PERCPU_ARRAY (u32 keys), HT_HASH, HT_RINGBUF (pages);
 * HT_LICENSE once per program, HT_UPROBE / HT_URETPROBE before a uprobe's / uretprobe's
 * function.
 */
#ifndef HT_DIALECT_BPF_H
#define HT_DIALECT_BPF_H

#ifdef HT_BCC
/* ------------------------------------------------------------------ BCC */
#define HT_ARRAY(name, vtype, n) BPF_ARRAY(name, vtype, n)
#define HT_PERCPU_ARRAY(name, vtype, n) BPF_PERCPU_ARRAY(name, vtype, n)
#define HT_HASH(name, ktype, vtype, n) BPF_HASH(name, ktype, vtype, n)
#define HT_RINGBUF(name, pages) BPF_RINGBUF_OUTPUT(name, pages)
#define HT_SETTING(type, name) /* -DHT_SET_name=value */
#define HT_SET(name) (HT_SET_##name)
#define HT_LICENSE
#define HT_UPROBE          /* BCC attaches any function by name */
#define HT_URETPROBE
#define BPF_ANY 0
#define BPF_NOEXIST 1
#define ht_regs_t struct ht_regs        /* declared in ht_regs.bpf.h: the ABI's layout */
#define HT_HAVE_TASK_PT_REGS 1           /* BCC compiles on the running kernel: checked then */
#define HT_SUBPROG __always_inline       /* BCC: one function per program */

#else
/* ------------------------------------------------------------------ libbpf, CO-RE */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define HT_ARRAY(name, vtype, n)                                                              \
    struct {                                                                                  \
        __uint(type, BPF_MAP_TYPE_ARRAY);                                                     \
        __uint(max_entries, n);                                                               \
        __type(key, u32);                                                                     \
        __type(value, vtype);                                                                 \
    } name SEC(".maps")
#define HT_PERCPU_ARRAY(name, vtype, n)                                                       \
    struct {                                                                                  \
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                                              \
        __uint(max_entries, n);                                                               \
        __type(key, u32);                                                                     \
        __type(value, vtype);                                                                 \
    } name SEC(".maps")
#define HT_HASH(name, ktype, vtype, n)                                                        \
    struct {                                                                                  \
        __uint(type, BPF_MAP_TYPE_HASH);                                                      \
        __uint(max_entries, n);                                                               \
        __type(key, ktype);                                                                   \
        __type(value, vtype);                                                                 \
    } name SEC(".maps")
#define HT_RINGBUF(name, pages)                                                               \
    struct {                                                                                  \
        __uint(type, BPF_MAP_TYPE_RINGBUF);                                                   \
        __uint(max_entries, (pages) * 4096);                                                  \
    } name SEC(".maps")
/* A value the loader writes into .rodata before load (bpf_map__initial_value): the verifier
 * then knows it, as it knows a BCC -D constant. */
#define HT_SETTING(type, name) const volatile type ht_set_##name = 0
#define HT_SET(name) (ht_set_##name)
#define HT_LICENSE char LICENSE[] SEC("license") = "GPL"
#define HT_UPROBE SEC("uprobe")   /* attached by the loader to a file offset */
#define HT_URETPROBE SEC("uretprobe")
#define ht_regs_t struct pt_regs        /* a macro, not a typedef: CO-RE relocates the struct */
/* A function called, not inlined (a BPF-to-BPF call, verified in its caller's context): for
 * a slow path whose register spills would otherwise land on the fast path beside it. */
#define HT_SUBPROG __noinline
/* Feature probes, resolved by libbpf against the running kernel's BTF at load: a branch on a
 * helper the kernel lacks is dead code, removed before the verifier would reject it. */
#define HT_HAVE_TASK_PT_REGS bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs)
#define HT_HAVE_PERCPU_ELEM                                                                   \
    bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_map_lookup_percpu_elem)
/* per-CPU map "m"'s value under "key" on CPU "cpu" (HT_HAVE_PERCPU_ELEM); BCC has no such call */
#define HT_LOOKUP_ON_CPU(m, key, cpu) bpf_map_lookup_percpu_elem(&(m), key, cpu)
#endif

#endif /* HT_DIALECT_BPF_H */
