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

/* ------------------------------------------------------------------ parse_fields */
/* the digits s[a:b] (at most 18: no overflow) as a number */
static long long digits_value(const char *s, Py_ssize_t a, Py_ssize_t b)
{
    long long v = 0;
    for (Py_ssize_t i = a; i < b; i++)
        v = v * 10 + (s[i] - '0');
    return v;
}

/* L's result value from the token s[a:b] of result_shape: ret_fits when it is a signed
 * 64-bit value (Python's int is exact either way: line_tuple makes it with py_int) */
static void result_value(const char *s, Py_ssize_t a, Py_ssize_t b, Line *L)
{
    unsigned long long u = 0, limit = (unsigned long long)LLONG_MAX;
    int hex = L->ret_hex, neg = !hex && s[a] == '-', over = 0;
    for (Py_ssize_t i = hex ? a + 2 : a + neg; i < b; i++) {
        char c = s[i];
        unsigned d = c <= '9' ? (unsigned)(c - '0') : c <= 'F' ? (unsigned)(c - 'A' + 10)
                     : (unsigned)(c - 'a' + 10);
        unsigned base = hex ? 16 : 10;
        if (u > (ULLONG_MAX - d) / base)
            over = 1;
        u = u * base + d;
    }
    L->ret_fits = !over && (neg ? u <= limit + 1 : u <= limit);
    L->ret = !L->ret_fits ? 0 : neg ? (u == limit + 1 ? LLONG_MIN : -(long long)u)
                                    : (long long)u;
}

/* lines.py _parse_result over s[bs:be], into L: its kind, name s[na:nb], arguments, result,
 * error, ret_text, duration */
