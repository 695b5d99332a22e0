#include "feed.h"
#ifndef Py_LIMITED_API
#include <structmember.h>       /* T_OBJECT_EX: a slot member */
#endif

/* ------------------------------------------------------------------ feed_calls */
/* feed_calls(events, start, ctx, cur) -> next
 *
 * analysis/accumulate/calls.py CallFeed._syscall for a run of calls, the twin of
 * Accumulator.feed_many's loop over them (accumulator.py): from events[start] on, each event
 * whose class is one of ctx's call classes updates the first and last times (cur[0], cur[1]),
 * its thread's ThreadStats (looked up again only when the thread changes: cur[2:5] are the
 * pid, tid and ThreadStats of the previous call) as _syscall does, an ioctl's count, and
 * calls ctx's specific(t, e) (CallFeed._specific) for what the rest of its class and name
 * add, but for what calls.py's module doc says C does itself. It stops at the first event of
 * another class: next is its index (len(events) at the end).
 * Fields are read and written in place, through the offsets of the classes' slot members
 * (the event classes' and ThreadStats's member descriptors, named in ctx), as the
 * descriptors themselves do. ctx = (threads, new_thread, specific, ThreadStats, its members
 * (M_* order), call classes (C_* order), event members (E_* order), plain names,
 * errnos that are no failure, most failure kinds, the followed fds by pid, the calls that
 * end an fd, the fd kinds whose reads _read tells apart). */

PyObject *S_UNKNOWN_KIND, *S_EMPTY, *S_ACCEPT, *S_CLOSE, *S_FILE_KIND;

int feed_strings(void)
{
    if (!S_UNKNOWN_KIND) {
        S_UNKNOWN_KIND = PyUnicode_InternFromString("?");
        S_EMPTY = PyUnicode_InternFromString("");
        S_ACCEPT = PyUnicode_InternFromString("accept");
        S_CLOSE = PyUnicode_InternFromString("close");
        S_FILE_KIND = PyUnicode_InternFromString("file");
    }
    return S_UNKNOWN_KIND && S_EMPTY && S_ACCEPT && S_CLOSE && S_FILE_KIND ? 0 : -1;
}

#ifdef Py_LIMITED_API
/* The limited API shows no member descriptor's PyMemberDef: its offset is found by setting a
 * new object through the descriptor on a blank instance of its class (the class's tp_alloc:
 * every slot NULL, no __init__ run) and finding that pointer in the instance's memory; the
 * descriptor must set (not READONLY) and, deleted, raise AttributeError on a get (T_OBJECT_EX:
 * NULL is unset). Each descriptor's offset is kept (the classes live as long as the module's
 * callers; the descriptor is held). */
#define KNOWN_MAX 64
static PyObject *known_d[KNOWN_MAX];
static Py_ssize_t known_off[KNOWN_MAX], known_n;

static Py_ssize_t find_offset(PyObject *d)
{
    Py_ssize_t off = -1;
    PyObject *cls = PyObject_GetAttrString(d, "__objclass__"), *inst = NULL, *mark = NULL;
    PyObject *size = NULL, *r;
    if (!cls || !PyType_Check(cls))
        goto out;
    size = PyObject_GetAttrString(cls, "__basicsize__");
    Py_ssize_t basic = size ? PyLong_AsSsize_t(size) : -1;
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_alloc);
    if (basic <= 0 || !alloc || !(inst = alloc((PyTypeObject *)cls, 0))
            || !(mark = PyObject_CallObject((PyObject *)&PyBaseObject_Type, NULL)))
        goto out;
    if (!(r = PyObject_CallMethod(d, "__set__", "OO", inst, mark)))
        goto out;
    Py_DECREF(r);
    for (Py_ssize_t at = (Py_ssize_t)sizeof(PyObject); at + (Py_ssize_t)sizeof(PyObject *) <= basic;
            at += (Py_ssize_t)sizeof(PyObject *))
        if (*(PyObject **)((char *)inst + at) == mark) {
            off = at;
            break;
        }
    if (!(r = PyObject_CallMethod(d, "__delete__", "O", inst)))
        off = -1;
    Py_XDECREF(r);
    if (off >= 0 && *(PyObject **)((char *)inst + off) != NULL)
        off = -1;
    r = off >= 0 ? PyObject_CallMethod(d, "__get__", "OO", inst, cls) : NULL;
    if (r || (off >= 0 && !PyErr_ExceptionMatches(PyExc_AttributeError)))
        off = -1;                       /* unset reads as a value: not T_OBJECT_EX */
    Py_XDECREF(r);
