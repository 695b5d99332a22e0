/* Compiled twins of hangtrace's hottest pure-Python functions (tracer/tracefile/fastpath.py).
 *
 * Each function gives exactly what its Python twin gives, or says it cannot (UNHANDLED, None)
 * and the caller runs the Python twin: tests compare both on real logs and traces.
 *
 *   split_line(text)            strace/lines.py py_split_line, for complete, unfinished and
 *                               resumed calls of ASCII lines; every other line goes to the
 *                               Python twin (set_fallback), or gives UNHANDLED without one
 *   scrub(args)                 events.py scrub_args (string literals -> "..."), ASCII text
 *   first_arg(args)             strace/args.py first_arg, ASCII text
 *   encode_row(prefix, names, fallback, event)
 *                               json.dumps([TAG, *fields], separators=(",", ":")) + "\n" for
 *                               rows of None/bool/int/float/str/tuple-or-list of str;
 *                               fallback(event) for anything else (None: returns None)
 *   float_repr(x)               repr(x), as encode_row writes floats
 *   decode_rows(block, table)   the rows of an ASCII block of trace lines: an event for each
 *                               row whose tag is in table ({tag: (class, nfields, tuple_index,
 *                               slot offsets or None)}) and whose values are JSON scalars or
 *                               arrays of them: class(*values), or its slots filled directly
 *                               (slot_offsets); the line's text for every other line.
 *                               Returns (that list, how many lines it holds as text)
 *   scan_block(block, counter, want_self)
 *                               strace_scan.py's first pass over a bytes block: tid columns
 *                               counted, lines counted, the lines worth parsing
 *
 * Built by scripts/build_fast.py with the machine's C compiler; SOURCE_HASH lets fastpath.py
 * refuse a module built from another version of this file.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef SOURCE_HASH
#define SOURCE_HASH "unknown"
#endif

static PyObject *UNHANDLED;
static PyObject *S_CALL, *S_RESUMED, *S_UNFINISHED;
/* the Python twins, called for what the C code leaves (set_fallbacks) */
static PyObject *FB_SPLIT, *FB_SCRUB, *FB_FIRST_ARG;

static PyObject *fallback(PyObject *fn, PyObject *arg)
{
    if (!fn) {
        Py_INCREF(UNHANDLED);
        return UNHANDLED;
    }
    return PyObject_CallOneArg(fn, arg);
}

/* ------------------------------------------------------------------ helpers */
static Py_ssize_t find_char(const char *s, Py_ssize_t from, Py_ssize_t n, char c)
{
    const char *p = memchr(s + from, c, (size_t)(n - from > 0 ? n - from : 0));
    return p ? (Py_ssize_t)(p - s) : -1;
}

static Py_ssize_t find_str(const char *s, Py_ssize_t from, Py_ssize_t n, const char *w,
                           Py_ssize_t wl)
{
    for (Py_ssize_t i = from; i + wl <= n; i++) {
        const char *p = memchr(s + i, w[0], (size_t)(n - wl + 1 - i));
        if (!p)
            return -1;
        i = p - s;
        if (memcmp(p, w, (size_t)wl) == 0)
            return i;
    }
    return -1;
}

static Py_ssize_t rfind_str(const char *s, Py_ssize_t from, Py_ssize_t n, const char *w,
                            Py_ssize_t wl)
{
    for (Py_ssize_t i = n - wl; i >= from; i--)
        if (s[i] == w[0] && memcmp(s + i, w, (size_t)wl) == 0)
            return i;
    return -1;
}

static int ends_with(const char *s, Py_ssize_t a, Py_ssize_t b, const char *w)
{
    Py_ssize_t wl = (Py_ssize_t)strlen(w);
    return b - a >= wl && memcmp(s + b - wl, w, (size_t)wl) == 0;
}

static PyObject *ascii_str(const char *s, Py_ssize_t a, Py_ssize_t b)
{
    if (b < a)
        b = a;
    PyObject *o = PyUnicode_New(b - a, 127);
    if (o)
        memcpy(PyUnicode_DATA(o), s + a, (size_t)(b - a));
    return o;
}

/* int(text[a:b], base) with Python's semantics: a fast path for plain digits, else int()
 * itself. Returns NULL with no exception set when int() would raise ValueError. */
static PyObject *py_int(const char *s, Py_ssize_t a, Py_ssize_t b, int base)
{
    Py_ssize_t i = a;
    int neg = 0;
    if (base == 10) {
        while (i < b && s[i] == ' ')      /* int() strips whitespace */
            i++;
        if (i < b && s[i] == '-') {
            neg = 1;
            i++;
        }
        if (b - i >= 1 && b - i <= 18) {
            long long v = 0;
            Py_ssize_t j = i;
            for (; j < b && s[j] >= '0' && s[j] <= '9'; j++)
                v = v * 10 + (s[j] - '0');
            if (j == b)
                return PyLong_FromLongLong(neg ? -v : v);
        }
    } else if (b - a > 2 && b - a <= 18 && s[a] == '0' && (s[a + 1] == 'x' || s[a + 1] == 'X')) {
        unsigned long long v = 0;
        Py_ssize_t j = a + 2;
        for (; j < b; j++) {
            char c = s[j];
            int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                    : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
            if (d < 0)
                break;
            v = v * 16 + (unsigned)d;
        }
        if (j == b)
            return PyLong_FromUnsignedLongLong(v);
    }
    PyObject *sub = ascii_str(s, a, b);
    if (!sub)
        return NULL;
    PyObject *r = PyLong_FromUnicodeObject(sub, base);
    Py_DECREF(sub);
    if (!r && PyErr_ExceptionMatches(PyExc_ValueError))
        PyErr_Clear();
    return r;
}

/* float(text[a:b]); NULL, no exception set, where float() raises ValueError. */
/* Decimal "digits[.digits][e[+-]digits]" -> the correctly rounded double, when the digits
 * (an integer <= 2**53, so exactly representable) and the power of ten (|k| <= 22, exact too)
 * let one
 * IEEE multiplication or division do it (Clinger's fast path): the same double strtod gives.
 * 1: *out set; 0: not this shape. */
static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21,
                               1e22};

static int clinger(const char *s, Py_ssize_t a, Py_ssize_t b, double *out)
{
    Py_ssize_t i = a;
    int neg = 0;
    if (i < b && s[i] == '-') {
        neg = 1;
        i++;
    }
    long long m = 0;
    int digits = 0, frac = 0, seen_dot = 0, any = 0;
    for (; i < b; i++) {
        char c = s[i];
        if (c >= '0' && c <= '9') {
            any = 1;
            if (m == 0 && c == '0') {        /* leading zeros are not significant */
                if (seen_dot)
                    frac++;
                continue;
            }
            if (++digits > 16)
                return 0;
            m = m * 10 + (c - '0');
            if (seen_dot)
                frac++;
        } else if (c == '.' && !seen_dot) {
            seen_dot = 1;
        } else {
            break;
        }
    }
    if (!any || m > (1LL << 53))         /* an exact double: at most 2**53 */
        return 0;
    int e = 0;
    if (i < b && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        int eneg = 0;
        if (i < b && (s[i] == '+' || s[i] == '-'))
            eneg = s[i++] == '-';
        if (i >= b)
            return 0;
        for (; i < b && s[i] >= '0' && s[i] <= '9'; i++) {
            e = e * 10 + (s[i] - '0');
            if (e > 400)
                return 0;
        }
        if (eneg)
            e = -e;
    }
    if (i != b)
        return 0;
    int k = e - frac;
    double v = (double)m;
    if (k >= 0 && k <= 22)
        v *= POW10[k];
    else if (k < 0 && k >= -22)
        v /= POW10[-k];
    else
        return 0;
    *out = neg ? -v : v;
    return 1;
}

static PyObject *py_float(const char *s, Py_ssize_t a, Py_ssize_t b, double *out)
{
    char buf[64];
    if (b > a && s[a] != '-' && clinger(s, a, b, out))
        return Py_True;
    int plain = b - a > 0 && b - a < (Py_ssize_t)sizeof(buf);
    for (Py_ssize_t i = a; plain && i < b; i++)
        plain = (s[i] >= '0' && s[i] <= '9') || s[i] == '.';
    if (plain) {
        memcpy(buf, s + a, (size_t)(b - a));
        buf[b - a] = 0;
        char *end = NULL;
        double v = PyOS_string_to_double(buf, &end, NULL);
        if (v == -1.0 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_ValueError))
                return NULL;
            PyErr_Clear();             /* no number at all: float() raises ValueError */
            return NULL;
        }
        if (end == buf + (b - a)) {
            *out = v;
            return Py_True;            /* a marker: *out holds the value */
        }
        return NULL;                   /* "1.2.3": float() raises ValueError */
    }
    PyObject *sub = ascii_str(s, a, b);
    if (!sub)
        return NULL;
    PyObject *r = PyFloat_FromString(sub);
    Py_DECREF(sub);
    if (!r) {
        if (PyErr_ExceptionMatches(PyExc_ValueError))
            PyErr_Clear();
        return NULL;
    }
    *out = PyFloat_AS_DOUBLE(r);
    Py_DECREF(r);
    return Py_True;
}

