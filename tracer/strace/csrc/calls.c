#include "calls.h"

Py_ssize_t ioctl_request_end(const char *a, Py_ssize_t rs, Py_ssize_t end)
{
    if (end - rs >= 5 && memcmp(a + rs, "_IOC(", 5) == 0) {
        Py_ssize_t p = find_char(a, rs, end, ')');
        return p < 0 ? rs : p + 1;
    }
    Py_ssize_t c = find_str(a, rs, end, ", ", 2);
    return c >= 0 ? c : end;
}

/* ------------------------------------------------------------------ convert_calls */
/* convert_calls(texts, start, ctx, out) -> (next, lines, last_ts, has_dur, entered, tail,
 *                                            events)
 *
 * strace/batch.py BatchFeed.events_batch's fast path, line after line from texts[start]:
 * a line that split_line reads as a complete call of a known thread (pid column, -ttt
 * timestamp, no -n number) whose name is not in ctx's special set becomes the event
 * decode.to_event builds for it; so does the resumed half of a call whose entry half is held
 * in pending (convert.py's _resumed: the entry's time and arguments, the time since as its
 * duration when the line has none), an entry half (<unfinished ...>) being held there
 * (entered[tid] its line number) unless its thread holds one already:
 *   - read/write family and ioctl: decode.py's _rw and _ioctl done here (through the fd,
 *     ioctl-request and NVIDIA-name memo dicts Python fills);
 *   - another name in builders: builders[name](ts, pid, tid, name, args, sargs, ret, err,
 *     dur, False) (Python), whose ValueError/IndexError means a plain Syscall, as to_event;
 *     a poll's event (TAG "pl") only in a -y log and with no fd (not an epoll: convert.py's
 *     _poll_kinds adds nothing then);
 *   - else a plain Syscall: scrubbed args, the first argument as an fd through the fd cache,
 *     "dir" for a directory call.
 * Events are made by calling their class with its fields in order (classes: Syscall,
 * WriteCall, ReadCall, IoctlCall) and appended to out, a list; where ctx gives encode_row
 * (codec.encode_row), their trace rows are written instead (rowtext.c row_text; an event
 * whose row it cannot write made and written by encode_row), all the lines' rows appended
 * to out as one bytes object at the end.
 * It stops at the first other line (next = its index), and at a line whose fd the cache does
 * not hold yet or whose event needs the converter (its fd tables, its first -y decoration):
 * Python takes that line. ctx = (tid_pid, names, special, builders, fd_first, dir_calls,
 * fd_cache, has_fd, classes, write_calls, read_calls, ioctl_cache, nv_cache, encode_row or
 * None, pending, entered, the converter's lines so far). lines, last_ts (None when no line
 * was taken) and has_dur are what the converter's counters get; entered the tid of the last
 * entry half held (or None), tail whether the last line taken was one; events how many. */

/* an event made elsewhere (a builder's): appended, or its row written */
static int emit_event(Emit *em, PyObject *ev)
{
    if (!em->rows)
        return PyList_Append(em->out, ev);
    PyObject *row = PyObject_CallOneArg(em->encode_row, ev);
    if (!row)
        return -1;
    int rc = PyBytes_Check(row)
             ? row_bytes(em->text, PyBytes_AS_STRING(row), PyBytes_GET_SIZE(row)) : -1;
    if (rc < 0 && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "convert_calls: encode_row gave no bytes");
    Py_DECREF(row);
    return rc;
}

int emit(Emit *em, PyObject *cls, const char *tag, const char *shape, PyObject *const *vals,
         Py_ssize_t n)
{
    if (em->rows) {
        int rc = row_text(em->text, tag, vals, shape);
        if (rc)
            return rc < 0 ? -1 : 0;
    }
    PyObject *ev = PyObject_Vectorcall(cls, vals, n, NULL);
    if (!ev)
        return -1;
    int rc = emit_event(em, ev);
    Py_DECREF(ev);
    return rc;
}

/* decode.py's _rw and _ioctl builders for a complete call: its event emitted, made with cls
 * (WriteCall, ReadCall or IoctlCall; io: the ioctl one): 1 made, 0 for Python (a cache it
 * needs is not filled yet, or the event needs the converter's fd tables or its first -y
 * decoration), -1 error */