out:
    PyErr_Clear();
    Py_XDECREF(mark);
    Py_XDECREF(inst);
    Py_XDECREF(size);
    Py_XDECREF(cls);
    return off;
}

static Py_ssize_t member_offset(PyObject *d)
{
    for (Py_ssize_t k = 0; k < known_n; k++)
        if (known_d[k] == d)
            return known_off[k];
    Py_ssize_t off = find_offset(d);
    if (off >= 0 && known_n < KNOWN_MAX) {
        Py_INCREF(d);
        known_d[known_n] = d;
        known_off[known_n++] = off;
    }
    return off;
}
#else
static Py_ssize_t member_offset(PyObject *d)
{
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    return m->type != T_OBJECT_EX || (m->flags & READONLY) ? -1 : m->offset;
}
#endif

/* the offsets of a tuple of slot member descriptors */
static int offsets(PyObject *members, Py_ssize_t *out, Py_ssize_t n)
{
    if (!PyTuple_Check(members) || PyTuple_GET_SIZE(members) != n)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = PyTuple_GET_ITEM(members, i);
        if (!Py_IS_TYPE(d, &PyMemberDescr_Type) || (out[i] = member_offset(d)) < 0)
            return -1;
    }
    return 0;
}

int read_ctx(PyObject *ctx, Ctx *c)
{
    if (!PyTuple_Check(ctx) || PyTuple_GET_SIZE(ctx) != 13)
        return -1;
    c->threads = PyTuple_GET_ITEM(ctx, 0);
    c->new_thread = PyTuple_GET_ITEM(ctx, 1);
    c->specific = PyTuple_GET_ITEM(ctx, 2);
    c->stats = (PyTypeObject *)PyTuple_GET_ITEM(ctx, 3);
    PyObject *classes = PyTuple_GET_ITEM(ctx, 5);
    c->plain = PyTuple_GET_ITEM(ctx, 7);
    c->not_failures = PyTuple_GET_ITEM(ctx, 8);
    c->followed = PyTuple_GET_ITEM(ctx, 10);
    c->ends_fd = PyTuple_GET_ITEM(ctx, 11);
    c->read_kinds = PyTuple_GET_ITEM(ctx, 12);
    c->max_failures = PyLong_AsSsize_t(PyTuple_GET_ITEM(ctx, 9));
    if (c->max_failures == -1 && PyErr_Occurred())
        PyErr_Clear();
    if (!PyDict_Check(c->threads) || !PyType_Check((PyObject *)c->stats) || !PyAnySet_Check(c->plain)
            || !PyAnySet_Check(c->not_failures) || c->max_failures < 0
            || !PyDict_Check(c->followed) || !PyAnySet_Check(c->ends_fd)
            || !PyAnySet_Check(c->read_kinds)
            || !PyTuple_Check(classes) || PyTuple_GET_SIZE(classes) != C_COUNT
            || offsets(PyTuple_GET_ITEM(ctx, 4), c->m, M_COUNT) < 0
            || offsets(PyTuple_GET_ITEM(ctx, 6), c->e, E_COUNT) < 0)
        return -1;
    for (int i = 0; i < C_COUNT; i++)
        c->classes[i] = PyTuple_GET_ITEM(classes, i);
    return 0;
}

/* a field of an event or a ThreadStats (borrowed); NULL with AttributeError when unset */
PyObject *field(PyObject *o, Py_ssize_t off)
{
    PyObject *v = SLOT(o, off);
    if (!v)
        PyErr_SetString(PyExc_AttributeError, "feed_calls: a field is not set");
    return v;
}

/* o.<off> = v (a new reference to v is taken) */
void set_field(PyObject *o, Py_ssize_t off, PyObject *v)
{
    Py_INCREF(v);
    Py_XSETREF(SLOT(o, off), v);
}

/* o.<off> = v, v a new reference (stolen); -1 when v is NULL (an error is set) */
int put_field(PyObject *o, Py_ssize_t off, PyObject *v)
{
    if (!v)
        return -1;
    Py_XSETREF(SLOT(o, off), v);
    return 0;
}

/* x + 1, x an int */
PyObject *plus_one(PyObject *x)
{
    if (PyLong_CheckExact(x)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
        if (!overflow && v < LLONG_MAX && !(v == -1 && PyErr_Occurred()))
            return PyLong_FromLongLong(v + 1);
        PyErr_Clear();
    }
    PyObject *one = PyLong_FromLong(1);
    PyObject *r = one ? PyNumber_Add(x, one) : NULL;
    Py_XDECREF(one);
    return r;
}

