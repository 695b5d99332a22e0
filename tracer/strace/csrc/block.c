#include "calls.h"

/* ------------------------------------------------------------------ convert_block */
/* convert_block(block, start, ctx, out) -> (next, lines, last_ts, has_dur, entered, tail,
 *                                           events)
 *
 * convert_calls (calls.c) over the lines of a bytes (or bytearray) block (whole lines, split
 * at "\n" as LogFile.line_batches splits them) from the byte offset start, writing trace rows
 * (ctx's encode_row is required); next is the byte offset of the line it stopped at (Python's),
 * or len(block). The lines convert_calls takes, and only those, are taken, with the same rows:
 * a line holding a byte above 0x7f is Python's (split_line gives the Python parse a non-ASCII
 * str); each other line is read by parse_fields (lines.c) into byte ranges, and the commonest
 * one, a complete call made a plain Syscall or decode.py's read/write or ioctl event, has its
 * row written from them (rowtext.c's row_* functions) with no Python object made but the
 * memo keys it looks up; any other line, or a value whose text rowtext.c cannot be sure of,
 * goes through split_line's tuple (line_tuple) to conv_take, as convert_calls does. */

#define PID_SLOTS 64                    /* tid -> pid, for one run */
#define NAME_SLOTS 512                  /* syscall names seen, as str (kept for the process) */
#define NAME_MAX_LEN 40
#define NAME_PROBES 8

/* a name's flags in one run (the sets of its ctx) */
enum { F_KNOWN = 1, F_SPECIAL = 2, F_BUILDER = 4, F_WRITE = 8, F_READ = 16, F_IOCTL = 32,
       F_FD_FIRST = 64, F_DIR = 128, F_ADDED = 256 };

static PyObject *NAMES[NAME_SLOTS];     /* interned str, by the hash of their bytes */

typedef struct {
    long long tid;
    PyObject *pid;                      /* a reference; NULL: empty */
    long long pid_value;
    int pid_fits;
} PidSlot;

typedef struct {
    Conv c;
    PidSlot pids[PID_SLOTS];
    unsigned short flags[NAME_SLOTS];
} Block;