/* ------------------------------------------------------------------ split_line */
#define NONE_OR(x) ((x) ? (x) : (Py_INCREF(Py_None), Py_None))

static PyObject *result_tuple(PyObject *tid, PyObject *ts, PyObject *kind, PyObject *name,
                              PyObject *args, PyObject *ret, PyObject *err, PyObject *ret_text,
                              PyObject *dur, int tod)
{
    /* steals every reference given (NULL = None) */
    PyObject *t = PyTuple_New(15);
    if (!t) {
        Py_XDECREF(tid); Py_XDECREF(ts); Py_XDECREF(name); Py_XDECREF(args); Py_XDECREF(ret);
        Py_XDECREF(err); Py_XDECREF(ret_text); Py_XDECREF(dur);
        return NULL;
    }
    Py_INCREF(kind);
    PyTuple_SET_ITEM(t, 0, NONE_OR(tid));
    PyTuple_SET_ITEM(t, 1, NONE_OR(ts));
    PyTuple_SET_ITEM(t, 2, kind);
    PyTuple_SET_ITEM(t, 3, name);
    PyTuple_SET_ITEM(t, 4, args);
    PyTuple_SET_ITEM(t, 5, NONE_OR(ret));
    PyTuple_SET_ITEM(t, 6, NONE_OR(err));
    PyTuple_SET_ITEM(t, 7, NONE_OR(ret_text));
    PyTuple_SET_ITEM(t, 8, NONE_OR(dur));
    Py_INCREF(Py_None); PyTuple_SET_ITEM(t, 9, Py_None);
    Py_INCREF(Py_None); PyTuple_SET_ITEM(t, 10, Py_None);
    Py_INCREF(Py_False); PyTuple_SET_ITEM(t, 11, Py_False);
    Py_INCREF(Py_None); PyTuple_SET_ITEM(t, 12, Py_None);
    PyObject *b = tod ? Py_True : Py_False;
    Py_INCREF(b); PyTuple_SET_ITEM(t, 13, b);
    Py_INCREF(Py_None); PyTuple_SET_ITEM(t, 14, Py_None);
    return t;
}

#define RETURN_NONE_CLEAN() do { Py_XDECREF(tid); Py_XDECREF(ts); Py_RETURN_NONE; } while (0)

/* lines.py _parse_result over s[bs:be] */
static PyObject *parse_result(const char *s, Py_ssize_t bs, Py_ssize_t be, PyObject *tid,
                              PyObject *ts, int tod, PyObject *kind, Py_ssize_t na,
                              Py_ssize_t nb)
{
    PyObject *name = NULL, *args = NULL, *ret = NULL, *err = NULL, *ret_text = NULL,
             *dur = NULL;
    if (be - bs >= 4 && memcmp(s + be - 4, "...>", 4) == 0) {
        Py_ssize_t ae = -1;
        if (ends_with(s, bs, be, "<unfinished ...>"))
            ae = be - 16;
        else if (ends_with(s, bs, be, "<detached ...>"))
            ae = be - 14;
        if (ae >= 0) {
            if (ae > bs && s[ae - 1] == ' ')
                ae--;
            name = ascii_str(s, na, nb);
            args = name ? ascii_str(s, bs, ae) : NULL;
            if (!args) {
                Py_XDECREF(name); Py_XDECREF(tid); Py_XDECREF(ts);
                return NULL;
            }
            return result_tuple(tid, ts, S_UNFINISHED, name, args, NULL, NULL, NULL, NULL, tod);
        }
    }
    if (be > bs && s[be - 1] == '>') {
        Py_ssize_t i = rfind_str(s, bs, be, " <", 2);
        if (i > bs) {
            double v;
            if (py_float(s, i + 2, be - 1, &v)) {
                dur = PyFloat_FromDouble(v);
                if (!dur) {
                    Py_XDECREF(tid); Py_XDECREF(ts);
                    return NULL;
                }
                be = i;
            } else if (PyErr_Occurred()) {
                Py_XDECREF(tid); Py_XDECREF(ts);
                return NULL;
            }
        }
    }
    Py_ssize_t eq = rfind_str(s, bs, be, " = ", 3);
    if (eq < 0) {
        Py_XDECREF(dur);
        RETURN_NONE_CLEAN();
    }
    Py_ssize_t he = eq;
    while (he > bs && s[he - 1] == ' ')
        he--;
    if (he <= bs || s[he - 1] != ')') {
        Py_XDECREF(dur);
        RETURN_NONE_CLEAN();
    }
    Py_ssize_t ae = he - 1;
    int resumed_cut = kind == S_RESUMED && ae - bs == 17
        && memcmp(s + bs, " <unfinished ...>", 17) == 0;
    Py_ssize_t rs = eq + 3, re_ = be;           /* retpart */
    Py_ssize_t sp = find_char(s, rs, re_, ' ');
    Py_ssize_t ts_ = rs, te = sp < 0 ? re_ : sp; /* tok */
    Py_ssize_t xs = sp < 0 ? re_ : sp + 1, xe = re_;  /* extra */
    if (!(te - ts_ == 1 && s[ts_] == '?')) {
        Py_ssize_t lt = find_char(s, ts_, te, '<');
        if (lt > ts_) {
            ret_text = ascii_str(s, lt, re_);
            if (!ret_text)
                goto fail;
            te = lt;
            xs = xe;
        }
        int hex = te - ts_ >= 2 && s[ts_ + 1] == 'x';
        ret = py_int(s, ts_, te, hex ? 16 : 10);
        if (!ret) {
            if (PyErr_Occurred())
                goto fail;
            Py_XDECREF(ret_text); Py_XDECREF(dur);
            RETURN_NONE_CLEAN();
        }
    }
    if (xe > xs) {
        if (s[xs] == 'E') {
            Py_ssize_t j = find_char(s, xs, xe, ' ');
            err = ascii_str(s, xs, j < 0 ? xe : j);
            if (!err)
                goto fail;
            if (j > xs) {
                Py_ssize_t a = j + 1, b = xe;
                while (a < b && (s[a] == '(' || s[a] == ')'))
                    a++;
                while (b > a && (s[b - 1] == '(' || s[b - 1] == ')'))
                    b--;
                Py_XDECREF(ret_text);
                ret_text = ascii_str(s, a, b);
                if (!ret_text)
                    goto fail;
            }
        } else if (s[xs] == '(') {
            Py_XDECREF(ret_text);
            ret_text = ascii_str(s, xs + 1, s[xe - 1] == ')' ? xe - 1 : xe);
            if (!ret_text)
                goto fail;
            if (ret && PyLong_CheckExact(ret) && PyLong_AsLong(ret) == -1 && xe - (xs + 1) >= 6
                    && memcmp(s + xs + 1, "errno ", 6) == 0) {
                Py_INCREF(ret_text);
                err = ret_text;
            }
            if (PyErr_Occurred())
                PyErr_Clear();        /* PyLong_AsLong overflow: not -1 */
        } else {
            Py_XDECREF(ret_text);
            ret_text = ascii_str(s, xs, xe);
            if (!ret_text)
                goto fail;
        }
    }
    name = ascii_str(s, na, nb);
    if (!name)
        goto fail;
    args = resumed_cut ? PyUnicode_New(0, 127) : ascii_str(s, bs, ae);
    if (!args) {
        Py_DECREF(name);
        goto fail;
    }
    return result_tuple(tid, ts, kind, name, args, ret, err, ret_text, dur, tod);
fail:
    Py_XDECREF(tid); Py_XDECREF(ts); Py_XDECREF(ret); Py_XDECREF(err); Py_XDECREF(ret_text);
    Py_XDECREF(dur);
    return NULL;
}

static PyObject *split_line_c(PyObject *text);

static PyObject *split_line(PyObject *self, PyObject *text)
{
    PyObject *r = split_line_c(text);
    if (r == UNHANDLED && FB_SPLIT) {
        Py_DECREF(r);
        return PyObject_CallOneArg(FB_SPLIT, text);
    }
    return r;
}