static int native_call(Emit *em, PyObject *cls, const char *tag, int io, PyObject *ts,
                       PyObject *pid,
                       PyObject *tid,
                       PyObject *name, PyObject *args, PyObject *sargs, PyObject *t,
                       PyObject *fd_cache, PyObject *ioctl_cache, PyObject *nv_cache,
                       int has_fd)
{
    PyObject *first = first_arg(NULL, args);
    if (!first)
        return -1;
    PyObject *hit = PyDict_GetItemWithError(fd_cache, first);
    int rc = 0;
    PyObject *req = NULL, *req_name = NULL, *nv_key = NULL, *nbytes = NULL;
    if (!hit || !PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) != 3)
        goto out;
    PyObject *fd = PyTuple_GET_ITEM(hit, 0), *kind = PyTuple_GET_ITEM(hit, 1),
             *target = PyTuple_GET_ITEM(hit, 2);
    if (kind != Py_None ? !has_fd : (fd != Py_None && !has_fd))
        goto out;
    PyObject *ret = PyTuple_GET_ITEM(t, 5);
    PyObject *tail[2] = {NULL, NULL};
    int ntail;
    if (io) {
        /* rest = args[len(first) + 2:]; the request text; its memoised decoding */
        Py_ssize_t alen, flen = PyUnicode_GET_LENGTH(first);
        const char *a = ascii_data(args, &alen);
        if (!a)
            goto out;
        Py_ssize_t rs = flen + 2 < alen ? flen + 2 : alen;
        Py_ssize_t re_ = ioctl_request_end(a, rs, alen);
        PyObject *req_text = ascii_str(a, rs, re_);
        if (!req_text) {
            rc = -1;
            goto out;
        }
        PyObject *dec = PyDict_GetItemWithError(ioctl_cache, req_text);
        Py_DECREF(req_text);
        if (!dec || !PyTuple_Check(dec) || PyTuple_GET_SIZE(dec) != 2) {
            rc = PyErr_Occurred() ? -1 : 0;
            goto out;
        }
        req = PyTuple_GET_ITEM(dec, 0);
        req_name = PyTuple_GET_ITEM(dec, 1);
        if (PyUnicode_Check(kind) && (PyUnicode_CompareWithASCIIString(kind, "nvidiactl") == 0
                                      || PyUnicode_CompareWithASCIIString(kind, "nvidia") == 0
                                      || PyUnicode_CompareWithASCIIString(kind, "nvidia-uvm") == 0)) {
            nv_key = PyTuple_Pack(3, kind, req, req_name);
            if (!nv_key) {
                rc = -1;
                goto out;
            }
            PyObject *nv = PyDict_GetItemWithError(nv_cache, nv_key);
            if (!nv) {
                rc = PyErr_Occurred() ? -1 : 0;
                goto out;
            }
            req_name = nv;
        }
        tail[0] = req;
        tail[1] = req_name;
        ntail = 2;
    } else {
        /* accept/accept4: the result is a new fd, not a byte count */
        const char *nm = PyUnicode_AsUTF8AndSize(name, NULL);
        long long n = 0;
        if (nm && nm[0] != 'a' && ret != Py_None) {
            int overflow = 0;
            n = PyLong_AsLongLongAndOverflow(ret, &overflow);
            if (overflow || (n == -1 && PyErr_Occurred())) {
                PyErr_Clear();
                goto out;
            }
            if (n < 0)
                n = 0;
        }
        nbytes = PyLong_FromLongLong(n);
        if (!nbytes) {
            rc = -1;
            goto out;
        }
        tail[0] = nbytes;
        ntail = 1;
    }
    PyObject *vals[14] = {ts, pid, tid, name, sargs, ret, PyTuple_GET_ITEM(t, 6),
                          PyTuple_GET_ITEM(t, 8), fd, kind, target, Py_False, tail[0], tail[1]};
    rc = emit(em, cls, tag, io ? "fiissISFISSbiS" : "fiissISFISSbi", vals, 12 + ntail) < 0
         ? -1 : 1;
out:
    Py_DECREF(first);
    Py_XDECREF(nv_key);
    Py_XDECREF(nbytes);
    if (rc < 0 && !PyErr_Occurred())
        rc = 0;
    return rc;
}

/* err is one strace prints for a call a signal interrupted ("= ? ERESTARTSYS"): the
 * converter holds such a call (convert.py), so it is Python's line. */
