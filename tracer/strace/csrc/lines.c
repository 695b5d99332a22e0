#include "fast.h"

/* A pid, tid or signal sender has at most 7 digits; lines.py refuses more than 10 */
#define MAX_DIGITS 10

/* ------------------------------------------------------------------ number shapes */
/* lines.py's shapes of the numbers in a line (timestamp_shape, is_duration, parse_result):
 * ASCII digits, bounded lengths; checked before anything is converted, so that both paths
 * take exactly the same tokens. */
static Py_ssize_t digits_at(const char *s, Py_ssize_t i, Py_ssize_t b)
{
    Py_ssize_t k = i;
    while (k < b && s[k] >= '0' && s[k] <= '9')
        k++;
    return k - i;
}

/* [0-9]{1,12}(\.[0-9]{1,12})? when frac_required is 0; [0-9]{1,12}\.[0-9]{1,12} else */
static int seconds_shape(const char *s, Py_ssize_t a, Py_ssize_t b, int frac_required)
{
    Py_ssize_t n = digits_at(s, a, b);
    if (n < 1 || n > 12)
        return 0;
    if (a + n == b)
        return !frac_required;
    if (s[a + n] != '.')
        return 0;
    Py_ssize_t f = digits_at(s, a + n + 1, b);
    return f >= 1 && f <= 12 && a + n + 1 + f == b;
}

#define TS_TIME_OF_DAY 1
#define TS_SECONDS 2

/* lines.py timestamp_shape */
static int timestamp_shape(const char *s, Py_ssize_t a, Py_ssize_t b)
{
    if (b - a >= 8 && digits_at(s, a, a + 2) == 2 && s[a + 2] == ':'
            && digits_at(s, a + 3, a + 5) == 2 && s[a + 5] == ':'
            && digits_at(s, a + 6, a + 8) == 2) {
        if (b - a == 8)
            return TS_TIME_OF_DAY;
        Py_ssize_t f = s[a + 8] == '.' ? digits_at(s, a + 9, b) : 0;
        if (f >= 1 && f <= 12 && a + 9 + f == b)
            return TS_TIME_OF_DAY;
    }
    return seconds_shape(s, a, b, 0) ? TS_SECONDS : 0;
}

/* lines.py parse_result's shape: -?[0-9]{1,20} or 0x[0-9a-fA-F]{1,16} */
static int result_shape(const char *s, Py_ssize_t a, Py_ssize_t b)
{
    if (b - a >= 3 && s[a] == '0' && s[a + 1] == 'x') {
        if (b - a - 2 > 16)
            return 0;
        for (Py_ssize_t i = a + 2; i < b; i++)
            if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')
                  || (s[i] >= 'A' && s[i] <= 'F')))
                return 0;
        return 1;
    }
    Py_ssize_t i = a < b && s[a] == '-' ? a + 1 : a;
    Py_ssize_t n = digits_at(s, i, b);
    return n >= 1 && n <= 20 && i + n == b;
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
        if (i > bs && seconds_shape(s, i + 2, be - 1, 1)) {
            double v;
            if (py_float(s, i + 2, be - 1, &v)) {
                if (!(v < 1e9))                 /* as lines.py: not a duration strace prints */
                    RETURN_NONE_CLEAN();
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
        if (kind == S_CALL) {       /* perhaps a call's entry alone (lines.py _cut_entry) */
            Py_XDECREF(tid); Py_XDECREF(ts);
            Py_INCREF(UNHANDLED);
            return UNHANDLED;
        }
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
        if (!result_shape(s, ts_, te)) {  /* not a number strace prints: not strace output */
            Py_XDECREF(ret_text); Py_XDECREF(dur);
            RETURN_NONE_CLEAN();
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


PyObject *split_line(PyObject *self, PyObject *text)
{
    PyObject *r = split_line_c(text);
    if (r == UNHANDLED && FB_SPLIT) {
        Py_DECREF(r);
        return PyObject_CallOneArg(FB_SPLIT, text);
    }
    return r;
}

PyObject *split_line_c(PyObject *text)
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
        if (end < 0 || end > 5 + MAX_DIGITS)
            Py_RETURN_NONE;
        Py_ssize_t a = 5, b = end;          /* lines.py: s[5:end].strip(" "), digits only */
        while (a < b && s[a] == ' ')
            a++;
        while (b > a && s[b - 1] == ' ')
            b--;
        if (b == a || digits_at(s, a, b) != b - a)
            Py_RETURN_NONE;
        tid = py_int(s, a, b, 10);
        if (!tid)
            return NULL;
        pos = end + 1;
    } else if (c >= '0' && c <= '9') {
        Py_ssize_t sp = find_char(s, 0, n, ' ');
        if (sp < 0)
            Py_RETURN_NONE;
        int digits = 1;
        for (Py_ssize_t i = 0; i < sp && digits; i++)
            digits = s[i] >= '0' && s[i] <= '9';
        if (digits) {
            if (sp > MAX_DIGITS)
                Py_RETURN_NONE;
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
        int shape = timestamp_shape(s, pos, sp);
        if (!shape)
            RETURN_NONE_CLEAN();
        if (shape == TS_TIME_OF_DAY) {
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
        if (!(v >= 0.0 && v < 1e12))    /* also refuses inf and nan, as lines.py */
            RETURN_NONE_CLEAN();
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
/* events.py STRING_LITERAL.sub('"..."', text): a literal is a quote, then characters or
 * backslash escapes up to the closing quote (then "..." when strace cut it); one never closed
 * runs to the end of the text. One pass: each character is looked at once. */
PyObject *scrub(PyObject *self, PyObject *text)
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
        Py_ssize_t j = i + 1;
        while (j < n && s[j] != '"')
            j += s[j] == '\\' ? 2 : 1;
        Py_ssize_t end = j < n ? j + 1 : n;      /* past the closing quote, or the end */
        if (j < n && end + 3 <= n && memcmp(s + end, "...", 3) == 0)
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
/* strace/args.py decoration_end: the '>' closing the decoration that opens at s[lt] (the
 * first '>', not the "->" of a socket, where the '<'s and '>'s since lt balance), then its
 * "(deleted)"; -1 when it never closes. One pass with a depth counter. */
static Py_ssize_t decoration_end(const char *s, Py_ssize_t n, Py_ssize_t lt)
{
    Py_ssize_t depth = 0;
    for (Py_ssize_t i = lt; i < n; i++) {
        if (s[i] == '<') {
            depth++;
        } else if (s[i] == '>' && !(i > lt && s[i - 1] == '-') && --depth == 0) {
            if (n - (i + 1) >= 9 && memcmp(s + i + 1, "(deleted)", 9) == 0)
                i += 9;
            return i;
        }
    }
    return -1;
}

PyObject *first_arg(PyObject *self, PyObject *text)
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