static PyObject *split_line_c(PyObject *text)
{
    if (!PyUnicode_Check(text) || !PyUnicode_IS_ASCII(text)) {
        Py_INCREF(UNHANDLED);
        return UNHANDLED;
    }
    const char *s = (const char *)PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        n--;
    if (n == 0)
        Py_RETURN_NONE;
    PyObject *tid = NULL, *ts = NULL;
    Py_ssize_t pos = 0;
    char c = s[0];
    if (c == '[' && n >= 5 && memcmp(s, "[pid ", 5) == 0) {
        Py_ssize_t end = find_char(s, 5, n, ']');
        if (end < 0)
            Py_RETURN_NONE;
        tid = py_int(s, 5, end, 10);
        if (!tid) {
            if (PyErr_Occurred())
                return NULL;
            Py_RETURN_NONE;
        }
        pos = end + 1;
    } else if (c >= '0' && c <= '9') {
        Py_ssize_t sp = find_char(s, 0, n, ' ');
        if (sp < 0)
            Py_RETURN_NONE;
        int digits = 1;
        for (Py_ssize_t i = 0; i < sp && digits; i++)
            digits = s[i] >= '0' && s[i] <= '9';
        if (digits) {
            tid = py_int(s, 0, sp, 10);
            if (!tid)
                return NULL;
            pos = sp;
        }
    }
    while (pos < n && s[pos] == ' ')
        pos++;
    int tod = 0;
    if (pos < n && s[pos] >= '0' && s[pos] <= '9') {
        Py_ssize_t sp = find_char(s, pos, n, ' ');
        if (sp < 0)
            RETURN_NONE_CLEAN();
        double v;
        if (sp - pos >= 3 && s[pos + 2] == ':') {
            PyObject *h = py_int(s, pos, pos + 2, 10);
            PyObject *m = h ? py_int(s, pos + 3, pos + 5 < sp ? pos + 5 : sp, 10) : NULL;
            double f;
            PyObject *ok = m ? py_float(s, pos + 6 < sp ? pos + 6 : sp, sp, &f) : NULL;
            if (!ok) {
                Py_XDECREF(h); Py_XDECREF(m);
                if (PyErr_Occurred()) {
                    Py_XDECREF(tid);
                    return NULL;
                }
                RETURN_NONE_CLEAN();
            }
            v = (double)(PyLong_AsLongLong(h) * 3600 + PyLong_AsLongLong(m) * 60) + f;
            Py_DECREF(h); Py_DECREF(m);
            tod = 1;
        } else if (!py_float(s, pos, sp, &v)) {
            if (PyErr_Occurred()) {
                Py_XDECREF(tid);
                return NULL;
            }
            RETURN_NONE_CLEAN();
        }
        ts = PyFloat_FromDouble(v);
        if (!ts) {
            Py_XDECREF(tid);
            return NULL;
        }
        pos = sp + 1;
        while (pos < n && s[pos] == ' ')
            pos++;
    }
    if (pos >= n)
        RETURN_NONE_CLEAN();
    c = s[pos];
    if (c == '<') {
        if (n - pos < 5 || memcmp(s + pos, "<... ", 5) != 0)
            RETURN_NONE_CLEAN();
        Py_ssize_t e = find_str(s, pos + 5, n, " resumed>", 9);
        if (e < 0)
            RETURN_NONE_CLEAN();
        return parse_result(s, e + 9, n, tid, ts, tod, S_RESUMED, pos + 5, e);
    }
    if (c == '[' || c == '+' || c == '-')
        goto unhandled;              /* strace -n numbers, markers: the Python parse */
    Py_ssize_t p = find_char(s, pos, n, '(');
    if (p <= pos)
        goto unhandled;
    if (memchr(s + pos, ' ', (size_t)(p - pos)))
        goto unhandled;
    return parse_result(s, p + 1, n, tid, ts, tod, S_CALL, pos, p);
unhandled:
    Py_XDECREF(tid);
    Py_XDECREF(ts);
    Py_INCREF(UNHANDLED);
    return UNHANDLED;
}

/* ------------------------------------------------------------------ scrub */
static PyObject *scrub(PyObject *self, PyObject *text)
{
    if (!PyUnicode_Check(text) || !PyUnicode_IS_ASCII(text))
        return fallback(FB_SCRUB, text);
    const char *s = (const char *)PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    Py_ssize_t q = find_char(s, 0, n, '"');
    if (q < 0) {
        Py_INCREF(text);
        return text;
    }
    char *out = PyMem_Malloc((size_t)n * 3 + 8);   /* "" -> "..." grows 2 chars by 3 */
    if (!out)
        return PyErr_NoMemory();
    Py_ssize_t o = 0, copied = 0, i = q;
    while (i >= 0 && i < n) {
        /* the regex "(?:[^"\\]|\\.)*"(?:\.\.\.)? tried at the quote at i */
        Py_ssize_t j = i + 1;
        int ok = 0;
        while (j < n) {
            if (s[j] == '"') {
                ok = 1;
                break;
            }
            if (s[j] == '\\') {
                if (j + 1 < n && s[j + 1] != '\n') {
                    j += 2;
                    continue;
                }
                break;
            }
            j++;
        }
        if (!ok) {
            i = find_char(s, i + 1, n, '"');
            continue;
        }
        Py_ssize_t end = j + 1;
        if (end + 3 <= n && memcmp(s + end, "...", 3) == 0)
            end += 3;
        memcpy(out + o, s + copied, (size_t)(i - copied));
        o += i - copied;
        memcpy(out + o, "\"...\"", 5);
        o += 5;
        copied = end;
        i = find_char(s, end, n, '"');
    }
    memcpy(out + o, s + copied, (size_t)(n - copied));
    o += n - copied;
    PyObject *r = ascii_str(out, 0, o);
    PyMem_Free(out);
    return r;
}

/* ------------------------------------------------------------------ first_arg */
/* strace/args.py decoration_end: the '>' closing the decoration that opens at s[lt] */
static Py_ssize_t decoration_end(const char *s, Py_ssize_t n, Py_ssize_t lt)
{
    Py_ssize_t j = find_char(s, lt, n, '>');
    while (j != -1) {
        Py_ssize_t lts = 0, gts = 0, arrows = 0;
        for (Py_ssize_t i = lt; i <= j; i++) {
            if (s[i] == '<')
                lts++;
            else if (s[i] == '>')
                gts++;
            else if (s[i] == '-' && i + 1 <= j && s[i + 1] == '>')
                arrows++;
        }
        if (lts == gts - arrows) {
            if (n - (j + 1) >= 9 && memcmp(s + j + 1, "(deleted)", 9) == 0)
                j += 9;
            return j;
        }
        j = find_char(s, j + 1, n, '>');
    }
    return -1;
}

static PyObject *first_arg(PyObject *self, PyObject *text)
{
    if (!PyUnicode_Check(text) || !PyUnicode_IS_ASCII(text))
        return fallback(FB_FIRST_ARG, text);
    const char *s = (const char *)PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    Py_ssize_t comma = find_str(s, 0, n, ", ", 2);
    Py_ssize_t lt = find_char(s, 0, n, '<');
    if (lt < 0 || (comma >= 0 && comma < lt)) {
        if (comma < 0) {
            Py_INCREF(text);
            return text;
        }
        return ascii_str(s, 0, comma);
    }
    Py_ssize_t end = decoration_end(s, n, lt);
    if (end < 0) {
        Py_INCREF(text);
        return text;
    }
    return ascii_str(s, 0, end + 1);
}

/* ------------------------------------------------------------------ encode_row */
typedef struct {
    char *p;
    Py_ssize_t n, cap;
} Buf;

static int buf_grow(Buf *b, Py_ssize_t more)
{
    if (b->n + more <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap * 2 + more + 64;
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static int buf_add(Buf *b, const char *s, Py_ssize_t n)
{
    if (buf_grow(b, n) < 0)
        return -1;
    memcpy(b->p + b->n, s, (size_t)n);
    b->n += n;
    return 0;
}

static const char HEX[] = "0123456789abcdef";

static int add_u(Buf *b, Py_UCS4 c)
{
    char e[6] = {'\\', 'u', HEX[(c >> 12) & 15], HEX[(c >> 8) & 15], HEX[(c >> 4) & 15],
                 HEX[c & 15]};
    return buf_add(b, e, 6);
}

/* json's encode_basestring_ascii */
static int add_json_str(Buf *b, PyObject *str)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(str);
    int kind = PyUnicode_KIND(str);
    const void *data = PyUnicode_DATA(str);
    if (buf_grow(b, n + 2) < 0 || buf_add(b, "\"", 1) < 0)
        return -1;
    if (PyUnicode_IS_ASCII(str)) {       /* runs of plain characters in one copy */
        const char *a = (const char *)data;
        Py_ssize_t i = 0;
        while (i < n) {
            Py_ssize_t j = i;
            while (j < n && a[j] >= ' ' && a[j] <= '~' && a[j] != '\\' && a[j] != '"')
                j++;
            if (j > i && buf_add(b, a + i, j - i) < 0)
                return -1;
            if (j >= n)
                break;
            const char *esc = NULL;
            switch (a[j]) {
            case '\\': esc = "\\\\"; break;
            case '"': esc = "\\\""; break;
            case '\b': esc = "\\b"; break;
            case '\f': esc = "\\f"; break;
            case '\n': esc = "\\n"; break;
            case '\r': esc = "\\r"; break;
            case '\t': esc = "\\t"; break;
            }
            if (esc ? buf_add(b, esc, 2) < 0 : add_u(b, (Py_UCS4)(unsigned char)a[j]) < 0)
                return -1;
            i = j + 1;
        }
        return buf_add(b, "\"", 1);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= ' ' && c <= '~' && c != '\\' && c != '"') {
            char ch = (char)c;
            if (buf_add(b, &ch, 1) < 0)
                return -1;
            continue;
        }
        const char *esc = NULL;
        switch (c) {
        case '\\': esc = "\\\\"; break;
        case '"': esc = "\\\""; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        }
        if (esc) {
            if (buf_add(b, esc, 2) < 0)
                return -1;
        } else if (c >= 0x10000) {
            Py_UCS4 v = c - 0x10000;
            if (add_u(b, 0xd800 | ((v >> 10) & 0x3ff)) < 0 || add_u(b, 0xdc00 | (v & 0x3ff)) < 0)
                return -1;
        } else if (add_u(b, c) < 0) {
            return -1;
        }
    }
    return buf_add(b, "\"", 1);
}