static int interrupted(PyObject *err)
{
    Py_ssize_t n;
    const char *s = err != Py_None ? ascii_data(err, &n) : NULL;
    return s && n >= 8 && memcmp(s, "ERESTART", 8) == 0;
}


/* convert.py's two halves of a call, for a line of tid (an entry half when entry, else a
 * resumed half): an entry half is to be held (hold_entry) unless tid holds one already
 * (Python's line: it ends that one); a resumed half whose held entry has its name becomes
 * its call: *ts the entry's, *args the entry's and its own (*joined, a new reference), *dur
 * its own or the time since the entry (*waited); pending keeps the entry until the caller has
 * made the call. 1 (or 2: an entry to hold) taken, 0 Python's, -1 error. */
static int halves(PyObject *pending, PyObject *tid, PyObject *name, PyObject **ts,
                  PyObject **args, PyObject **dur, PyObject **joined, PyObject **waited,
                  int entry)
{
    PyObject *held = PyDict_GetItemWithError(pending, tid);
    if (!held)
        return PyErr_Occurred() ? -1 : !entry ? 0 : 2;
    if (entry)
        return 0;
    if (!PyTuple_Check(held) || PyTuple_GET_SIZE(held) != 3
            || !PyUnicode_Check(PyTuple_GET_ITEM(held, 2)))
        return 0;
    int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(held, 1), name, Py_EQ);
    if (same <= 0)
        return same;
    PyObject *start = PyTuple_GET_ITEM(held, 0);
    if (*dur == Py_None) {              /* max(0.0, end - start) */
        double d = PyFloat_AsDouble(*ts) - PyFloat_AsDouble(start);
        if (PyErr_Occurred())
            return -1;
        if (!(d > 0.0))
            d = 0.0;
        if (!(*waited = PyFloat_FromDouble(d)))
            return -1;
        *dur = *waited;
    }
    if (!(*joined = PyUnicode_Concat(PyTuple_GET_ITEM(held, 2), *args)))
        return -1;
    *args = *joined;
    *ts = start;
    return 1;
}

/* an entry half held (halves gave 2): pending[tid] = (ts, name, args), entered[tid] = line */
static int hold_entry(PyObject *pending, PyObject *entered, PyObject *tid, PyObject *ts,
                      PyObject *name, PyObject *args, Py_ssize_t line)
{
    PyObject *held = PyTuple_Pack(3, ts, name, args), *at = PyLong_FromSsize_t(line);
    int rc = held && at && PyDict_SetItem(pending, tid, held) == 0
             && PyDict_SetItem(entered, tid, at) == 0 ? 0 : -1;
    Py_XDECREF(held);
    Py_XDECREF(at);
    return rc;
}