/* the slot of the name s[0:n] in NAMES, made when new; -2 when it cannot be kept */
static int name_slot(const char *s, Py_ssize_t n)
{
    if (n < 1 || n > NAME_MAX_LEN)
        return -2;
    uint32_t h = 2166136261u;           /* FNV-1a */
    for (Py_ssize_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    for (int k = 0; k < NAME_PROBES; k++) {
        int slot = (int)((h + (uint32_t)k) & (NAME_SLOTS - 1));
        PyObject *o = NAMES[slot];
        if (o == NULL) {
            PyObject *str = ascii_str(s, 0, n);
            if (!str)
                return -1;
            PyUnicode_InternInPlace(&str);
            if (NAMES[slot] == NULL) {  /* (still empty: nothing ran in between) */
                NAMES[slot] = str;
                return slot;
            }
            Py_DECREF(str);
            return -2;
        }
        Py_ssize_t m;
        const char *d = ascii_data(o, &m);
        if (d && m == n && memcmp(d, s, (size_t)n) == 0)
            return slot;
    }
    return -2;
}

/* the name's flags in this run (computed at its first line) */
static int name_flags(Block *b, int slot)
{
    unsigned short f = b->flags[slot];
    if (f & F_KNOWN)
        return f;
    Conv *c = &b->c;
    PyObject *name = NAMES[slot];
    int sp = PySet_Contains(c->special, name);
    PyObject *builder = sp < 0 ? NULL : PyDict_GetItemWithError(c->builders, name);
    if (sp < 0 || (!builder && PyErr_Occurred()))
        return -1;
    int w = PySet_Contains(c->write_calls, name), r = PySet_Contains(c->read_calls, name);
    int ff = PySet_Contains(c->fd_first, name), dir = PySet_Contains(c->dir_calls, name);
    if (w < 0 || r < 0 || ff < 0 || dir < 0)
        return -1;
    f = F_KNOWN | (sp ? F_SPECIAL : 0) | (ff ? F_FD_FIRST : 0) | (dir ? F_DIR : 0);
    if (builder) {                      /* as conv_take: write, else read, else ioctl */
        f |= F_BUILDER;
        f |= w ? F_WRITE : r ? F_READ
             : PyUnicode_CompareWithASCIIString(name, "ioctl") == 0 ? F_IOCTL : 0;
    }
    b->flags[slot] = f;
    return f;
}

/* the pid of tid (a borrowed reference held by the run's cache): 1 found, 0 not known, -1 */
static int pid_of(Block *b, long long tid, PidSlot **out)
{
    PidSlot *p = &b->pids[(unsigned long long)tid & (PID_SLOTS - 1)];
    if (p->pid == NULL || p->tid != tid) {
        PyObject *key = PyLong_FromLongLong(tid);
        if (!key)
            return -1;
        PyObject *pid = PyDict_GetItemWithError(b->c.tid_pid, key);
        Py_DECREF(key);
        if (!pid)
            return PyErr_Occurred() ? -1 : 0;
        Py_INCREF(pid);
        Py_XSETREF(p->pid, pid);
        p->tid = tid;
        int overflow = 0;
        p->pid_value = PyLong_CheckExact(pid) ? PyLong_AsLongLongAndOverflow(pid, &overflow) : 0;
        p->pid_fits = PyLong_CheckExact(pid) && !overflow && !PyErr_Occurred();
        PyErr_Clear();
    }
    *out = p;
    return 1;
}

/* cache[text] for the ASCII text s[0:n] (a borrowed reference), or NULL: a miss (no
 * exception) or an error */
static PyObject *memo_hit(PyObject *cache, const char *s, Py_ssize_t n)
{
    PyObject *key = ascii_str(s, 0, n);
    if (!key)
        return NULL;
    PyObject *hit = PyDict_GetItemWithError(cache, key);
    Py_DECREF(key);
    return hit;
}

/* An fd's (fd, kind, target) from the fd memo, as the converter may take it here: 1, 0
 * Python's line (not cached yet: Python parses it; the converter's first -y decoration or an
 * undecorated fd, which its tables resolve), -1 error */
static int fd_fields(Block *b, const char *s, Py_ssize_t n, PyObject **fd, PyObject **kind,
                     PyObject **target)
{
    PyObject *hit = memo_hit(b->c.fd_cache, s, n);
    if (!hit || !PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) != 3)
        return PyErr_Occurred() ? -1 : 0;
    *fd = PyTuple_GET_ITEM(hit, 0);
    *kind = PyTuple_GET_ITEM(hit, 1);
    *target = PyTuple_GET_ITEM(hit, 2);
    int has_fd = b->c.has_fd;
    return (*kind != Py_None ? has_fd : (*fd == Py_None || has_fd)) ? 1 : 0;
}

/* an ioctl's (request, request name) from the memos (calls.c native_call's): 1, 0, -1 */
static int ioctl_fields(Block *b, const char *a, Py_ssize_t an, Py_ssize_t flen,
                        PyObject *kind, PyObject **req, PyObject **req_name)
{
    Py_ssize_t rs = flen + 2 < an ? flen + 2 : an;
    Py_ssize_t re_ = ioctl_request_end(a, rs, an);
    PyObject *dec = memo_hit(b->c.ioctl_cache, a + rs, re_ - rs);
    if (!dec || !PyTuple_Check(dec) || PyTuple_GET_SIZE(dec) != 2)
        return PyErr_Occurred() ? -1 : 0;
    *req = PyTuple_GET_ITEM(dec, 0);
    *req_name = PyTuple_GET_ITEM(dec, 1);
    if (PyUnicode_Check(kind) && (PyUnicode_CompareWithASCIIString(kind, "nvidiactl") == 0
                                  || PyUnicode_CompareWithASCIIString(kind, "nvidia") == 0
                                  || PyUnicode_CompareWithASCIIString(kind, "nvidia-uvm") == 0)) {
        PyObject *key = PyTuple_Pack(3, kind, *req, *req_name);
        if (!key)
            return -1;
        PyObject *nv = PyDict_GetItemWithError(b->c.nv_cache, key);
        Py_DECREF(key);
        if (!nv)
            return PyErr_Occurred() ? -1 : 0;
        *req_name = nv;
    }
    return 1;
}

/* what follows a call's common fields in its row */
typedef struct {
    int kind;                           /* 0 none (sc), 1 nbytes (wr, rd), 2 request (io) */
    long long nbytes;
    PyObject *req, *req_name;
} Tail;