/* repr(x) without David Gay's dtoa for the floats strace logs are made of: microsecond
 * timestamps and durations. For 1e-6 <= |x| < 2**33 the candidate is x rounded to 6 decimals;
 * when it parses back to exactly x it is repr's string: every string that parses to x lies
 * within one ulp (< 1e-6 here) of it, so no other multiple of 1e-6 does, and a string with
 * fewer significant digits than the candidate is such a multiple. Layout as repr ('r' format):
 * exponent form when the decimal point is at or left of the 4th place or right of the 16th.
 * Returns the length written to out (>= 32 bytes), 0 when the caller must use repr. */
static int fast_repr(double x, char *out)
{
    double ax = fabs(x);
    if (!(ax >= 1e-6 && ax < 8589934592.0))
        return 0;
    long long N = llround(ax * 1e6);
    char dig[24];
    int nd = 0;
    long long t = N;
    while (t) {
        dig[nd++] = (char)('0' + t % 10);
        t /= 10;
    }
    if (nd == 0)
        return 0;
    for (int i = 0; i < nd / 2; i++) {        /* most significant first */
        char c = dig[i];
        dig[i] = dig[nd - 1 - i];
        dig[nd - 1 - i] = c;
    }
    int decpt = nd - 6;                        /* digits before the decimal point */
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    int k = 0;
    if (x < 0)
        out[k++] = '-';
    if (decpt <= -4 || decpt > 16) {
        out[k++] = dig[0];
        if (nd > 1) {
            out[k++] = '.';
            memcpy(out + k, dig + 1, (size_t)(nd - 1));
            k += nd - 1;
        }
        int e = decpt - 1;
        out[k++] = 'e';
        out[k++] = e < 0 ? '-' : '+';
        if (e < 0)
            e = -e;
        if (e >= 100)
            out[k++] = (char)('0' + e / 100);
        out[k++] = (char)('0' + (e / 10) % 10);
        out[k++] = (char)('0' + e % 10);
    } else if (decpt <= 0) {
        out[k++] = '0';
        out[k++] = '.';
        for (int i = 0; i < -decpt; i++)
            out[k++] = '0';
        memcpy(out + k, dig, (size_t)nd);
        k += nd;
    } else if (decpt >= nd) {
        memcpy(out + k, dig, (size_t)nd);
        k += nd;
        for (int i = nd; i < decpt; i++)
            out[k++] = '0';
        out[k++] = '.';
        out[k++] = '0';
    } else {
        memcpy(out + k, dig, (size_t)decpt);
        k += decpt;
        out[k++] = '.';
        memcpy(out + k, dig + decpt, (size_t)(nd - decpt));
        k += nd - decpt;
    }
    out[k] = 0;
    /* the candidate's value is N / 10**6; N < 2**53 and 10**6 are exact doubles, so one
     * division rounds it correctly (as strtod of the candidate would) */
    return ((double)N / 1e6 == ax) ? k : 0;
}

/* 1: added; 0: a value json.dumps would write some other way (caller falls back); -1 error */
static int add_value(Buf *b, PyObject *v, int depth)
{
    if (v == Py_None)
        return buf_add(b, "null", 4) < 0 ? -1 : 1;
    if (v == Py_True)
        return buf_add(b, "true", 4) < 0 ? -1 : 1;
    if (v == Py_False)
        return buf_add(b, "false", 5) < 0 ? -1 : 1;
    if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow == 0) {
            if (x == -1 && PyErr_Occurred())
                return -1;
            char tmp[32];
            int k = 32;
            unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
            do {
                tmp[--k] = (char)('0' + u % 10);
                u /= 10;
            } while (u);
            if (x < 0)
                tmp[--k] = '-';
            return buf_add(b, tmp + k, 32 - k) < 0 ? -1 : 1;
        }
        PyObject *r = PyObject_Str(v);
        if (!r)
            return -1;
        int rc = buf_add(b, PyUnicode_AsUTF8(r), PyUnicode_GET_LENGTH(r));
        Py_DECREF(r);
        return rc < 0 ? -1 : 1;
    }
    if (PyFloat_CheckExact(v)) {
        double x = PyFloat_AS_DOUBLE(v);
        if (!isfinite(x))
            return 0;
        char tmp[48];
        int k = fast_repr(x, tmp);
        if (k > 0)
            return buf_add(b, tmp, k) < 0 ? -1 : 1;
        char *r = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (!r)
            return -1;
        int rc = buf_add(b, r, (Py_ssize_t)strlen(r));
        PyMem_Free(r);
        return rc < 0 ? -1 : 1;
    }
    if (PyUnicode_CheckExact(v))
        return add_json_str(b, v) < 0 ? -1 : 1;
    if (depth == 0 && (PyTuple_CheckExact(v) || PyList_CheckExact(v))) {
        Py_ssize_t k = PySequence_Fast_GET_SIZE(v);
        if (buf_add(b, "[", 1) < 0)
            return -1;
        for (Py_ssize_t i = 0; i < k; i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(v, i);
            if (!PyUnicode_CheckExact(item))
                return 0;
            if ((i && buf_add(b, ",", 1) < 0) || add_json_str(b, item) < 0)
                return -1;
        }
        return buf_add(b, "]", 1) < 0 ? -1 : 1;
    }
    return 0;
}

/* encode_row(prefix, names, fallback, event): partial(encode_row, prefix, names, fallback) is
 * a row formatter for one class; fallback(event) writes the rows it cannot */
static PyObject *encode_row(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 4 || !PyUnicode_Check(argv[0]) || !PyTuple_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "encode_row(prefix, names, fallback, event)");
        return NULL;
    }
    PyObject *obj = argv[3], *names = argv[1];
    Py_ssize_t plen;
    const char *prefix = PyUnicode_AsUTF8AndSize(argv[0], &plen);
    if (!prefix)
        return NULL;
    Buf b = {NULL, 0, 0};
    int rc = buf_add(&b, prefix, plen);
    Py_ssize_t k = PyTuple_GET_SIZE(names);
    for (Py_ssize_t i = 0; rc >= 0 && i < k; i++) {
        PyObject *v = PyObject_GetAttr(obj, PyTuple_GET_ITEM(names, i));
        if (!v) {
            rc = -1;
            break;
        }
        if (i)
            rc = buf_add(&b, ",", 1);
        if (rc >= 0) {
            rc = add_value(&b, v, 0);
            if (rc == 0) {
                Py_DECREF(v);
                PyMem_Free(b.p);
                if (argv[2] == Py_None)
                    Py_RETURN_NONE;
                return PyObject_CallOneArg(argv[2], obj);
            }
        }
        Py_DECREF(v);
    }
    if (rc >= 0)
        rc = buf_add(&b, "]\n", 2);
    PyObject *r = rc < 0 ? NULL : ascii_str(b.p, 0, b.n);
    PyMem_Free(b.p);
    return r;
}

/* ------------------------------------------------------------------ convert_calls */
/* convert_calls(texts, start, ctx, rows) -> (next, lines, last_ts, has_dur)
 *
 * strace/convert.py StraceConverter.rows_batch's fast path, line after line from texts[start]:
 * a line that split_line reads as a complete call of a known thread (pid column, -ttt
 * timestamp, no -n number) whose name is not in ctx's special set becomes the row text of the
 * event decode.to_event builds for it, appended to rows:
 *   - read/write family and ioctl: decode.py's _rw and _ioctl done here (through the fd,
 *     ioctl-request and NVIDIA-name memo dicts Python fills);
 *   - another name in builders: builders[name](ts, pid, tid, name, args, sargs, ret, err,
 *     dur, False) (Python), whose ValueError/IndexError means a plain Syscall, as to_event;
 *   - else a plain Syscall: scrubbed args, the first argument as an fd through the fd cache,
 *     "dir" for a directory call.
 * Written with encode_row's text for the event's class (formats: class -> (prefix, names)).
 * It stops at the first other line (next = its index), and at a line whose fd the cache does
 * not hold yet or whose event needs the converter (its fd tables, its first -y decoration):
 * Python takes that line. ctx = (tid_pid, names, special, builders, fd_first, dir_calls,
 * fd_cache, has_fd, formats, write_calls, read_calls, ioctl_cache, nv_cache). lines, last_ts (None when no line was taken) and has_dur are
 * what the converter's counters get. */
static PyObject *S_DIR, *S_FILE, *S_FD, *S_FD_KIND, *S_WR, *S_RD, *S_IO;

/* 1: written to b; 0: for Python; -1: error */
static int encode_event(Buf *b, PyObject *e, PyObject *formats)
{
    PyObject *fmt = PyDict_GetItemWithError(formats, (PyObject *)Py_TYPE(e));
    if (!fmt)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *names = PyTuple_GET_ITEM(fmt, 1);
    Py_ssize_t plen;
    const char *prefix = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(fmt, 0), &plen);
    if (!prefix || buf_add(b, prefix, plen) < 0)
        return -1;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(names); k++) {
        PyObject *v = PyObject_GetAttr(e, PyTuple_GET_ITEM(names, k));
        if (!v)
            return -1;
        int rc = k ? buf_add(b, ",", 1) : 0;
        if (rc >= 0)
            rc = add_value(b, v, 0);
        Py_DECREF(v);
        if (rc <= 0)
            return rc;
    }
    return buf_add(b, "]\n", 2) < 0 ? -1 : 1;
}