int conv_start(Conv *c, PyObject *ctx, PyObject *out, const char *usage)
{
    memset(c, 0, sizeof *c);
    c->em.text = &c->em.own;
    if (!PyTuple_Check(ctx) || PyTuple_GET_SIZE(ctx) != 17
            || !(PyList_Check(out) || PyObject_TypeCheck(out, RowBufType))) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    PyObject *classes = PyTuple_GET_ITEM(ctx, 8);
    c->em.out = out;
    c->em.encode_row = PyTuple_GET_ITEM(ctx, 13);
    c->em.rows = c->em.encode_row != Py_None;
    if (!PyList_Check(out)) {           /* a RowBuffer: rows written into it */
        if (!c->em.rows) {
            PyErr_SetString(PyExc_TypeError, "convert_calls: rows into a RowBuffer need "
                            "encode_row (ctx[13])");
            return -1;
        }
        if (!(c->em.text = rowbuf_text(out))) {
            c->em.text = &c->em.own;
            return -1;
        }
        c->em.start = c->em.text->len;
    }
    c->tid_pid = PyTuple_GET_ITEM(ctx, 0);
    c->names = PyTuple_GET_ITEM(ctx, 1);
    c->special = PyTuple_GET_ITEM(ctx, 2);
    c->builders = PyTuple_GET_ITEM(ctx, 3);
    c->fd_first = PyTuple_GET_ITEM(ctx, 4);
    c->dir_calls = PyTuple_GET_ITEM(ctx, 5);
    c->fd_cache = PyTuple_GET_ITEM(ctx, 6);
    c->write_calls = PyTuple_GET_ITEM(ctx, 9);
    c->read_calls = PyTuple_GET_ITEM(ctx, 10);
    c->ioctl_cache = PyTuple_GET_ITEM(ctx, 11);
    c->nv_cache = PyTuple_GET_ITEM(ctx, 12);
    c->pending = PyTuple_GET_ITEM(ctx, 14);
    c->entered = PyTuple_GET_ITEM(ctx, 15);
    c->has_fd = PyObject_IsTrue(PyTuple_GET_ITEM(ctx, 7));
    c->base_lines = PyLong_AsSsize_t(PyTuple_GET_ITEM(ctx, 16));
    if (c->has_fd < 0 || (c->base_lines == -1 && PyErr_Occurred()))
        return -1;
    if (!PyDict_Check(c->pending) || !PyDict_Check(c->entered) || !PyDict_Check(c->tid_pid)
            || !PyDict_Check(c->builders) || !PyDict_Check(c->fd_cache)
            || !PyDict_Check(c->ioctl_cache) || !PyDict_Check(c->nv_cache)
            || !PyAnySet_Check(c->names) || !PyAnySet_Check(c->special)
            || !PyAnySet_Check(c->fd_first) || !PyAnySet_Check(c->dir_calls)
            || !PyAnySet_Check(c->write_calls) || !PyAnySet_Check(c->read_calls)) {
        PyErr_SetString(PyExc_TypeError, "convert_calls: ctx holds dicts and sets (calls.c)");
        return -1;
    }
    if (!PyTuple_Check(classes) || PyTuple_GET_SIZE(classes) != 4) {
        PyErr_SetString(PyExc_TypeError, "convert_calls: ctx[8] is (Syscall, WriteCall, "
                        "ReadCall, IoctlCall)");
        return -1;
    }
    c->sc_cls = PyTuple_GET_ITEM(classes, 0);
    c->wr_cls = PyTuple_GET_ITEM(classes, 1);
    c->rd_cls = PyTuple_GET_ITEM(classes, 2);
    c->io_cls = PyTuple_GET_ITEM(classes, 3);
    Py_INCREF(Py_None);
    c->last_entry = Py_None;
    return 0;
}

void conv_counted(Conv *c, double ts, int has_dur)
{
    c->lines++;
    c->made++;
    c->tail = 0;
    c->last_ts = ts;
    if (has_dur)
        c->has_dur = 1;
}