static int parse_result(const char *s, Py_ssize_t bs, Py_ssize_t be, Line *L, int kind,
                        Py_ssize_t na, Py_ssize_t nb)
{
    L->kind = kind;
    L->na = na;
    L->nb = nb;
    L->has_ret = L->has_dur = L->errno_err = 0;
    L->es = L->ee = L->xs = L->xe = -1;
    if (be - bs >= 4 && memcmp(s + be - 4, "...>", 4) == 0) {
        Py_ssize_t ae = -1;
        if (ends_with(s, bs, be, "<unfinished ...>"))
            ae = be - 16;
        else if (ends_with(s, bs, be, "<detached ...>"))
            ae = be - 14;
        if (ae >= 0) {
            if (ae > bs && s[ae - 1] == ' ')
                ae--;
            L->kind = K_UNFINISHED;
            L->as = bs;
            L->ae = ae;
            return LINE_OK;
        }
    }
    if (be > bs && s[be - 1] == '>') {
        Py_ssize_t i = rfind_str(s, bs, be, " <", 2);
        if (i > bs && seconds_shape(s, i + 2, be - 1, 1)) {
            double v;
            if (py_float(s, i + 2, be - 1, &v)) {
                if (!(v < 1e9))                 /* as lines.py: not a duration strace prints */
                    return LINE_NONE;
                L->dur = v;
                L->has_dur = 1;
                L->dur_a = i + 2;
                L->dur_b = be - 1;
                be = i;
            } else if (PyErr_Occurred()) {
                return -1;
            }
        }
    }
    Py_ssize_t eq = rfind_str(s, bs, be, " = ", 3);
    if (eq < 0)             /* a call's: perhaps its entry alone (lines.py _cut_entry) */
        return kind == K_CALL ? LINE_UNHANDLED : LINE_NONE;
    Py_ssize_t he = eq;
    while (he > bs && s[he - 1] == ' ')
        he--;
    if (he <= bs || s[he - 1] != ')')
        return LINE_NONE;
    L->as = bs;
    L->ae = he - 1;
    if (kind == K_RESUMED && L->ae - bs == 17 && memcmp(s + bs, " <unfinished ...>", 17) == 0)
        L->ae = bs;                     /* "<... poll resumed> <unfinished ...>) = ?" */
    Py_ssize_t rs = eq + 3, re_ = be;           /* retpart */
    Py_ssize_t sp = find_char(s, rs, re_, ' ');
    Py_ssize_t ts_ = rs, te = sp < 0 ? re_ : sp; /* tok */
    Py_ssize_t xs = sp < 0 ? re_ : sp + 1, xe = re_;  /* extra */
    if (!(te - ts_ == 1 && s[ts_] == '?')) {
        Py_ssize_t lt = find_char(s, ts_, te, '<');
        if (lt > ts_) {                 /* "= 3</usr/lib/libm.so.6>" */
            L->xs = lt;
            L->xe = re_;
            te = lt;
            xs = xe;
        }
        if (!result_shape(s, ts_, te))  /* not a number strace prints: not strace output */
            return LINE_NONE;
        L->has_ret = 1;
        L->ret_hex = te - ts_ >= 2 && s[ts_ + 1] == 'x';
        L->rs = ts_;
        L->re = te;
        result_value(s, ts_, te, L);
    }
    if (xe > xs) {
        if (s[xs] == 'E') {             /* "-1 ENOENT (No such file ...)" */
            Py_ssize_t j = find_char(s, xs, xe, ' ');
            L->es = xs;
            L->ee = j < 0 ? xe : j;
            if (j > xs) {
                Py_ssize_t a = j + 1, b = xe;
                while (a < b && (s[a] == '(' || s[a] == ')'))
                    a++;
                while (b > a && (s[b - 1] == '(' || s[b - 1] == ')'))
                    b--;
                L->xs = a;
                L->xe = b;
            }
        } else if (s[xs] == '(') {      /* "0 (Timeout)" */
            L->xs = xs + 1;
            L->xe = s[xe - 1] == ')' ? xe - 1 : xe;
            if (L->xe < L->xs)
                L->xe = L->xs;
            if (L->has_ret && L->ret_fits && L->ret == -1 && L->xe - L->xs >= 6
                    && memcmp(s + L->xs, "errno ", 6) == 0)
                L->errno_err = 1;       /* errno strace cannot name: the error is ret_text */
        } else {
            L->xs = xs;
            L->xe = xe;
        }
    }
    return LINE_OK;
}