/* counter[key] += 1 (a Counter: a dict whose missing keys count 0) */
int count(PyObject *counter, PyObject *key)
{
    if (!PyDict_Check(counter)) {
        PyErr_SetString(PyExc_TypeError, "feed_calls: a counter is not a dict");
        return -1;
    }
    PyObject *old = PyDict_GetItemWithError(counter, key);
    if (!old && PyErr_Occurred())
        return -1;
    PyObject *n = old ? plus_one(old) : PyLong_FromLong(1);
    if (!n)
        return -1;
    int rc = PyDict_SetItem(counter, key, n);
    Py_DECREF(n);
    return rc;
}

/* stats.count_failure(t, name, err) */
int count_failure(Ctx *c, PyObject *t, PyObject *name, PyObject *err)
{
    int normal = PySet_Contains(c->not_failures, err);
    if (normal)
        return normal < 0 ? -1 : 0;
    PyObject *failures = field(t, c->m[M_FAILURES]);
    if (!failures || !PyDict_Check(failures))
        return -1;
    PyObject *key = PyTuple_Pack(2, name, err);
    if (!key)
        return -1;
    int rc = 0, want = PyDict_GET_SIZE(failures) < c->max_failures;
    if (!want)
        want = PyDict_Contains(failures, key);
    if (want > 0)
        rc = count(failures, key);
    else if (want < 0)
        rc = -1;
    Py_DECREF(key);
    return rc;
}

/* whether a < b, as Python's "<" */
int less(PyObject *a, PyObject *b)
{
    if (PyFloat_CheckExact(a) && PyFloat_CheckExact(b))
        return PyFloat_AS_DOUBLE(a) < PyFloat_AS_DOUBLE(b);
    return PyObject_RichCompareBool(a, b, Py_LT);
}

/* a read that needs no more than C: 1 when done (it returned nothing, or input: calls.py
 * _read for a kind outside io_class.READ_KINDS), 0 for _read, -1 error */
