#include "feed.h"
#include "rows.h"

/* ------------------------------------------------------------------ feed_rows */
/* feed_rows(block, start, ctx, cur) -> next
 *
 * feed_calls (feed.c) over a RowBlock (tracefile/csrc/rows.c): its calls read in place are
 * fed from their values, without their events, the others as feed_calls feeds them; it stops
 * at the first row of another class (next: its index). While one thread's calls follow one
 * another, what _syscall (calls.py) counts of them is kept here (a Run) and written into the
 * thread's ThreadStats when another thread's row comes, before Python is called (specific,
 * or the caller at next), and at the end; its last call's event is made then (row_event), the
 * only one made but for a call Python is given. Strings (name, errno, fd kind, request name)
 * come from a cache of str (bounded), one object per text. ctx and cur: feed_calls's. */

/* ------------------------------------------------------------------ str cache */
#define CACHE_SLOTS 8192                /* a power of two; at most half of it used */
static struct {
    PyObject *s;
    uint32_t h;
} cache[CACHE_SLOTS];
static int cached;

/* the str of the ASCII text s[a:b] (new reference) */
static PyObject *text(const char *s, Span sp)
{
    const char *p = s + sp.a;
    Py_ssize_t n = sp.b - sp.a;
    uint32_t h = 2166136261u;
    for (Py_ssize_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    for (uint32_t k = h;; k++) {
        PyObject *o = cache[k & (CACHE_SLOTS - 1)].s;
        if (!o)
            break;
        Py_ssize_t m;
        const char *d;
        if (cache[k & (CACHE_SLOTS - 1)].h == h && (d = ascii_data(o, &m)) && m == n
                && memcmp(d, p, (size_t)n) == 0) {
            Py_INCREF(o);
            return o;
        }
    }
    PyObject *o = ascii_str(p, 0, n);
    if (o && cached < CACHE_SLOTS / 2) {
        uint32_t k = h;
        while (cache[k & (CACHE_SLOTS - 1)].s)
            k++;
        cache[k & (CACHE_SLOTS - 1)].s = o;
        cache[k & (CACHE_SLOTS - 1)].h = h;
        cached++;
        Py_INCREF(o);
    }
    return o;
}

/* a span's str, or None (null) */
static PyObject *opt_text(const char *s, Span sp)
{
    if (sp.a < 0) {
        Py_INCREF(Py_None);
        return Py_None;
    }
    return text(s, sp);
}

/* ------------------------------------------------------------------ Run */
/* what _syscall counts of one thread's consecutive calls, kept here between writes */
typedef struct {
    PyObject *t;                        /* the thread's ThreadStats (borrowed from cur) */
    int loaded;
    long long ncalls, tail_run, tail_ret;
    int tail_ret_null;
    PyObject *tail_name;                /* strong */
    double tail_since, last_ts, first_ts, time;
    int calls, tail_set, last_set, first_none, first_set, time_set, durs_cleared;
    Py_ssize_t last_row;                /* its last call's row, -1: none */
} Run;

static int as_ll(PyObject *o, long long *v)
{
    int overflow = 0;
    if (!PyLong_CheckExact(o))
        return -1;
    *v = PyLong_AsLongLongAndOverflow(o, &overflow);
    return overflow || (*v == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int load(Ctx *c, Run *r, PyObject *t)
{
    PyObject *ncalls = field(t, c->m[M_NCALLS]), *run = field(t, c->m[M_TAIL_RUN]),
             *ret = field(t, c->m[M_TAIL_RET]), *name = field(t, c->m[M_TAIL_NAME]),
             *first = field(t, c->m[M_FIRST_TS]), *time = field(t, c->m[M_SYSCALL_TIME]);
    if (!ncalls || !run || !ret || !name || !first || !time)
        return -1;
    memset(r, 0, sizeof(*r));
    r->t = t;
    r->last_row = -1;
    r->tail_ret_null = ret == Py_None;
    if (as_ll(ncalls, &r->ncalls) < 0 || as_ll(run, &r->tail_run) < 0
            || (!r->tail_ret_null && as_ll(ret, &r->tail_ret) < 0) || !PyFloat_CheckExact(time)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "feed_rows: a thread's counts of another type");
        return -1;
    }
    r->time = PyFloat_AS_DOUBLE(time);
    r->first_none = first == Py_None;
    r->tail_name = name;
    Py_INCREF(name);
    r->loaded = 1;
    return 0;
}

static int put_float(PyObject *t, Py_ssize_t off, double v)
{
    return put_field(t, off, PyFloat_FromDouble(v));
}

/* the Run written into its ThreadStats (and its last call's event made); unloaded */
static int flush(Ctx *c, Run *r, RowBlock *pb)
{
    if (!r->loaded)
        return 0;
    PyObject *t = r->t;
    int rc = 0;
    r->loaded = 0;
    if (r->first_set)
        rc |= put_float(t, c->m[M_FIRST_TS], r->first_ts);
    if (r->last_set)
        rc |= put_float(t, c->m[M_LAST_TS], r->last_ts);
    if (r->calls) {
        rc |= put_field(t, c->m[M_NCALLS], PyLong_FromLongLong(r->ncalls));
        rc |= put_field(t, c->m[M_TAIL_RUN], PyLong_FromLongLong(r->tail_run));
    }
    if (r->tail_set) {
        set_field(t, c->m[M_TAIL_NAME], r->tail_name);
        if (r->tail_ret_null)
            set_field(t, c->m[M_TAIL_RET], Py_None);
        else
            rc |= put_field(t, c->m[M_TAIL_RET], PyLong_FromLongLong(r->tail_ret));
        rc |= put_float(t, c->m[M_TAIL_SINCE], r->tail_since);
    }
    if (r->time_set)
        rc |= put_float(t, c->m[M_SYSCALL_TIME], r->time);
    if (r->durs_cleared)
        set_field(t, c->m[M_DURS_KNOWN], Py_False);
    if (r->last_row >= 0)
        rc |= put_field(t, c->m[M_LAST_CALL], row_event(pb, r->last_row));
    Py_CLEAR(r->tail_name);
    return rc ? -1 : 0;
}

/* ------------------------------------------------------------------ one row */
/* what _specific does of a read row i (calls.py _read): 1 done here, 0 for Python */
static int read_row(Ctx *c, Run *r, Row *row, const char *s)
{
    if (row->ret_null)
        return 1;
    if (row->name.b - row->name.a >= 6 && memcmp(s + row->name.a, "accept", 6) == 0)
        return row->ret < 0;                            /* an accept: _read counts it */
    if (row->ret <= 0)
        return 1;
    PyObject *kind = opt_text(s, row->fd_kind);
    if (!kind)
        return -1;
    int asked = PySet_Contains(c->read_kinds, kind);
    int file = asked == 0 && kind != Py_None && PyUnicode_Compare(kind, S_FILE_KIND) == 0;
    Py_DECREF(kind);
    if (asked)
        return asked < 0 ? -1 : 0;
    PyObject *t = r->t, *bytes = field(t, c->m[M_INPUT_BYTES]), *ret;
    if (!bytes || !(ret = PyLong_FromLongLong(row->ret)))
        return -1;
    int rc = put_field(t, c->m[M_INPUT_BYTES], PyNumber_Add(bytes, ret));
    Py_DECREF(ret);
    rc |= put_field(t, c->m[M_INPUT_AT], PyLong_FromLongLong(r->ncalls));
    rc |= put_float(t, c->m[M_INPUT_TS], row->ts);
    if (file) {
        PyObject *reads = field(t, c->m[M_FILE_READS]);
        rc |= reads ? put_field(t, c->m[M_FILE_READS], plus_one(reads)) : -1;
    }
    return rc ? -1 : 1;
}

/* an ioctl row's count: t.ioctls[(fd_kind or "?", request, request_name or "")] += 1 */
static int ioctl_row(Ctx *c, Run *r, Row *row, const char *s)
{
    PyObject *ioctls = field(r->t, c->m[M_IOCTLS]);
    int kind_given = row->fd_kind.a >= 0 && row->fd_kind.b > row->fd_kind.a;
    int name_given = row->request_name.a >= 0 && row->request_name.b > row->request_name.a;
    PyObject *kind = kind_given ? text(s, row->fd_kind) : (Py_INCREF(S_UNKNOWN_KIND), S_UNKNOWN_KIND);
    PyObject *name = name_given ? text(s, row->request_name) : (Py_INCREF(S_EMPTY), S_EMPTY);
    PyObject *req = PyLong_FromLongLong(row->request);
    PyObject *key = kind && name && req ? PyTuple_Pack(3, kind, req, name) : NULL;
    int rc = key && ioctls ? count(ioctls, key) : -1;
    Py_XDECREF(kind), Py_XDECREF(name), Py_XDECREF(req), Py_XDECREF(key);
    return rc;
}

/* a plain call's row (name in PLAIN_NAMES): 1 done here (a close or dup of an fd no thread
 * follows), 0 for Python */
static int plain_row(Ctx *c, Row *row, PyObject *name, PyObject *pid)
{
    int ends = PySet_Contains(c->ends_fd, name);
    if (ends <= 0)
        return ends;
    int close = PyUnicode_Compare(name, S_CLOSE) == 0;
    long long fd = close ? row->fd : row->ret;
    if (close ? row->fd_null : row->ret_null)
        return fd_unfollowed(c, pid, Py_None);
    PyObject *fdo = PyLong_FromLongLong(fd);
    if (!fdo)
        return -1;
    int rc = fd_unfollowed(c, pid, fdo);
    Py_DECREF(fdo);
    return rc;
}

/* _syscall's part of call row i of r's thread, what C does of _specific's (calls.py);
 * *python set when Python's _specific is to take it (Run written, last call made) */
static int feed_row(Ctx *c, Run *r, RowBlock *pb, Py_ssize_t i, PyObject *pid, int *python)
{
    Row *row = &pb->rows[i];
    const char *s = PyBytes_AS_STRING(pb->data);
    PyObject *t = r->t;
    if (r->first_none && !r->first_set) {
        r->first_set = 1;
        r->first_ts = row->ts;
    }
    r->last_set = 1;
    r->last_ts = row->ts;
    if (row->ongoing)
        return put_field(t, c->m[M_ONGOING], row_event(pb, i));
    r->last_row = i;
    r->calls = 1;
    r->ncalls++;
    PyObject *name = text(s, row->name), *syscalls = field(t, c->m[M_SYSCALLS]);
    if (!name || !syscalls || count(syscalls, name) < 0)
        goto error;
    if (row->err.a >= 0) {
        PyObject *err = text(s, row->err);
        int rc = err ? count_failure(c, t, name, err) : -1;
        Py_XDECREF(err);
        if (rc < 0)
            goto error;
    }
    int same = name == r->tail_name;
    if (!same && (same = PyObject_RichCompareBool(name, r->tail_name, Py_EQ)) < 0)
        goto error;
    if (same && (row->ret_null ? !r->tail_ret_null : r->tail_ret_null || row->ret != r->tail_ret))
        same = 0;
    if (same) {
        r->tail_run++;
    } else {
        Py_INCREF(name);
        Py_SETREF(r->tail_name, name);
        r->tail_ret_null = row->ret_null;
        r->tail_ret = row->ret;
        r->tail_run = 1;
        r->tail_since = row->ts;
        r->tail_set = 1;
    }
    if (row->dur_null) {
        r->durs_cleared = 1;
    } else {
        r->time += row->dur;
        r->time_set = 1;
    }
    int done = 1;
    if (row->kind == ROW_SC) {
        done = PySet_Contains(c->plain, name);
        if (done > 0)
            done = plain_row(c, row, name, pid);
        else if (done == 0)
            done = 1;
    } else if (row->kind == ROW_IO) {
        done = ioctl_row(c, r, row, s) < 0 ? -1 : 1;
    } else if (row->kind == ROW_RD) {
        done = read_row(c, r, row, s);
    }
    Py_DECREF(name);
    if (done < 0)
        return -1;
    *python = !done;
    return 0;
error:
    Py_XDECREF(name);
    return -1;
}

/* Python's _specific(t, e) for row i of r's thread: the Run written first (e its last call) */
static int specific_row(Ctx *c, Run *r, RowBlock *pb, Py_ssize_t i)
{
    PyObject *t = r->t, *e = row_event(pb, i);
    if (!e)
        return -1;
    set_field(t, c->m[M_LAST_CALL], e);
    r->last_row = -1;
    PyObject *args[2] = {t, e};
    PyObject *res = flush(c, r, pb) < 0 ? NULL : PyObject_Vectorcall(c->specific, args, 2, NULL);
    Py_DECREF(e);
    Py_XDECREF(res);
    return res ? 0 : -1;
}

/* ------------------------------------------------------------------ the loop */
typedef struct {
    PyObject *last, *start, *pid, *tid, *t;   /* cur's, strong */
    long long lpid, ltid;                     /* pid and tid as ints (t not None) */
    double last_d, start_d;                   /* last and start, as times() moves them */
    int has_last, moved, start_moved;
} Cur;

/* the times of a row with time ts: cur's last (and start) moved to it when it is later
 * (kept as doubles, made objects at the end: cur_times) */
static void times(Cur *k, double ts)
{
    if (ts == 0.0 || (k->has_last && !(k->last_d < ts)))
        return;
    k->last_d = ts;
    k->has_last = k->moved = 1;
    if (k->start == Py_None && !k->start_moved) {
        k->start_d = ts;
        k->start_moved = 1;
    }
}

/* cur's last and start as objects again (those that moved) */
static int cur_times(Cur *k)
{
    if (k->moved) {
        PyObject *v = PyFloat_FromDouble(k->last_d);
        if (!v)
            return -1;
        Py_SETREF(k->last, v);
        k->moved = 0;
    }
    if (k->start_moved) {
        PyObject *v = PyFloat_FromDouble(k->start_d);
        if (!v)
            return -1;
        Py_SETREF(k->start, v);
        k->start_moved = 0;
    }
    return 0;
}

/* cur's thread made (pid, tid)'s: looked up (or made) when it is another's */
static int switch_to(Ctx *c, Cur *k, Run *r, RowBlock *pb, long long pid, long long tid)
{
    if (k->t != Py_None && k->lpid == pid && k->ltid == tid)
        return 0;
    if (flush(c, r, pb) < 0)
        return -1;
    PyObject *p = PyLong_FromLongLong(pid), *q = p ? PyLong_FromLongLong(tid) : NULL;
    PyObject *t = q ? thread_of(c, p, q) : NULL;
    if (!t) {
        Py_XDECREF(p), Py_XDECREF(q);
        return -1;
    }
    Py_SETREF(k->pid, p);
    Py_SETREF(k->tid, q);
    Py_SETREF(k->t, t);
    k->lpid = pid;
    k->ltid = tid;
    return 0;
}

static int cur_ints(Cur *k)
{
    if (k->t == Py_None)
        return 0;
    if (as_ll(k->pid, &k->lpid) < 0 || as_ll(k->tid, &k->ltid) < 0) {
        PyErr_Clear();
        Py_INCREF(Py_None);
        Py_SETREF(k->t, Py_None);       /* looked up again */
    }
    return 0;
}

/* an event row (feed_calls's loop body): 1 fed, 0 not a call (Python's), -1 error */
static int event_row(Ctx *c, Cur *k, RowBlock *pb, Py_ssize_t i)
{
    PyObject *e = PyList_GET_ITEM(pb->events, pb->rows[i].index);
    int cls = call_class(c, e);
    if (cls == C_COUNT)
        return 0;
    PyObject *ts = field(e, c->e[E_TS]), *pid = field(e, c->e[E_PID]),
             *tid = field(e, c->e[E_TID]);
    if (!ts || !pid || !tid || cur_times(k) < 0)
        return -1;
    int truth = PyObject_IsTrue(ts), later = 1;
    if (truth > 0 && k->last != Py_None)
        later = less(k->last, ts);
    if (truth < 0 || later < 0)
        return -1;
    if (truth && later) {
        Py_INCREF(ts);
        Py_SETREF(k->last, ts);
        if (k->start == Py_None) {
            Py_INCREF(ts);
            Py_SETREF(k->start, ts);
        }
        if ((k->last_d = PyFloat_AsDouble(ts)) == -1.0 && PyErr_Occurred())
            return -1;
        k->has_last = 1;
    }
    long long lp, lt;
    if (as_ll(pid, &lp) < 0 || as_ll(tid, &lt) < 0) {
        PyErr_Clear();
        PyObject *t = thread_of(c, pid, tid);       /* not cached: Ints of 64 bits are */
        int rc = t ? feed_call(c, t, e, cls) : -1;
        Py_XDECREF(t);
        return rc < 0 ? -1 : 1;
    }
    Run none = {0};
    if (switch_to(c, k, &none, pb, lp, lt) < 0)
        return -1;
    return feed_call(c, k->t, e, cls) < 0 ? -1 : 1;
}

PyObject *feed_rows(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    Ctx c;
    if (argc != 4 || !Py_IS_TYPE(argv[0], RowBlock_Type) || !PyList_Check(argv[3])
            || PyList_GET_SIZE(argv[3]) != 5 || read_ctx(argv[2], &c) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "feed_rows(block, start, ctx, cur)");
        return NULL;
    }
    if (feed_strings() < 0)
        return NULL;
    RowBlock *pb = (RowBlock *)argv[0];
    PyObject *list = argv[3];
    Py_ssize_t i = PyLong_AsSsize_t(argv[1]);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    Cur k;
    PyObject **slots[5] = {&k.last, &k.start, &k.pid, &k.tid, &k.t};
    for (int j = 0; j < 5; j++) {
        *slots[j] = PyList_GET_ITEM(list, j);
        Py_INCREF(*slots[j]);
    }
    if (k.t != Py_None && Py_TYPE(k.t) != c.stats) {
        Py_INCREF(Py_None);
        Py_SETREF(k.t, Py_None);
    }
    cur_ints(&k);
    k.moved = k.start_moved = 0;
    k.has_last = k.last != Py_None;
    if (k.has_last && (k.last_d = PyFloat_AsDouble(k.last)) == -1.0 && PyErr_Occurred()) {
        for (int j = 0; j < 5; j++)
            Py_DECREF(*slots[j]);
        return NULL;
    }
    Run r = {0};
    int failed = 0;
    for (; i < pb->n; i++) {
        Row *row = &pb->rows[i];
        if (row->kind == ROW_EVENT) {
            int fed = flush(&c, &r, pb) < 0 ? -1 : event_row(&c, &k, pb, i);
            if (fed <= 0) {
                failed = fed < 0;
                break;
            }
            continue;
        }
        int python = 0;
        times(&k, row->ts);
        if (switch_to(&c, &k, &r, pb, row->pid, row->tid) < 0
                || (!r.loaded && load(&c, &r, k.t) < 0)
                || feed_row(&c, &r, pb, i, k.pid, &python) < 0
                || (python && specific_row(&c, &r, pb, i) < 0)) {
            failed = 1;
            break;
        }
    }
    if (flush(&c, &r, pb) < 0 || cur_times(&k) < 0)
        failed = 1;
    Py_XDECREF(r.tail_name);
    for (int j = 0; j < 5; j++)
        PyList_SetItem(list, j, *slots[j]);    /* the references go to cur */
    return failed ? NULL : PyLong_FromSsize_t(i);
}