/* decode.py's _rw and _ioctl builders for a complete call, written as their row: 1 written,
 * 0 for Python (a cache it needs is not filled yet, or the event needs the converter's fd
 * tables or its first -y decoration), -1 error */
static int native_call(Buf *b, PyObject *tag, PyObject *ts, PyObject *pid, PyObject *tid,
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
    if (tag == S_IO) {
        /* rest = args[len(first) + 2:]; the request text; its memoised decoding */
        Py_ssize_t alen = PyUnicode_GET_LENGTH(args), flen = PyUnicode_GET_LENGTH(first);
        Py_ssize_t rs = flen + 2 < alen ? flen + 2 : alen, re_ = alen;
        const char *a = PyUnicode_AsUTF8(args);
        if (!a || !PyUnicode_IS_ASCII(args))
            goto out;
        if (re_ - rs >= 5 && memcmp(a + rs, "_IOC(", 5) == 0) {
            Py_ssize_t p = find_char(a, rs, re_, ')');
            re_ = p < 0 ? rs : p + 1;
        } else {
            Py_ssize_t c = find_str(a, rs, re_, ", ", 2);
            if (c >= 0)
                re_ = c;
        }
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
        const char *nm = PyUnicode_AsUTF8(name);
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
    Py_ssize_t plen;
    const char *prefix = PyUnicode_AsUTF8AndSize(tag, &plen);
    rc = prefix ? buf_add(b, prefix, plen) : -1;
    for (int k = 0; rc >= 0 && k < 12 + ntail; k++) {
        if (k)
            rc = buf_add(b, ",", 1);
        if (rc >= 0)
            rc = add_value(b, vals[k], 0);
        if (rc == 0)
            goto out;               /* a value json writes otherwise: Python */
    }
    if (rc >= 0)
        rc = buf_add(b, "]\n", 2) < 0 ? -1 : 1;
out:
    Py_DECREF(first);
    Py_XDECREF(nv_key);
    Py_XDECREF(nbytes);
    if (rc < 0 && !PyErr_Occurred())
        rc = 0;
    return rc;
}

static PyObject *convert_calls(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 4 || !PyList_Check(argv[0]) || !PyTuple_Check(argv[2])
            || PyTuple_GET_SIZE(argv[2]) != 13 || !PyList_Check(argv[3])) {
        PyErr_SetString(PyExc_TypeError, "convert_calls(texts, start, ctx, rows)");
        return NULL;
    }
    PyObject *texts = argv[0], *rows = argv[3], *ctx = argv[2];
    Py_ssize_t i = PyLong_AsSsize_t(argv[1]);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    PyObject *tid_pid = PyTuple_GET_ITEM(ctx, 0), *names = PyTuple_GET_ITEM(ctx, 1),
             *special = PyTuple_GET_ITEM(ctx, 2), *builders = PyTuple_GET_ITEM(ctx, 3),
             *fd_first = PyTuple_GET_ITEM(ctx, 4), *dir_calls = PyTuple_GET_ITEM(ctx, 5),
             *fd_cache = PyTuple_GET_ITEM(ctx, 6), *formats = PyTuple_GET_ITEM(ctx, 8),
             *write_calls = PyTuple_GET_ITEM(ctx, 9), *read_calls = PyTuple_GET_ITEM(ctx, 10),
             *ioctl_cache = PyTuple_GET_ITEM(ctx, 11), *nv_cache = PyTuple_GET_ITEM(ctx, 12);
    int has_fd = PyObject_IsTrue(PyTuple_GET_ITEM(ctx, 7));
    Py_ssize_t n = PyList_GET_SIZE(texts), lines = 0;
    int has_dur = 0;
    double last_ts = 0;
    Buf b = {NULL, 0, 0};
    for (; i < n; i++) {
        PyObject *t = split_line_c(PyList_GET_ITEM(texts, i));
        if (!t)
            goto error;
        if (t == UNHANDLED || t == Py_None) {
            Py_DECREF(t);
            break;
        }
        PyObject *tid = PyTuple_GET_ITEM(t, 0), *ts = PyTuple_GET_ITEM(t, 1),
                 *name = PyTuple_GET_ITEM(t, 3), *args = PyTuple_GET_ITEM(t, 4),
                 *dur = PyTuple_GET_ITEM(t, 8);
        PyObject *pid = NULL, *builder = NULL, *first = NULL, *sargs = NULL, *ev = NULL;
        int ok = PyTuple_GET_ITEM(t, 2) == S_CALL && tid != Py_None && ts != Py_None
                 && PyTuple_GET_ITEM(t, 13) == Py_False && PyTuple_GET_ITEM(t, 14) == Py_None;
        int rc;
        if (ok) {
            int sp = PySet_Contains(special, name);
            if (sp < 0)
                goto error_t;
            ok = !sp;
        }
        if (ok) {
            pid = PyDict_GetItemWithError(tid_pid, tid);
            if (!pid && PyErr_Occurred())
                goto error_t;
            ok = pid != NULL;
        }
        if (!ok) {
            Py_DECREF(t);
            break;
        }
        sargs = PyUnicode_FindChar(args, '"', 0, PyUnicode_GET_LENGTH(args), 1) >= 0
                ? scrub(NULL, args) : (Py_INCREF(args), args);
        if (!sargs)
            goto error_t;
        if (sargs == UNHANDLED) {
            Py_DECREF(sargs);
            Py_DECREF(t);
            break;
        }
        builder = PyDict_GetItemWithError(builders, name);
        if (!builder && PyErr_Occurred())
            goto error_t;
        b.n = 0;
        rc = 0;
        if (builder) {
            int w = PySet_Contains(write_calls, name), r = w ? 0 : PySet_Contains(read_calls, name);
            int io = (w || r) ? 0 : PyUnicode_CompareWithASCIIString(name, "ioctl") == 0;
            if (w < 0 || r < 0)
                goto error_t;
            if (w || r || io) {
                rc = native_call(&b, w ? S_WR : r ? S_RD : S_IO, ts, pid, tid, name, args, sargs,
                                 t, fd_cache, ioctl_cache, nv_cache, has_fd);
                if (rc < 0)
                    goto error_t;
                if (rc == 0) {          /* for Python: a cache miss, or the converter's */
                    Py_DECREF(sargs);
                    Py_DECREF(t);
                    break;
                }
                builder = NULL;
                ev = Py_None;           /* written: skip the plain Syscall below */
                Py_INCREF(ev);
            }
        }
        if (builder) {
            PyObject *bargs[10] = {ts, pid, tid, name, args, sargs, PyTuple_GET_ITEM(t, 5),
                                   PyTuple_GET_ITEM(t, 6), dur, Py_False};
            ev = PyObject_Vectorcall(builder, bargs, 10, NULL);
            if (!ev) {
                if (!PyErr_ExceptionMatches(PyExc_ValueError)
                        && !PyErr_ExceptionMatches(PyExc_IndexError))
                    goto error_t;
                PyErr_Clear();          /* odd text: a plain Syscall, as to_event does */
            } else {
                PyObject *kind = PyObject_GetAttr(ev, S_FD_KIND);
                PyObject *fd = kind ? PyObject_GetAttr(ev, S_FD) : NULL;
                if (!fd) {
                    Py_XDECREF(kind);
                    goto error_t;
                }
                int mine = kind != Py_None ? has_fd : (fd == Py_None || has_fd);
                Py_DECREF(kind);
                Py_DECREF(fd);
                rc = mine ? encode_event(&b, ev, formats) : 0;
                if (rc < 0)
                    goto error_t;
                if (rc == 0) {          /* the converter's event: Python redoes the line */
                    Py_CLEAR(ev);
                    Py_DECREF(sargs);
                    Py_DECREF(t);
                    break;
                }
            }
        }
        if (!ev) {                      /* a plain Syscall */
            PyObject *fd = Py_None, *kind = Py_None, *target = Py_None;
            const char *a = PyUnicode_AsUTF8(args);
            if (!a)
                goto error_t;
            if (a[0] >= '0' && a[0] <= '9') {
                first = first_arg(NULL, args);
                if (!first)
                    goto error_t;
                int want = PyUnicode_FindChar(first, '<', 0, PyUnicode_GET_LENGTH(first), 1) >= 0;
                if (!want && (want = PySet_Contains(fd_first, name)) < 0)
                    goto error_t;
                if (want) {
                    PyObject *hit = PyDict_GetItemWithError(fd_cache, first);
                    if (!hit && PyErr_Occurred())
                        goto error_t;
                    if (!hit || !PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) != 3) {
                        ok = 0;      /* not cached yet: Python parses it (and caches it) */
                    } else {
                        fd = PyTuple_GET_ITEM(hit, 0);
                        kind = PyTuple_GET_ITEM(hit, 1);
                        target = PyTuple_GET_ITEM(hit, 2);
                        if (kind != Py_None ? !has_fd : (fd != Py_None && !has_fd))
                            ok = 0;  /* first -y decoration / an undecorated fd: converter */
                        else if (kind != Py_None && PyUnicode_Check(kind)
                                 && PyUnicode_Compare(kind, S_FILE) == 0) {
                            int dir = PySet_Contains(dir_calls, name);
                            if (dir < 0)
                                goto error_t;
                            if (dir)
                                kind = S_DIR;
                        }
                    }
                }
            }
            if (ok) {
                PyObject *vals[12] = {ts, pid, tid, name, sargs, PyTuple_GET_ITEM(t, 5),
                                      PyTuple_GET_ITEM(t, 6), dur, fd, kind, target, Py_False};
                rc = buf_add(&b, "[\"sc\",", 6);
                for (int k = 0; rc >= 0 && k < 12; k++) {
                    if (k)
                        rc = buf_add(&b, ",", 1);
                    if (rc >= 0)
                        rc = add_value(&b, vals[k], 0);
                    if (rc == 0)
                        break;      /* a value json writes otherwise: Python */
                }
                if (rc > 0)
                    rc = buf_add(&b, "]\n", 2) < 0 ? -1 : 1;
                if (rc < 0)
                    goto error_t;
                ok = rc > 0;
            }
            if (!ok) {
                Py_XDECREF(first);
                Py_DECREF(sargs);
                Py_DECREF(t);
                break;
            }
        }
        PyObject *row = ascii_str(b.p, 0, b.n);
        if (!row || PySet_Add(names, name) < 0 || PyList_Append(rows, row) < 0) {
            Py_XDECREF(row);
            goto error_t;
        }
        Py_DECREF(row);
        lines++;
        last_ts = PyFloat_AsDouble(ts);
        if (dur != Py_None)
            has_dur = 1;
        Py_XDECREF(ev);
        Py_XDECREF(first);
        Py_DECREF(sargs);
        Py_DECREF(t);
        continue;
error_t:
        Py_XDECREF(ev);
        Py_XDECREF(first);
        Py_XDECREF(sargs);
        Py_DECREF(t);
        goto error;
    }
    PyMem_Free(b.p);
    if (lines)
        return Py_BuildValue("(nndO)", i, lines, last_ts, has_dur ? Py_True : Py_False);
    return Py_BuildValue("(nnOO)", i, lines, Py_None, has_dur ? Py_True : Py_False);