static int read_native(Ctx *c, PyObject *t, PyObject *e, PyObject *name)
{
    PyObject *ret = SLOT(e, c->e[E_RET]);
    if (!ret || ret == Py_None)
        return 1;
    if (!PyLong_CheckExact(ret))
        return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(ret, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    int positive = overflow > 0 || (!overflow && v > 0);
    if (PyUnicode_Tailmatch(name, S_ACCEPT, 0, PY_SSIZE_T_MAX, -1) == 1)
        return !positive && (overflow < 0 || v < 0);      /* an accept: _read counts it */
    if (!positive)
        return 1;
    PyObject *kind = field(e, c->e[E_FD_KIND]);
    if (!kind)
        return -1;
    int asked = PySet_Contains(c->read_kinds, kind);
    if (asked)
        return asked < 0 ? -1 : 0;
    /* input: t.input_bytes += ret; t.input_at, t.input_ts = t.ncalls, e.ts; a file's read */
    PyObject *bytes = field(t, c->m[M_INPUT_BYTES]), *ncalls = field(t, c->m[M_NCALLS]),
             *ts = field(e, c->e[E_TS]);
    if (!bytes || !ncalls || !ts || put_field(t, c->m[M_INPUT_BYTES], PyNumber_Add(bytes, ret)) < 0)
        return -1;
    set_field(t, c->m[M_INPUT_AT], ncalls);
    set_field(t, c->m[M_INPUT_TS], ts);
    int file = kind != Py_None && PyUnicode_Check(kind)
               && PyUnicode_Compare(kind, S_FILE_KIND) == 0;
    if (file) {
        PyObject *reads = field(t, c->m[M_FILE_READS]);
        if (!reads || put_field(t, c->m[M_FILE_READS], plus_one(reads)) < 0)
            return -1;
    }
    return 1;
}

/* whether no thread of process pid follows fd (fd_lifetimes.fd_ended's first test: a close
 * or dup of it has nothing to end): 1, 0, -1 error */
int fd_unfollowed(Ctx *c, PyObject *pid, PyObject *fd)
{
    PyObject *fds = PyDict_GetItemWithError(c->followed, pid);
    if (!fds)
        return PyErr_Occurred() ? -1 : 1;
    if (!PyAnySet_Check(fds))
        return 0;
    int in = PySet_Contains(fds, fd);
    return in < 0 ? -1 : !in;
}

/* a close, dup2 or dup3 (name) whose fd no thread follows (the fd: close's argument, a dup's
 * result) */
static int unfollowed_fd(Ctx *c, PyObject *e, PyObject *name)
{
    PyObject *pid = field(e, c->e[E_PID]);
    if (!pid)
        return -1;
    int close = PyUnicode_Compare(name, S_CLOSE);
    if (close == -1 && PyErr_Occurred())
        return -1;
    PyObject *fd = field(e, c->e[close == 0 ? E_FD : E_RET]);
    return fd ? fd_unfollowed(c, pid, fd) : -1;
}

/* t.ioctls[(e.fd_kind or "?", e.request, e.request_name or "")] += 1 */
static int count_ioctl(Ctx *c, PyObject *t, PyObject *e)
{
    PyObject *kind = field(e, c->e[E_FD_KIND]), *req = field(e, c->e[E_REQUEST]),
             *rname = field(e, c->e[E_REQUEST_NAME]), *ioctls = field(t, c->m[M_IOCTLS]);
    if (!kind || !req || !rname || !ioctls)
        return -1;
    int k = PyObject_IsTrue(kind), r = PyObject_IsTrue(rname);
    if (k < 0 || r < 0)
        return -1;
    PyObject *key = PyTuple_Pack(3, k ? kind : S_UNKNOWN_KIND, req, r ? rname : S_EMPTY);
    if (!key)
        return -1;
    int rc = count(ioctls, key);
    Py_DECREF(key);
    return rc;
}

/* CallFeed._syscall(e, t) for an event of class index k */
int feed_call(Ctx *c, PyObject *t, PyObject *e, int k)
{
    PyObject *ts = field(e, c->e[E_TS]), *ongoing = field(e, c->e[E_ONGOING]);
    PyObject *first = field(t, c->m[M_FIRST_TS]);
    if (!ts || !ongoing || !first)
        return -1;
    if (first == Py_None)
        set_field(t, c->m[M_FIRST_TS], ts);
    set_field(t, c->m[M_LAST_TS], ts);
    int on = PyObject_IsTrue(ongoing);
    if (on) {
        if (on > 0)
            set_field(t, c->m[M_ONGOING], e);
        return on < 0 ? -1 : 0;
    }
    set_field(t, c->m[M_LAST_CALL], e);
    PyObject *ncalls = field(t, c->m[M_NCALLS]), *syscalls = field(t, c->m[M_SYSCALLS]);
    PyObject *name = field(e, c->e[E_NAME]), *err = field(e, c->e[E_ERR]),
             *ret = field(e, c->e[E_RET]), *dur = field(e, c->e[E_DUR]);
    if (!ncalls || !syscalls || !name || !err || !ret || !dur
            || put_field(t, c->m[M_NCALLS], plus_one(ncalls)) < 0 || count(syscalls, name) < 0)
        return -1;
    if (err != Py_None && count_failure(c, t, name, err) < 0)
        return -1;
    PyObject *tail_name = field(t, c->m[M_TAIL_NAME]), *tail_ret = field(t, c->m[M_TAIL_RET]);
    if (!tail_name || !tail_ret)
        return -1;
    int same = PyObject_RichCompareBool(name, tail_name, Py_EQ);
    if (same > 0)
        same = PyObject_RichCompareBool(ret, tail_ret, Py_EQ);
    if (same < 0)
        return -1;
    if (same) {
        PyObject *run = field(t, c->m[M_TAIL_RUN]);
        if (!run || put_field(t, c->m[M_TAIL_RUN], plus_one(run)) < 0)
            return -1;
    } else {
        set_field(t, c->m[M_TAIL_NAME], name);
        set_field(t, c->m[M_TAIL_RET], ret);
        if (put_field(t, c->m[M_TAIL_RUN], PyLong_FromLong(1)) < 0)
            return -1;
        set_field(t, c->m[M_TAIL_SINCE], ts);
    }
    if (dur == Py_None) {
        set_field(t, c->m[M_DURS_KNOWN], Py_False);
    } else {
        PyObject *sum = field(t, c->m[M_SYSCALL_TIME]);
        if (!sum)
            return -1;
        if (PyFloat_CheckExact(sum) && PyFloat_CheckExact(dur))
            sum = PyFloat_FromDouble(PyFloat_AS_DOUBLE(sum) + PyFloat_AS_DOUBLE(dur));
        else
            sum = PyNumber_InPlaceAdd(sum, dur);
        if (put_field(t, c->m[M_SYSCALL_TIME], sum) < 0)
            return -1;
    }
    if (k == C_SYSCALL) {
        int plain = PySet_Contains(c->plain, name);
        if (plain <= 0)
            return plain;
        int ends = PySet_Contains(c->ends_fd, name);
        if (ends > 0)
            ends = unfollowed_fd(c, e, name);
        if (ends)
            return ends < 0 ? -1 : 0;
    } else if (k == C_IOCTL) {
        return count_ioctl(c, t, e);
    } else if (k == C_READ) {
        int done = read_native(c, t, e, name);
        if (done)
            return done < 0 ? -1 : 0;
    }
    PyObject *args[2] = {t, e};
    PyObject *r = PyObject_Vectorcall(c->specific, args, 2, NULL);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* the ThreadStats of (pid, tid): threads' own, or new_thread(pid, tid)'s (new reference) */
PyObject *thread_of(Ctx *c, PyObject *pid, PyObject *tid)
{
    PyObject *key = PyTuple_Pack(2, pid, tid);
    if (!key)
        return NULL;
    PyObject *t = PyDict_GetItemWithError(c->threads, key);
    Py_DECREF(key);
    if (t) {
        Py_INCREF(t);
    } else if (!PyErr_Occurred()) {
        PyObject *args[2] = {pid, tid};
        t = PyObject_Vectorcall(c->new_thread, args, 2, NULL);
    }
    if (t && Py_TYPE(t) != c->stats) {
        PyErr_SetString(PyExc_TypeError, "feed_calls: a thread's stats of another class");
        Py_CLEAR(t);
    }
    return t;
}

int call_class(Ctx *c, PyObject *e)
{
    PyObject *cls = (PyObject *)Py_TYPE(e);
    int k = 0;
    while (k < C_COUNT && c->classes[k] != cls)
        k++;
    return k;
}

/* whether the ints a and b are equal (a may be NULL or None: not equal) */
static int same_int(PyObject *a, PyObject *b)
{
    if (!a || a == Py_None)
        return 0;
    if (a == b)
        return 1;
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

PyObject *feed_calls(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    Ctx c;
    if (argc != 4 || !PyList_Check(argv[0]) || !PyList_Check(argv[3])
            || PyList_GET_SIZE(argv[3]) != 5 || read_ctx(argv[2], &c) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "feed_calls(events, start, ctx, cur)");
        return NULL;
    }
    if (feed_strings() < 0)
        return NULL;
    PyObject *events = argv[0], *cur = argv[3];
    Py_ssize_t i = PyLong_AsSsize_t(argv[1]), n = PyList_GET_SIZE(events);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    /* strong references, written back into cur at the end */
    PyObject *last = PyList_GET_ITEM(cur, 0), *start = PyList_GET_ITEM(cur, 1),
             *pid = PyList_GET_ITEM(cur, 2), *tid = PyList_GET_ITEM(cur, 3),
             *t = PyList_GET_ITEM(cur, 4);
    if (t != Py_None && Py_TYPE(t) != c.stats)
        t = Py_None;                    /* looked up again */
    Py_INCREF(last), Py_INCREF(start), Py_INCREF(pid), Py_INCREF(tid), Py_INCREF(t);
    int failed = 0;
    for (; i < n; i++) {
        PyObject *e = PyList_GET_ITEM(events, i);
        int k = call_class(&c, e);
        if (k == C_COUNT)
            break;
        PyObject *ts = field(e, c.e[E_TS]), *epid = field(e, c.e[E_PID]),
                 *etid = field(e, c.e[E_TID]);
        if (!ts || !epid || !etid) {
            failed = 1;
            break;
        }
        int truth = PyObject_IsTrue(ts), later = 1;
        if (truth > 0 && last != Py_None)
            later = less(last, ts);
        if (truth < 0 || later < 0) {
            failed = 1;
            break;
        }
        if (truth && later) {
            Py_INCREF(ts);
            Py_SETREF(last, ts);
            if (start == Py_None) {
                Py_INCREF(ts);
                Py_SETREF(start, ts);
            }
        }
        int same = t != Py_None;
        if (same)
            same = same_int(tid, etid);
        if (same > 0)
            same = same_int(pid, epid);
        if (same < 0) {
            failed = 1;
            break;
        }
        if (!same) {
            PyObject *nt = thread_of(&c, epid, etid);
            if (!nt) {
                failed = 1;
                break;
            }
            Py_INCREF(epid), Py_INCREF(etid);
            Py_SETREF(pid, epid);
            Py_SETREF(tid, etid);
            Py_SETREF(t, nt);
        }
        if (feed_call(&c, t, e, k) < 0) {
            failed = 1;
            break;
        }
    }
    PyList_SetItem(cur, 0, last);        /* the references go to cur */
    PyList_SetItem(cur, 1, start);
    PyList_SetItem(cur, 2, pid);
    PyList_SetItem(cur, 3, tid);
    PyList_SetItem(cur, 4, t);
    return failed ? NULL : PyLong_FromSsize_t(i);
}