/* the row of a complete call from its fields: 1 written, 0 a value not certain here, -1 */
static int call_row(Text *t, const char *tag, const char *s, const Line *L, const PidSlot *p,
                    PyObject *fd, PyObject *kind, PyObject *target, const Tail *tail)
{
    Py_ssize_t es = L->errno_err ? L->xs : L->es, ee = L->errno_err ? L->xe : L->ee;
    int rc;
    if ((rc = row_start(t, tag)) <= 0 || (rc = row_decimal(t, s, L->ts_a, L->ts_b, L->ts)) <= 0
            || (rc = row_ll(t, p->pid_value)) <= 0 || (rc = row_ll(t, L->tid)) <= 0
            || (rc = row_ascii(t, s + L->na, L->nb - L->na)) <= 0
            || (rc = row_scrubbed(t, s + L->as, L->ae - L->as)) <= 0
            || (rc = L->has_ret ? row_ll(t, L->ret) : row_null(t)) <= 0
            || (rc = es >= 0 ? row_ascii(t, s + es, ee - es) : row_null(t)) <= 0
            || (rc = L->has_dur ? row_decimal(t, s, L->dur_a, L->dur_b, L->dur)
                                : row_null(t)) <= 0
            || (rc = row_value(t, fd, 'I')) <= 0 || (rc = row_value(t, kind, 'S')) <= 0
            || (rc = row_value(t, target, 'S')) <= 0 || (rc = row_value(t, Py_False, 'b')) <= 0)
        return rc;
    if (tail->kind == 1 && (rc = row_ll(t, tail->nbytes)) <= 0)
        return rc;
    if (tail->kind == 2 && ((rc = row_value(t, tail->req, 'i')) <= 0
                            || (rc = row_value(t, tail->req_name, 'S')) <= 0))
        return rc;
    return row_end(t);
}

/* a complete call whose row can be written from the line's bytes (module comment): 1 taken,
 * 0 Python's line, 2 conv_take's (through split_line's tuple), -1 error */
static int plain_call(Block *b, const char *s, const Line *L)
{
    Conv *c = &b->c;
    if (L->kind != K_CALL)
        return 2;
    if (!L->has_tid || !L->has_ts || L->tod)
        return 0;
    Py_ssize_t es = L->errno_err ? L->xs : L->es, ee = L->errno_err ? L->xe : L->ee;
    if (es >= 0 && ee - es >= 8 && memcmp(s + es, "ERESTART", 8) == 0)
        return 0;                       /* interrupted: the converter holds it */
    int slot = name_slot(s + L->na, L->nb - L->na);
    if (slot < 0)
        return slot == -1 ? -1 : 2;
    int f = name_flags(b, slot);
    if (f < 0)
        return -1;
    if (f & F_SPECIAL)
        return 0;
    PidSlot *p;
    int found = pid_of(b, L->tid, &p);
    if (found <= 0)
        return found;
    if (!p->pid_fits || (L->has_ret && !L->ret_fits)
            || ((f & F_BUILDER) && !(f & (F_WRITE | F_READ | F_IOCTL))))
        return 2;                       /* a Python builder's, or a number to make an int */
    const char *a = s + L->as;
    Py_ssize_t an = L->ae - L->as, flen = 0;
    PyObject *fd = Py_None, *kind = Py_None, *target = Py_None;
    Tail tail = {0, 0, NULL, NULL};
    const char *tag = "sc";
    int rc;
    if (f & (F_WRITE | F_READ | F_IOCTL)) {     /* calls.c native_call */
        flen = first_arg_len(a, an);
        if ((rc = fd_fields(b, a, flen, &fd, &kind, &target)) <= 0)
            return rc;
        if (f & F_IOCTL) {
            if ((rc = ioctl_fields(b, a, an, flen, kind, &tail.req, &tail.req_name)) <= 0)
                return rc;
            tail.kind = 2;
            tag = "io";
        } else {                        /* accept/accept4: the result is a new fd */
            tail.kind = 1;
            tail.nbytes = s[L->na] != 'a' && L->has_ret && L->ret > 0 ? L->ret : 0;
            tag = f & F_WRITE ? "wr" : "rd";
        }
    } else if (an > 0 && a[0] >= '0' && a[0] <= '9') {
        flen = first_arg_len(a, an);
        if (memchr(a, '<', (size_t)flen) || (f & F_FD_FIRST)) {
            if ((rc = fd_fields(b, a, flen, &fd, &kind, &target)) <= 0)
                return rc;
            if ((f & F_DIR) && kind != Py_None && PyUnicode_Check(kind)) {
                int file = PyUnicode_Compare(kind, S_FILE);
                if (file == -1 && PyErr_Occurred())
                    return -1;
                if (file == 0)
                    kind = S_DIR;
            }
        }
    }
    Text *t = c->em.text;
    Py_ssize_t at = t->len;
    Py_INCREF(fd);                      /* (held while the row is written) */
    Py_INCREF(kind);
    Py_INCREF(target);
    Py_XINCREF(tail.req);
    Py_XINCREF(tail.req_name);
    rc = call_row(t, tag, s, L, p, fd, kind, target, &tail);
    Py_DECREF(fd);
    Py_DECREF(kind);
    Py_DECREF(target);
    Py_XDECREF(tail.req);
    Py_XDECREF(tail.req_name);
    if (rc <= 0) {
        t->len = at;                    /* the row's start again */
        return rc < 0 ? -1 : 2;
    }
    if (!(f & F_ADDED)) {
        if (PySet_Add(c->names, NAMES[slot]) < 0)
            return -1;
        b->flags[slot] |= F_ADDED;
    }
    conv_counted(c, L->ts, L->has_dur);
    return 1;
}