int conv_take(Conv *c, PyObject *t)
{
    PyObject *tid = PyTuple_GET_ITEM(t, 0), *line_ts = PyTuple_GET_ITEM(t, 1),
             *name = PyTuple_GET_ITEM(t, 3), *args = PyTuple_GET_ITEM(t, 4),
             *line_dur = PyTuple_GET_ITEM(t, 8), *kind_ = PyTuple_GET_ITEM(t, 2);
    PyObject *ts = line_ts, *dur = line_dur;    /* the call's: a resumed one's start */
    PyObject *pid = NULL, *builder = NULL, *first = NULL, *sargs = NULL, *ev = NULL,
             *joined = NULL, *waited = NULL;
    int entry = kind_ == S_UNFINISHED, resumed = kind_ == S_RESUMED;
    int ok = (kind_ == S_CALL || entry || resumed) && tid != Py_None && ts != Py_None
             && PyTuple_GET_ITEM(t, 13) == Py_False && PyTuple_GET_ITEM(t, 14) == Py_None
             && !interrupted(PyTuple_GET_ITEM(t, 6));
    int rc = -1, done = 0;                      /* rc: the answer */
    if (ok) {
        int sp = PySet_Contains(c->special, name);
        if (sp < 0)
            goto out;
        ok = !sp;
    }
    if (ok) {
        pid = PyDict_GetItemWithError(c->tid_pid, tid);
        if (!pid && PyErr_Occurred())
            goto out;
        ok = pid != NULL;
    }
    if (ok && (entry || resumed)) {
        ok = halves(c->pending, tid, name, &ts, &args, &dur, &joined, &waited, entry);
        if (ok < 0)
            goto out;
        if (ok && entry) {                  /* held in pending until its resumed half */
            if (hold_entry(c->pending, c->entered, tid, ts, name, args,
                           c->base_lines + c->lines + 1) < 0 || PySet_Add(c->names, name) < 0)
                goto out;
            c->lines++;
            c->last_ts = PyFloat_AsDouble(line_ts);
            c->tail = 1;
            Py_INCREF(tid);
            Py_SETREF(c->last_entry, tid);
            rc = 1;
            goto out;
        }
    }
    if (!ok) {
        rc = 0;
        goto out;
    }
    sargs = PyUnicode_FindChar(args, '"', 0, PyUnicode_GET_LENGTH(args), 1) >= 0
            ? scrub(NULL, args) : (Py_INCREF(args), args);
    if (!sargs)
        goto out;
    if (sargs == UNHANDLED) {
        rc = 0;
        goto out;
    }
    builder = PyDict_GetItemWithError(c->builders, name);
    if (!builder && PyErr_Occurred())
        goto out;
    if (builder) {
        int w = PySet_Contains(c->write_calls, name);
        int r = w ? 0 : PySet_Contains(c->read_calls, name);
        if (w < 0 || r < 0)
            goto out;
        int io = (w || r) ? 0 : PyUnicode_CompareWithASCIIString(name, "ioctl") == 0;
        if (w || r || io) {
            int nc = native_call(&c->em, w ? c->wr_cls : r ? c->rd_cls : c->io_cls,
                                 w ? "wr" : r ? "rd" : "io", io, ts, pid, tid, name, args,
                                 sargs, t, c->fd_cache, c->ioctl_cache, c->nv_cache, c->has_fd);
            if (nc <= 0) {              /* 0: for Python (a cache miss, or the converter's) */
                rc = nc;
                goto out;
            }
            builder = NULL;             /* made: skip the plain Syscall below */
            done = 1;
        }
    }
    if (builder) {
        PyObject *bargs[10] = {ts, pid, tid, name, args, sargs, PyTuple_GET_ITEM(t, 5),
                               PyTuple_GET_ITEM(t, 6), dur, Py_False};
        ev = PyObject_Vectorcall(builder, bargs, 10, NULL);
        if (!ev) {
            if (!PyErr_ExceptionMatches(PyExc_ValueError)
                    && !PyErr_ExceptionMatches(PyExc_IndexError))
                goto out;
            PyErr_Clear();              /* odd text: a plain Syscall, as to_event does */
        } else {
            PyObject *kind = PyObject_GetAttr(ev, S_FD_KIND);
            PyObject *fd = kind ? PyObject_GetAttr(ev, S_FD) : NULL;
            if (!fd) {
                Py_XDECREF(kind);
                goto out;
            }
            int mine = kind != Py_None ? c->has_fd : (fd == Py_None || c->has_fd);
            PyObject *tag = mine ? PyObject_GetAttr(ev, S_TAG) : NULL;
            if (tag) {                  /* a poll: convert.py _poll_kinds has nothing to add */
                if (PyUnicode_Check(tag) && PyUnicode_CompareWithASCIIString(tag, "pl") == 0)
                    mine = c->has_fd && fd == Py_None;  /* (else epoll's kinds, fd tables) */
                Py_DECREF(tag);
            }
            Py_DECREF(kind);
            Py_DECREF(fd);
            if (mine && !tag)
                goto out;               /* (getting TAG failed) */
            if (!mine) {                /* the converter's event: Python redoes the line */
                rc = 0;
                goto out;
            }
            if (emit_event(&c->em, ev) < 0)
                goto out;
            done = 1;
        }
    }
    if (!done) {                        /* a plain Syscall */
        PyObject *fd = Py_None, *kind = Py_None, *target = Py_None;
        const char *a = PyUnicode_AsUTF8AndSize(args, NULL);
        if (!a)
            goto out;
        if (a[0] >= '0' && a[0] <= '9') {
            first = first_arg(NULL, args);
            if (!first)
                goto out;
            int want = PyUnicode_FindChar(first, '<', 0, PyUnicode_GET_LENGTH(first), 1) >= 0;
            if (!want && (want = PySet_Contains(c->fd_first, name)) < 0)
                goto out;
            if (want) {
                PyObject *hit = PyDict_GetItemWithError(c->fd_cache, first);
                if (!hit && PyErr_Occurred())
                    goto out;
                if (!hit || !PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) != 3) {
                    ok = 0;      /* not cached yet: Python parses it (and caches it) */
                } else {
                    fd = PyTuple_GET_ITEM(hit, 0);
                    kind = PyTuple_GET_ITEM(hit, 1);
                    target = PyTuple_GET_ITEM(hit, 2);
                    if (kind != Py_None ? !c->has_fd : (fd != Py_None && !c->has_fd))
                        ok = 0;  /* first -y decoration / an undecorated fd: converter */
                    else if (kind != Py_None && PyUnicode_Check(kind)
                             && PyUnicode_Compare(kind, S_FILE) == 0) {
                        int dir = PySet_Contains(c->dir_calls, name);
                        if (dir < 0)
                            goto out;
                        if (dir)
                            kind = S_DIR;
                    }
                }
            }
        }
        if (!ok) {
            rc = 0;
            goto out;
        }
        PyObject *vals[12] = {ts, pid, tid, name, sargs, PyTuple_GET_ITEM(t, 5),
                              PyTuple_GET_ITEM(t, 6), dur, fd, kind, target, Py_False};
        if (emit(&c->em, c->sc_cls, "sc", "fiissISFISSb", vals, 12) < 0)
            goto out;
    }
    if (resumed ? PyDict_DelItem(c->pending, tid) < 0 : PySet_Add(c->names, name) < 0)
        goto out;
    conv_counted(c, PyFloat_AsDouble(line_ts), line_dur != Py_None);
    rc = 1;