int parse_fields(const char *s, Py_ssize_t n, Line *L)
{
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        n--;
    L->n = n;
    L->has_tid = L->has_ts = L->tod = 0;
    if (n == 0)
        return LINE_NONE;
    Py_ssize_t pos = 0;
    char c = s[0];
    if (c == '[' && n >= 5 && memcmp(s, "[pid ", 5) == 0) {
        Py_ssize_t end = find_char(s, 5, n, ']');
        if (end < 0 || end > 5 + MAX_DIGITS)
            return LINE_NONE;
        Py_ssize_t a = 5, b = end;          /* lines.py: s[5:end].strip(" "), digits only */
        while (a < b && s[a] == ' ')
            a++;
        while (b > a && s[b - 1] == ' ')
            b--;
        if (b == a || digits_at(s, a, b) != b - a)
            return LINE_NONE;
        L->tid = digits_value(s, a, b);
        L->has_tid = 1;
        pos = end + 1;
    } else if (c >= '0' && c <= '9') {
        Py_ssize_t sp = find_char(s, 0, n, ' ');
        if (sp < 0)
            return LINE_NONE;
        if (digits_at(s, 0, sp) == sp) {    /* a pid column; a timestamp has '.' or ':' */
            if (sp > MAX_DIGITS)
                return LINE_NONE;
            L->tid = digits_value(s, 0, sp);
            L->has_tid = 1;
            pos = sp;
        }
    }
    while (pos < n && s[pos] == ' ')
        pos++;
    if (pos < n && s[pos] >= '0' && s[pos] <= '9') {
        Py_ssize_t sp = find_char(s, pos, n, ' ');
        if (sp < 0)
            return LINE_NONE;
        double v, f;
        int shape = timestamp_shape(s, pos, sp);
        if (!shape)
            return LINE_NONE;
        if (shape == TS_TIME_OF_DAY) {      /* HH:MM:SS[.ffffff]: digits, by its shape */
            if (!py_float(s, pos + 6, sp, &f))
                return PyErr_Occurred() ? -1 : LINE_NONE;
            v = (double)(digits_value(s, pos, pos + 2) * 3600
                         + digits_value(s, pos + 3, pos + 5) * 60) + f;
            L->tod = 1;
        } else if (!py_float(s, pos, sp, &v)) {
            return PyErr_Occurred() ? -1 : LINE_NONE;
        }
        if (!(v >= 0.0 && v < 1e12))    /* also refuses inf and nan, as lines.py */
            return LINE_NONE;
        L->ts = v;
        L->has_ts = 1;
        L->ts_a = pos;
        L->ts_b = sp;
        pos = sp + 1;
        while (pos < n && s[pos] == ' ')
            pos++;
    }
    if (pos >= n)
        return LINE_NONE;
    c = s[pos];
    if (c == '<') {
        if (n - pos < 5 || memcmp(s + pos, "<... ", 5) != 0)
            return LINE_NONE;
        Py_ssize_t e = find_str(s, pos + 5, n, " resumed>", 9);
        if (e < 0)
            return LINE_NONE;
        return parse_result(s, e + 9, n, L, K_RESUMED, pos + 5, e);
    }
    if (c == '[' || c == '+' || c == '-')
        return LINE_UNHANDLED;          /* strace -n numbers, markers: the Python parse */
    Py_ssize_t p = find_char(s, pos, n, '(');
    if (p <= pos || memchr(s + pos, ' ', (size_t)(p - pos)))
        return LINE_UNHANDLED;
    return parse_result(s, p + 1, n, L, K_CALL, pos, p);
}

/* ------------------------------------------------------------------ split_line */
#define NONE_OR(x) ((x) ? (x) : (Py_INCREF(Py_None), Py_None))

PyObject *line_tuple(const char *s, const Line *L)
{
    PyObject *kind = L->kind == K_CALL ? S_CALL : L->kind == K_RESUMED ? S_RESUMED
                     : S_UNFINISHED;
    PyObject *tid = NULL, *ts = NULL, *name = NULL, *args = NULL, *ret = NULL, *err = NULL,
             *ret_text = NULL, *dur = NULL, *t = NULL;
    if ((L->has_tid && !(tid = PyLong_FromLongLong(L->tid)))
            || (L->has_ts && !(ts = PyFloat_FromDouble(L->ts)))
            || !(name = ascii_str(s, L->na, L->nb)) || !(args = ascii_str(s, L->as, L->ae))
            || (L->xs >= 0 && !(ret_text = ascii_str(s, L->xs, L->xe)))
            || (L->has_dur && !(dur = PyFloat_FromDouble(L->dur))))
        goto fail;
    if (L->has_ret && !(ret = py_int(s, L->rs, L->re, L->ret_hex ? 16 : 10))) {
        if (!PyErr_Occurred())          /* (result_shape's numbers are ints) */
            PyErr_SetString(PyExc_ValueError, "split_line: a result int() refuses");
        goto fail;
    }
    if (L->errno_err) {
        Py_INCREF(ret_text);
        err = ret_text;
    } else if (L->es >= 0 && !(err = ascii_str(s, L->es, L->ee))) {
        goto fail;
    }
    if (!(t = PyTuple_New(15)))
        goto fail;
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
    PyObject *b = L->tod ? Py_True : Py_False;
    Py_INCREF(b); PyTuple_SET_ITEM(t, 13, b);
    Py_INCREF(Py_None); PyTuple_SET_ITEM(t, 14, Py_None);
    return t;
fail:
    Py_XDECREF(tid); Py_XDECREF(ts); Py_XDECREF(name); Py_XDECREF(args); Py_XDECREF(ret);
    Py_XDECREF(err); Py_XDECREF(ret_text); Py_XDECREF(dur);
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
    Py_ssize_t n;
    const char *s = ascii_data(text, &n);
    if (!s) {
        Py_INCREF(UNHANDLED);
        return UNHANDLED;
    }
    Line L;
    int rc = parse_fields(s, n, &L);
    if (rc < 0)
        return NULL;
    if (rc == LINE_NONE)
        Py_RETURN_NONE;
    if (rc == LINE_UNHANDLED) {
        Py_INCREF(UNHANDLED);
        return UNHANDLED;
    }
    return line_tuple(s, &L);
}