/* the end of the line at s[i] (its '\n', or n); *high: a byte above 0x7f comes before it
 * (both found in one pass: 16 bytes at a time with SSE2) */
static Py_ssize_t line_end(const char *s, Py_ssize_t i, Py_ssize_t n, int *high)
{
    unsigned h = 0;
#ifdef __SSE2__
    const __m128i nl = _mm_set1_epi8('\n');
    while (n - i >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, nl));
        unsigned top = (unsigned)_mm_movemask_epi8(v);
        if (m) {
            int k = __builtin_ctz(m);
            *high = (h | (top & ((1u << k) - 1))) != 0;
            return i + k;
        }
        h |= top;
        i += 16;
    }
#endif
    for (; i < n && s[i] != '\n'; i++)
        h |= (unsigned char)s[i] & 0x80;
    *high = h != 0;
    return i;
}

static void block_free(Block *b)
{
    for (int k = 0; k < PID_SLOTS; k++)
        Py_CLEAR(b->pids[k].pid);
}

PyObject *convert_block(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    static const char usage[] = "convert_block(block, start, ctx, out)";
    if (argc != 4 || !hx_is_bytes_like(argv[0])) {
        PyErr_SetString(PyExc_TypeError, usage);
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(argv[1]);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    Block *b = PyMem_Calloc(1, sizeof(Block));
    if (!b)
        return PyErr_NoMemory();
    if (conv_start(&b->c, argv[2], argv[3], usage) < 0 || !b->c.em.rows) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "convert_block writes rows: ctx[13] is encode_row");
        goto error;
    }
    /* held while Python code may run (builders, encode_row): a bytearray cannot be resized */
    HxBytes view;
    if (hx_bytes_get(argv[0], &view) < 0)
        goto error;
    const char *s = view.buf;
    Py_ssize_t n = view.len;
    if (i < 0 || i > n)
        i = n;
    while (i < n) {
        int high;
        Py_ssize_t e = line_end(s, i, n, &high);
        if (high)                       /* not ASCII: split_line gives it to Python */
            break;
        Line L;
        int rc = parse_fields(s + i, e - i, &L);
        if (rc < 0)
            goto error_block;
        if (rc != LINE_OK)
            break;
        rc = plain_call(b, s + i, &L);
        if (rc == 2) {
            PyObject *t = line_tuple(s + i, &L);
            if (!t)
                goto error_block;
            rc = conv_take(&b->c, t);
            Py_DECREF(t);
        }
        if (rc < 0)
            goto error_block;
        if (rc == 0)
            break;
        i = e < n ? e + 1 : n;
    }
    hx_bytes_release(&view);
    block_free(b);
    PyObject *res = conv_end(&b->c, i);
    PyMem_Free(b);
    return res;
error_block:
    hx_bytes_release(&view);
error:
    conv_drop(&b->c);
    block_free(b);
    PyMem_Free(b);
    return NULL;
}