error:
    PyMem_Free(b.p);
    return NULL;
}

/* set_fallback(name, fn): the Python twin of split_line, scrub or first_arg */
static PyObject *set_fallback(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    const char *name = argc == 2 ? PyUnicode_AsUTF8(argv[0]) : NULL;
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

/* ------------------------------------------------------------------ decode_rows */
/* Short strings and ints recur in every row (call names, fd kinds, errors, paths, pids, tids):
 * one object each per decode_rows call instead of one per row (fewer allocations, and dict
 * lookups on them reuse the cached hash). Direct-mapped; a collision just makes a new one. */
#define MEMO 1024
#define MEMO_STR_MAX 64
typedef struct {
    PyObject *str[MEMO];
    PyObject *num[MEMO];
    long long numv[MEMO];
} Memo;

static void memo_clear(Memo *m)
{
    for (int i = 0; i < MEMO; i++) {
        Py_XDECREF(m->str[i]);
        Py_XDECREF(m->num[i]);
    }
}

typedef struct {
    const char *s;
    Py_ssize_t i, n;
    Memo *memo;
} Cur;

static PyObject *memo_str(Memo *m, const char *s, Py_ssize_t a, Py_ssize_t b)
{
    Py_ssize_t len = b - a;
    if (!m || len > MEMO_STR_MAX)
        return ascii_str(s, a, b);
    unsigned h = 2166136261u;
    for (Py_ssize_t i = a; i < b; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    h &= MEMO - 1;
    PyObject *o = m->str[h];
    if (o && PyUnicode_GET_LENGTH(o) == len && memcmp(PyUnicode_DATA(o), s + a, (size_t)len) == 0) {
        Py_INCREF(o);
        return o;
    }
    o = ascii_str(s, a, b);
    if (o) {
        Py_XSETREF(m->str[h], o);
        Py_INCREF(o);
    }
    return o;
}

static PyObject *memo_int(Memo *m, long long v)
{
    if (!m)
        return PyLong_FromLongLong(v);
    unsigned h = (unsigned)((unsigned long long)v ^ ((unsigned long long)v >> 10)) & (MEMO - 1);
    PyObject *o = m->num[h];
    if (o && m->numv[h] == v) {
        Py_INCREF(o);
        return o;
    }
    o = PyLong_FromLongLong(v);
    if (o) {
        Py_XSETREF(m->num[h], o);
        m->numv[h] = v;
        Py_INCREF(o);
    }
    return o;
}

static int hexval(char c)
{
    return (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
           : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
}

static int read_u4(Cur *c, Py_ssize_t at, Py_UCS4 *out)
{
    if (at + 4 > c->n)
        return -1;
    Py_UCS4 v = 0;
    for (int k = 0; k < 4; k++) {
        int d = hexval(c->s[at + k]);
        if (d < 0)
            return -1;
        v = v * 16 + (Py_UCS4)d;
    }
    *out = v;
    return 0;
}

/* a JSON string at c->i (the opening quote), json.scanner's strict rules; NULL without an
 * exception set on malformed text */
static unsigned char STOP[256];      /* '"', '\\' and control characters end a plain run */

static PyObject *json_string(Cur *c)
{
    const char *s = c->s;
    Py_ssize_t i = c->i + 1, start = i;
    while (i < c->n && !STOP[(unsigned char)s[i]])
        i++;
    if (i < c->n && (unsigned char)s[i] < 0x20)
        return NULL;
    if (i >= c->n)
        return NULL;
    if (s[i] == '"') {
        c->i = i + 1;
        return memo_str(c->memo, s, start, i);
    }
    /* with escapes: code points into a buffer */
    Py_UCS4 *cp = PyMem_Malloc(sizeof(Py_UCS4) * (size_t)(c->n - start + 1));
    if (!cp)
        return PyErr_NoMemory();
    Py_ssize_t k = 0;
    for (Py_ssize_t j = start; j < i; j++)
        cp[k++] = (unsigned char)s[j];
    while (i < c->n) {
        char ch = s[i];
        if (ch == '"')
            break;
        if ((unsigned char)ch < 0x20)
            goto bad;
        if (ch != '\\') {
            cp[k++] = (unsigned char)ch;
            i++;
            continue;
        }
        if (i + 1 >= c->n)
            goto bad;
        char e = s[i + 1];
        Py_UCS4 v;
        switch (e) {
        case '"': v = '"'; break;
        case '\\': v = '\\'; break;
        case '/': v = '/'; break;
        case 'b': v = '\b'; break;
        case 'f': v = '\f'; break;
        case 'n': v = '\n'; break;
        case 'r': v = '\r'; break;
        case 't': v = '\t'; break;
        case 'u':
            if (read_u4(c, i + 2, &v) < 0)
                goto bad;
            if (v >= 0xd800 && v <= 0xdbff && i + 7 < c->n && s[i + 6] == '\\'
                    && s[i + 7] == 'u') {
                Py_UCS4 lo;
                if (read_u4(c, i + 8, &lo) == 0 && lo >= 0xdc00 && lo <= 0xdfff) {
                    v = 0x10000 + (((v - 0xd800) << 10) | (lo - 0xdc00));
                    i += 6;
                }
            }
            i += 4;
            break;
        default:
            goto bad;
        }
        cp[k++] = v;
        i += 2;
    }
    if (i >= c->n)
        goto bad;
    c->i = i + 1;
    PyObject *r = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, cp, k);
    PyMem_Free(cp);
    return r;
bad:
    PyMem_Free(cp);
    return NULL;
}

static PyObject *json_number(Cur *c)
{
    const char *s = c->s;
    Py_ssize_t a = c->i, i = a;
    if (i < c->n && s[i] == '-')
        i++;
    if (i >= c->n)
        return NULL;
    if (s[i] == '0')
        i++;
    else if (s[i] >= '1' && s[i] <= '9')
        while (i < c->n && s[i] >= '0' && s[i] <= '9')
            i++;
    else
        return NULL;
    int isfloat = 0;
    if (i + 1 < c->n && s[i] == '.' && s[i + 1] >= '0' && s[i + 1] <= '9') {
        i += 2;
        while (i < c->n && s[i] >= '0' && s[i] <= '9')
            i++;
        isfloat = 1;
    }
    if (i < c->n && (s[i] == 'e' || s[i] == 'E')) {
        Py_ssize_t j = i + 1;
        if (j < c->n && (s[j] == '+' || s[j] == '-'))
            j++;
        if (j < c->n && s[j] >= '0' && s[j] <= '9') {
            while (j < c->n && s[j] >= '0' && s[j] <= '9')
                j++;
            i = j;
            isfloat = 1;
        }
    }
    c->i = i;
    if (!isfloat) {
        if (i - a <= 12) {                  /* at most 12 characters: a long long */
            long long v = 0;
            for (Py_ssize_t j = s[a] == '-' ? a + 1 : a; j < i; j++)
                v = v * 10 + (s[j] - '0');
            return memo_int(c->memo, s[a] == '-' ? -v : v);
        }
        return py_int(s, a, i, 10);
    }
    double v;                 /* float() of the text, as json does */
    if (!clinger(s, a, i, &v) && !py_float(s, a, i, &v))
        return NULL;
    return PyFloat_FromDouble(v);
}

static PyObject *json_value(Cur *c, int depth);

static PyObject *json_array(Cur *c, int depth)
{
    PyObject *list = PyList_New(0);
    if (!list)
        return NULL;
    c->i++;
    if (c->i < c->n && c->s[c->i] == ']') {
        c->i++;
        return list;
    }
    for (;;) {
        PyObject *v = json_value(c, depth + 1);
        if (!v || PyList_Append(list, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(v);
        if (c->i >= c->n)
            break;
        if (c->s[c->i] == ',') {
            c->i++;
            continue;
        }
        if (c->s[c->i] == ']') {
            c->i++;
            return list;
        }
        break;
    }
    Py_DECREF(list);
    return NULL;
}

static PyObject *json_value(Cur *c, int depth)
{
    if (c->i >= c->n)
        return NULL;
    char ch = c->s[c->i];
    if (ch == '"')
        return json_string(c);
    if (ch == 'n' && c->n - c->i >= 4 && memcmp(c->s + c->i, "null", 4) == 0) {
        c->i += 4;
        Py_RETURN_NONE;
    }
    if (ch == 't' && c->n - c->i >= 4 && memcmp(c->s + c->i, "true", 4) == 0) {
        c->i += 4;
        Py_RETURN_TRUE;
    }
    if (ch == 'f' && c->n - c->i >= 5 && memcmp(c->s + c->i, "false", 5) == 0) {
        c->i += 5;
        Py_RETURN_FALSE;
    }
    if (ch == '[' && depth == 0)
        return json_array(c, depth);
    if (ch == '-' || (ch >= '0' && ch <= '9'))
        return json_number(c);
    return NULL;
}

#define MAX_FIELDS 32

/* slot_offsets(cls, names) -> offsets of the object slots that hold those fields, or None:
 * what decode_rows needs to fill an instance of a slots dataclass without running its
 * __init__ (which only stores each field: the caller checks there is no __post_init__). */
static PyObject *slot_offsets(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 2 || !PyType_Check(argv[0]) || !PyTuple_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "slot_offsets(cls, names)");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(argv[1]);
    if (n > MAX_FIELDS)
        Py_RETURN_NONE;
    PyObject *out = PyTuple_New(n);
    if (!out)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = PyObject_GetAttr(argv[0], PyTuple_GET_ITEM(argv[1], i));
        if (!d) {
            Py_DECREF(out);
            return NULL;
        }
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type);
        PyMemberDef *m = ok ? ((PyMemberDescrObject *)d)->d_member : NULL;
        ok = m && m->type == T_OBJECT_EX && !(m->flags & READONLY);
        PyObject *off = ok ? PyLong_FromSsize_t(m->offset) : NULL;
        Py_DECREF(d);
        if (!off) {
            Py_DECREF(out);
            if (PyErr_Occurred())
                return NULL;
            Py_RETURN_NONE;
        }
        PyTuple_SET_ITEM(out, i, off);
    }
    return out;
}

/* What decode_rows knows of one tag of its table, read once per call */
typedef struct {
    char tag[16];
    Py_ssize_t taglen, nf, tuple_at;
    PyObject *cls;                      /* borrowed from the table */
    int direct;                         /* fill the slots at off[] */
    Py_ssize_t off[MAX_FIELDS];
} Spec;

#define MAX_SPECS 16

typedef struct {
    Spec specs[MAX_SPECS];
    int n;
} Specs;

static Spec *find_spec(Specs *ss, PyObject *table, const char *tag, Py_ssize_t len)
{
    for (int i = 0; i < ss->n; i++)
        if (ss->specs[i].taglen == len && memcmp(ss->specs[i].tag, tag, (size_t)len) == 0)
            return &ss->specs[i];
    if (len >= 16 || ss->n >= MAX_SPECS)
        return NULL;
    PyObject *key = ascii_str(tag, 0, len);
    PyObject *spec = key ? PyDict_GetItemWithError(table, key) : NULL;
    Py_XDECREF(key);
    if (!spec || !PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 4)
        return NULL;
    Spec *sp = &ss->specs[ss->n];
    sp->nf = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 1));
    sp->tuple_at = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 2));
    if (PyErr_Occurred() || sp->nf <= 0 || sp->nf > MAX_FIELDS)
        return NULL;
    sp->cls = PyTuple_GET_ITEM(spec, 0);
    PyObject *offsets = PyTuple_GET_ITEM(spec, 3);
    sp->direct = PyType_Check(sp->cls) && PyTuple_Check(offsets)
                 && PyTuple_GET_SIZE(offsets) == sp->nf;
    for (Py_ssize_t j = 0; sp->direct && j < sp->nf; j++) {
        sp->off[j] = PyLong_AsSsize_t(PyTuple_GET_ITEM(offsets, j));
        if (sp->off[j] <= 0)
            sp->direct = 0;
    }
    if (PyErr_Occurred())
        return NULL;
    memcpy(sp->tag, tag, (size_t)len);
    sp->taglen = len;
    ss->n++;
    return sp;
}