out:
    Py_XDECREF(ev);
    Py_XDECREF(first);
    Py_XDECREF(sargs);
    Py_XDECREF(joined);
    Py_XDECREF(waited);
    return rc;
}

void conv_drop(Conv *c)
{
    Py_CLEAR(c->last_entry);
    if (c->em.text != &c->em.own)       /* a RowBuffer: as it was before the run */
        c->em.text->len = c->em.start;
    else if (c->em.rows)
        Py_XDECREF(rows_taken(&c->em.own));     /* dropped */
}

PyObject *conv_end(Conv *c, Py_ssize_t next)
{
    if (c->em.rows && c->em.text == &c->em.own) {   /* the rows, appended as one bytes */
        PyObject *taken = rows_taken(&c->em.own);
        int rc = taken ? PyList_Append(c->em.out, taken) : -1;
        Py_XDECREF(taken);
        if (rc < 0) {
            Py_CLEAR(c->last_entry);
            return NULL;
        }
    }
    PyObject *res = c->lines
        ? Py_BuildValue("(nndOOOn)", next, c->lines, c->last_ts,
                        c->has_dur ? Py_True : Py_False, c->last_entry,
                        c->tail ? Py_True : Py_False, c->made)
        : Py_BuildValue("(nnOOOOn)", next, c->lines, Py_None, c->has_dur ? Py_True : Py_False,
                        c->last_entry, Py_False, c->made);
    Py_CLEAR(c->last_entry);
    return res;
}

PyObject *convert_calls(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    static const char usage[] = "convert_calls(texts, start, ctx, out)";
    if (argc != 4 || !PyList_Check(argv[0])) {
        PyErr_SetString(PyExc_TypeError, usage);
        return NULL;
    }
    PyObject *texts = argv[0];
    Py_ssize_t i = PyLong_AsSsize_t(argv[1]);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    Conv c;
    if (conv_start(&c, argv[2], argv[3], usage) < 0) {
        conv_drop(&c);
        return NULL;
    }
    if (i < 0)
        i = 0;
    for (; i < PyList_GET_SIZE(texts); i++) {
        PyObject *t = split_line_c(PyList_GET_ITEM(texts, i));
        if (!t)
            goto error;
        if (t == UNHANDLED || t == Py_None) {
            Py_DECREF(t);
            break;
        }
        int rc = conv_take(&c, t);
        Py_DECREF(t);
        if (rc < 0)
            goto error;
        if (rc == 0)
            break;
    }
    return conv_end(&c, i);
error:
    conv_drop(&c);
    return NULL;
}

/* set_fallback(name, fn): the Python twin of split_line, scrub or first_arg */
PyObject *set_fallback(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    const char *name = argc == 2 ? PyUnicode_AsUTF8AndSize(argv[0], NULL) : NULL;
    PyObject **slot = !name ? NULL : !strcmp(name, "split_line") ? &FB_SPLIT
                      : !strcmp(name, "scrub") ? &FB_SCRUB
                      : !strcmp(name, "first_arg") ? &FB_FIRST_ARG : NULL;
    if (!slot) {
        PyErr_SetString(PyExc_ValueError, "set_fallback(split_line|scrub|first_arg, fn)");
        return NULL;
    }
    Py_XDECREF(*slot);
    *slot = argv[1] == Py_None ? NULL : argv[1];
    Py_XINCREF(*slot);
    Py_RETURN_NONE;
}