/* ------------------------------------------------------------------ scrub */
/* events.py STRING_LITERAL.sub('"..."', text): a literal is a quote, then characters or
 * backslash escapes up to the closing quote (then "..." when strace cut it); one never closed
 * runs to the end of the text. One pass: each character is looked at once. next_literal
 * finds them (rowtext.c's put_scrubbed writes the same text into a row). */
int next_literal(const char *s, Py_ssize_t from, Py_ssize_t n, Py_ssize_t *a, Py_ssize_t *b)
{
    Py_ssize_t i = from < n ? find_char(s, from, n, '"') : -1;
    if (i < 0)
        return 0;
    Py_ssize_t j = i + 1, qi = -1;      /* the first quote no backslash escapes, from j */
    while (j < n) {                     /* (each byte looked at once: qi kept until passed) */
        if (qi < j) {
            const char *q = memchr(s + j, '"', (size_t)(n - j));
            qi = q ? q - s : n;
        }
        const char *bs = memchr(s + j, '\\', (size_t)(qi - j));
        if (!bs) {
            j = qi;
            break;
        }
        j = (bs - s) + 2;               /* the escaped character skipped */
    }
    Py_ssize_t end = j < n ? j + 1 : n;      /* past the closing quote, or the end */
    if (j < n && end + 3 <= n && memcmp(s + end, "...", 3) == 0)
        end += 3;
    *a = i;
    *b = end;
    return 1;
}

PyObject *scrub(PyObject *self, PyObject *text)
{
    Py_ssize_t n, a, b;
    const char *s = ascii_data(text, &n);
    if (!s)
        return fallback(FB_SCRUB, text);
    if (!next_literal(s, 0, n, &a, &b)) {
        Py_INCREF(text);
        return text;
    }
    char *out = PyMem_Malloc((size_t)n * 3 + 8);   /* "" -> "..." grows 2 chars by 3 */
    if (!out)
        return PyErr_NoMemory();
    Py_ssize_t o = 0, copied = 0;
    do {
        memcpy(out + o, s + copied, (size_t)(a - copied));
        o += a - copied;
        memcpy(out + o, "\"...\"", 5);
        o += 5;
        copied = b;
    } while (next_literal(s, copied, n, &a, &b));
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

/* args.py first_arg: up to the first ", ", unless a '<' comes first: then to the end of the
 * decoration it opens (the whole text when it never closes) */
Py_ssize_t first_arg_len(const char *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] == '<') {
            Py_ssize_t end = decoration_end(s, n, i);
            return end < 0 ? n : end + 1;
        }
        if (s[i] == ',' && i + 1 < n && s[i + 1] == ' ')
            return i;
    }
    return n;
}

PyObject *first_arg(PyObject *self, PyObject *text)
{
    Py_ssize_t n;
    const char *s = ascii_data(text, &n);
    if (!s)
        return fallback(FB_FIRST_ARG, text);
    Py_ssize_t k = first_arg_len(s, n);
    if (k == n) {
        Py_INCREF(text);
        return text;
    }
    return ascii_str(s, 0, k);
}