/* one row s[a:b] -> an event, or NULL (no exception) when it is for Python */
static PyObject *decode_one(const char *s, Py_ssize_t a, Py_ssize_t b, PyObject *table,
                            Specs *ss, Memo *memo)
{
    if (b - a < 4 || s[a] != '[' || s[a + 1] != '"')
        return NULL;
    Py_ssize_t q = find_char(s, a + 2, b, '"');
    if (q < 0 || q + 1 >= b)
        return NULL;
    Spec *sp = find_spec(ss, table, s + a + 2, q - (a + 2));
    if (!sp)
        return NULL;
    Py_ssize_t nf = sp->nf, tuple_at = sp->tuple_at;
    PyObject *vals[MAX_FIELDS];
    Py_ssize_t k = 0;
    Cur c = {s, q + 1, b, memo};
    PyObject *ev = NULL;
    while (k < nf) {
        if (c.i >= c.n || s[c.i] != ',')
            goto done;
        c.i++;
        PyObject *v = json_value(&c, 0);
        if (!v)
            goto done;
        if (k == tuple_at && v == Py_None) {        /* tuple(None or ()) */
            Py_DECREF(v);
            v = PyTuple_New(0);
            if (!v)
                goto done;
        } else if (k == tuple_at && PyList_CheckExact(v)) {
            PyObject *t = PyList_AsTuple(v);
            Py_DECREF(v);
            if (!t)
                goto done;
            v = t;
        }
        vals[k++] = v;
    }
    if (c.i + 1 != c.n || s[c.i] != ']')
        goto done;
    if (sp->direct) {
        PyTypeObject *tp = (PyTypeObject *)sp->cls;
        PyObject *obj = tp->tp_alloc(tp, 0);
        if (!obj)
            goto done;
        for (Py_ssize_t j = 0; j < k; j++)
            *(PyObject **)((char *)obj + sp->off[j]) = vals[j];      /* stolen */
        /* Its fields are strings, numbers and lists of them: it can be in no reference cycle,
         * so the cyclic collector need not visit it (as CPython untracks such tuples). */
        if (PyObject_IS_GC(obj))
            PyObject_GC_UnTrack(obj);
        return obj;
    }
    ev = PyObject_Vectorcall(sp->cls, vals, (size_t)k, NULL);
done:
    for (Py_ssize_t j = 0; j < k; j++)
        Py_DECREF(vals[j]);
    return ev;
}

static PyObject *decode_rows(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 2 || !PyUnicode_Check(argv[0]) || !PyDict_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "decode_rows(block, table)");
        return NULL;
    }
    PyObject *block = argv[0], *table = argv[1];
    if (!PyUnicode_IS_ASCII(block)) {
        PyErr_SetString(PyExc_ValueError, "decode_rows: the block must be ASCII");
        return NULL;
    }
    const char *s = (const char *)PyUnicode_DATA(block);
    Py_ssize_t n = PyUnicode_GET_LENGTH(block);
    PyObject *out = PyList_New(0);
    if (!out)
        return NULL;
    Py_ssize_t a = 0, odd = 0;
    Specs specs;
    specs.n = 0;
    Memo *memo = PyMem_Calloc(1, sizeof(Memo));
    if (!memo) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    while (a < n) {
        Py_ssize_t e = find_char(s, a, n, '\n');
        Py_ssize_t b = e < 0 ? n : e;
        PyObject *item = decode_one(s, a, b, table, &specs, memo);
        if (!item) {
            odd++;
            if (PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_ValueError)
                        && !PyErr_ExceptionMatches(PyExc_TypeError)
                        && !PyErr_ExceptionMatches(PyExc_OverflowError)) {
                    Py_DECREF(out);
                    memo_clear(memo);
                    PyMem_Free(memo);
                    return NULL;
                }
                PyErr_Clear();
            }
            item = ascii_str(s, a, e < 0 ? n : e + 1);   /* the line, for Python */
            if (!item) {
                Py_DECREF(out);
                memo_clear(memo);
                PyMem_Free(memo);
                return NULL;
            }
        }
        int rc = PyList_Append(out, item);
        Py_DECREF(item);
        if (rc < 0) {
            Py_DECREF(out);
            memo_clear(memo);
            PyMem_Free(memo);
            return NULL;
        }
        if (e < 0)
            break;
        a = e + 1;
    }
    memo_clear(memo);
    PyMem_Free(memo);
    return Py_BuildValue("(Nn)", out, odd);
}

/* ------------------------------------------------------------------ scan_block */
/* scan_block(block, counter, want_self) -> (prefixed, lines, candidates): strace_scan.py's first
 * pass over a bytes block of whole lines. Adds 1 per line to counter[tid column bytes] (the column as
 * the regex (?:\[pid +)?(\d+)[ \]] at the line start reads it) and returns the number of such
 * lines, the number of lines, and the offsets of the lines worth parsing: those whose call
 * (after the pid column, a timestamp, an strace -n number and "<... ") is clone, clone3, fork,
 * vfork, getpid, tgkill, and gettid and set_tid_address when want_self, and strace's
 * "[strace: ]Process N ..." messages. Every line parse_line reads as such a call or message
 * is among them. */
static const char *const SCAN_NAMES[] = {"clone", "clone3", "fork", "vfork", "getpid", "gettid",
                                         "set_tid_address", "tgkill", NULL};

static int flush_tid(PyObject *counter, const char *s, Py_ssize_t a, Py_ssize_t len,
                     Py_ssize_t run)
{
    PyObject *key = PyBytes_FromStringAndSize(s + a, len);
    if (!key)
        return -1;
    PyObject *old = PyDict_GetItemWithError(counter, key);
    long long base = old ? PyLong_AsLongLong(old) : 0;
    PyObject *val = PyErr_Occurred() ? NULL : PyLong_FromLongLong(base + run);
    int rc = val ? PyDict_SetItem(counter, key, val) : -1;
    Py_DECREF(key);
    Py_XDECREF(val);
    return rc;
}

static int worth_parsing(const char *s, Py_ssize_t p, Py_ssize_t e, int want_self)
{
    if ((e - p >= 16 && memcmp(s + p, "strace: Process ", 16) == 0)
            || (e - p >= 8 && memcmp(s + p, "Process ", 8) == 0))
        return 1;
    Py_ssize_t i = p;
    if (i < e && s[i] == '[' && e - i >= 5 && memcmp(s + i, "[pid ", 5) == 0) {
        Py_ssize_t r = find_char(s, i, e, ']');
        if (r < 0)
            return 0;
        i = r + 1;
    } else if (i < e && s[i] >= '0' && s[i] <= '9') {
        Py_ssize_t k = i;
        while (k < e && s[k] >= '0' && s[k] <= '9')
            k++;
        if (k < e && s[k] == ' ')
            i = k;                      /* a pid column; else a timestamp, read below */
    }
    while (i < e && s[i] == ' ')
        i++;
    if (i < e && s[i] >= '0' && s[i] <= '9') {
        Py_ssize_t sp = find_char(s, i, e, ' ');
        if (sp < 0)
            return 0;
        i = sp + 1;
        while (i < e && s[i] == ' ')
            i++;
    }
    if (i < e && s[i] == '[') {         /* strace -n */
        Py_ssize_t r = find_str(s, i, e, "] ", 2);
        if (r < 0)
            return 0;
        i = r + 2;
    }
    if (e - i >= 5 && memcmp(s + i, "<... ", 5) == 0)
        i += 5;
    for (int k = 0; SCAN_NAMES[k]; k++) {
        if (!want_self && (k == 5 || k == 6))
            continue;                   /* gettid, set_tid_address */
        Py_ssize_t l = (Py_ssize_t)strlen(SCAN_NAMES[k]);
        if (e - i > l && memcmp(s + i, SCAN_NAMES[k], (size_t)l) == 0
                && (s[i + l] == '(' || s[i + l] == ' '))
            return 1;
    }
    return 0;
}

static PyObject *scan_block(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 3 || !PyBytes_Check(argv[0]) || !PyDict_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "scan_block(block, counter, want_self)");
        return NULL;
    }
    int want_self = PyObject_IsTrue(argv[2]);
    const char *s = PyBytes_AS_STRING(argv[0]);
    Py_ssize_t n = PyBytes_GET_SIZE(argv[0]);
    PyObject *counter = argv[1];
    PyObject *cand = PyList_New(0);
    if (!cand)
        return NULL;
    /* consecutive lines of one tid are counted before one dict update */
    Py_ssize_t last_a = -1, last_len = 0, run = 0, total = 0, lines = 0;
    Py_ssize_t i = 0;
    while (i < n) {
        const char *nl = memchr(s + i, '\n', (size_t)(n - i));
        Py_ssize_t e = nl ? nl - s : n;
        lines++;
        Py_ssize_t ds = -1, de = -1;
        if (s[i] == '[') {
            if (e - i >= 5 && memcmp(s + i, "[pid", 4) == 0 && s[i + 4] == ' ') {
                Py_ssize_t j = i + 4;
                while (j < e && s[j] == ' ')
                    j++;
                Py_ssize_t k = j;
                while (k < e && s[k] >= '0' && s[k] <= '9')
                    k++;
                if (k > j && k < e && (s[k] == ' ' || s[k] == ']')) {
                    ds = j;
                    de = k;
                }
            }
        } else {
            Py_ssize_t k = i;
            while (k < e && s[k] >= '0' && s[k] <= '9')
                k++;
            if (k > i && k < e && (s[k] == ' ' || s[k] == ']')) {
                ds = i;
                de = k;
            }
        }
        if (ds >= 0) {
            total++;
            if (last_a >= 0 && de - ds == last_len
                    && memcmp(s + ds, s + last_a, (size_t)last_len) == 0) {
                run++;
            } else {
                if (last_a >= 0 && flush_tid(counter, s, last_a, last_len, run) < 0)
                    goto error;
                last_a = ds;
                last_len = de - ds;
                run = 1;
            }
        }
        if (worth_parsing(s, i, e, want_self)) {
            PyObject *o = PyLong_FromSsize_t(i);
            if (!o || PyList_Append(cand, o) < 0) {
                Py_XDECREF(o);
                goto error;
            }
            Py_DECREF(o);
        }
        if (!nl)
            break;
        i = e + 1;
    }
    if (last_a >= 0 && flush_tid(counter, s, last_a, last_len, run) < 0)
        goto error;
    PyObject *r = Py_BuildValue("(nnO)", total, lines, cand);
    Py_DECREF(cand);
    return r;
error:
    Py_DECREF(cand);
    return NULL;
}

/* ------------------------------------------------------------------ module */
static PyObject *float_repr(PyObject *self, PyObject *v)
{
    /* repr of a float as encode_row writes it (tests compare it with repr) */
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred())
        return NULL;
    char tmp[48];
    int k = fast_repr(x, tmp);
    if (k > 0)
        return ascii_str(tmp, 0, k);
    char *r = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (!r)
        return NULL;
    PyObject *o = PyUnicode_FromString(r);
    PyMem_Free(r);
    return o;
}

static PyMethodDef methods[] = {
    {"float_repr", (PyCFunction)float_repr, METH_O, "repr(float), as encode_row writes it"},
    {"split_line", (PyCFunction)split_line, METH_O, "lines.py py_split_line, common shapes"},
    {"scrub", (PyCFunction)scrub, METH_O, "events.scrub_args"},
    {"first_arg", (PyCFunction)first_arg, METH_O, "strace/args.py first_arg"},
    {"convert_calls", (PyCFunction)(void (*)(void))convert_calls, METH_FASTCALL,
     "rows of complete calls"},
    {"set_fallback", (PyCFunction)(void (*)(void))set_fallback, METH_FASTCALL,
     "the Python twin to call for what C leaves"},
    {"encode_row", (PyCFunction)(void (*)(void))encode_row, METH_FASTCALL, "a trace row"},
    {"decode_rows", (PyCFunction)(void (*)(void))decode_rows, METH_FASTCALL, "trace rows"},
    {"slot_offsets", (PyCFunction)(void (*)(void))slot_offsets, METH_FASTCALL,
     "where a slots dataclass keeps its fields"},
    {"scan_block", (PyCFunction)(void (*)(void))scan_block, METH_FASTCALL, "first pass"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fast(void)
{
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    for (int c = 0; c < 0x20; c++)
        STOP[c] = 1;
    STOP['"'] = STOP['\\'] = 1;
    UNHANDLED = PyObject_CallObject((PyObject *)&PyBaseObject_Type, NULL);
    S_CALL = PyUnicode_InternFromString("call");
    S_RESUMED = PyUnicode_InternFromString("resumed");
    S_UNFINISHED = PyUnicode_InternFromString("unfinished");
    S_DIR = PyUnicode_InternFromString("dir");
    S_FILE = PyUnicode_InternFromString("file");
    S_FD = PyUnicode_InternFromString("fd");
    S_FD_KIND = PyUnicode_InternFromString("fd_kind");
    S_WR = PyUnicode_InternFromString("[\"wr\",");
    S_RD = PyUnicode_InternFromString("[\"rd\",");
    S_IO = PyUnicode_InternFromString("[\"io\",");
    if (!UNHANDLED || !S_CALL || !S_RESUMED || !S_UNFINISHED)
        return NULL;
    Py_INCREF(UNHANDLED);
    if (PyModule_AddObject(m, "UNHANDLED", UNHANDLED) < 0
            || PyModule_AddStringConstant(m, "SOURCE_HASH", SOURCE_HASH) < 0)
        return NULL;
    return m;
}
