#include "fast.h"

/* ------------------------------------------------------------------ row_text */
/* An event's trace row written from its fields, byte for byte as msgspec writes it
 * (tracefile/codec.py encode_rows: ["tag",field,...] and a newline), for the values whose
 * text is certain here: ints of 64 bits, None, bools, ASCII strings (msgspec's escapes:
 * \" \\ \b \t \n \f \r, other control bytes \u00xx), and floats that are the nearest double
 * to a decimal of at most six decimals below 2**33 (strace's -ttt times and -T durations):
 * their shortest digits are that decimal's (no other decimal of as few digits is as near),
 * laid out as msgspec's write_f64 lays out Ryu's digits. Anything else: 0, and the caller
 * makes the event and has msgspec write it (its bytes added by row_bytes). The rows gather in
 * the caller's buffer (a Text) until rows_taken() gives them as bytes and frees it. */

static int room(Text *t, Py_ssize_t more)
{
    if (t->len + more <= t->cap)
        return 0;
    Py_ssize_t cap = t->cap ? t->cap : 1024;
    while (cap < t->len + more)
        cap *= 2;
    char *p = PyMem_Realloc(t->p, (size_t)cap);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    t->p = p;
    t->cap = cap;
    return 0;
}

static void put(Text *t, const char *s, Py_ssize_t n)
{
    memcpy(t->p + t->len, s, (size_t)n);
    t->len += n;
}

/* the decimal digits of u into d (at most 20), their count */
static int digits(unsigned long long u, char *d)
{
    char r[20];
    int n = 0;
    do {
        r[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    for (int i = 0; i < n; i++)
        d[i] = r[n - 1 - i];
    return n;
}

static int put_ll(Text *t, long long v)
{
    if (room(t, 21) < 0)
        return -1;
    if (v < 0)
        t->p[t->len++] = '-';
    t->len += digits(v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v,
                     t->p + t->len);
    return 0;
}

/* 1 written, 0 not an int of 64 bits, -1 error */
static int put_int(Text *t, PyObject *o)
{
    if (!PyLong_CheckExact(o))
        return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    return put_ll(t, v) < 0 ? -1 : 1;
}

static const char HEX[] = "0123456789abcdef";

/* whether one of the 8 ASCII bytes of w is below 0x20, '"' or '\\' (SWAR) */
static int escaped8(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    uint64_t quote = w ^ (ones * '"'), slash = w ^ (ones * '\\');
    return (((quote - ones) & ~quote) | ((slash - ones) & ~slash) | (w - ones * 0x20)) & high
           ? 1 : 0;
}

/* the ASCII bytes s[0:n] as msgspec writes them inside a string (room made by the caller:
 * 6 bytes a byte at most); runs that need no escape copied 16 (SSE2) or 8 bytes at a time */
static void escape_into(Text *t, const unsigned char *s, Py_ssize_t n)
{
    char *p = t->p + t->len;
    for (Py_ssize_t i = 0; i < n; i++) {
#ifdef __SSE2__
        const __m128i space = _mm_set1_epi8(0x20), quote = _mm_set1_epi8('"'),
                      slash = _mm_set1_epi8('\\');
        while (n - i >= 16) {                  /* (a byte above 0x7f: signed, below space) */
            __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
            int m = _mm_movemask_epi8(_mm_or_si128(
                _mm_cmplt_epi8(v, space),
                _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, slash))));
            if (m) {
                int k = __builtin_ctz((unsigned)m);
                memcpy(p, s + i, (size_t)k);
                p += k;
                i += k;
                break;
            }
            _mm_storeu_si128((__m128i *)p, v);
            p += 16;
            i += 16;
        }
#endif
        while (n - i >= 8) {                   /* eight bytes that need no escape at a time */
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (escaped8(w))
                break;
            memcpy(p, s + i, 8);
            p += 8;
            i += 8;
        }
        if (i >= n)
            break;
        unsigned char c = s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *p++ = (char)c;
            continue;
        }
        *p++ = '\\';
        switch (c) {
        case '"': *p++ = '"'; break;
        case '\\': *p++ = '\\'; break;
        case '\b': *p++ = 'b'; break;
        case '\t': *p++ = 't'; break;
        case '\n': *p++ = 'n'; break;
        case '\f': *p++ = 'f'; break;
        case '\r': *p++ = 'r'; break;
        default:
            *p++ = 'u', *p++ = '0', *p++ = '0';
            *p++ = HEX[c >> 4], *p++ = HEX[c & 15];
        }
    }
    t->len = p - t->p;
}

/* the ASCII bytes s[0:n] as a JSON string: 1 written, -1 error */
static int put_ascii(Text *t, const char *s, Py_ssize_t n)
{
    if (room(t, 6 * n + 2) < 0)
        return -1;
    t->p[t->len++] = '"';
    escape_into(t, (const unsigned char *)s, n);
    t->p[t->len++] = '"';
    return 1;
}

/* 1 written, 0 not an ASCII str, -1 error */
static int put_str(Text *t, PyObject *o)
{
    Py_ssize_t n;
    const char *s = PyUnicode_CheckExact(o) ? ascii_data(o, &n) : NULL;
    return s ? put_ascii(t, s, n) : 0;
}

/* the decimal k * 10**e, as msgspec lays out a double's shortest digits (Ryu's: k's digits,
 * its trailing zeros dropped): 1 written, -1 error */
static int put_decimal(Text *t, unsigned long long k, int e)
{
    if (room(t, 48) < 0)
        return -1;
    if (k == 0) {
        put(t, "0.0", 3);
        return 1;
    }
    while (k % 10 == 0) {
        k /= 10;
        e++;
    }
    char d[24];
    int n = digits(k, d), kk = n + e;
    if (e >= 0 && kk <= 16) {                   /* XYZ00.0 */
        put(t, d, n);
        for (int i = 0; i < e; i++)
            t->p[t->len++] = '0';
        put(t, ".0", 2);
    } else if (kk > 0 && kk <= 16) {            /* XY.Z */
        put(t, d, kk);
        t->p[t->len++] = '.';
        put(t, d + kk, n - kk);
    } else if (kk > -5 && kk <= 0) {            /* 0.0XYZ */
        put(t, "0.", 2);
        for (int i = 0; i < -kk; i++)
            t->p[t->len++] = '0';
        put(t, d, n);
    } else {                                    /* X.YZe-7, or Xe-7 */
        t->p[t->len++] = d[0];
        if (n > 1) {
            t->p[t->len++] = '.';
            put(t, d + 1, n - 1);
        }
        t->p[t->len++] = 'e';
        return put_ll(t, kk - 1) < 0 ? -1 : 1;
    }
    return 1;
}

/* 1 written, 0 not a float whose text is certain here (module comment), -1 error */
static int put_double(Text *t, double x)
{
    double a = fabs(x);
    if (!isfinite(x) || a >= 8589934592.0)             /* 2**33: an ulp below 1e-6 under it */
        return 0;
    long long k = llround(a * 1e6);
    if (a != 0.0 && (double)k / 1e6 != a)   /* not the nearest double to k / 10**6 */
        return 0;
    if (signbit(x)) {
        if (room(t, 1) < 0)
            return -1;
        t->p[t->len++] = '-';
    }
    return put_decimal(t, a == 0.0 ? 0 : (unsigned long long)k, -6);
}

static int put_float(Text *t, PyObject *o)
{
    return PyFloat_CheckExact(o) ? put_double(t, PyFloat_AS_DOUBLE(o)) : 0;
}

/* one value of kind k: 'f' float, 'i' int, 's' str, 'b' bool; upper case: or None */
static int put_value(Text *t, PyObject *o, char k)
{
    if (o == Py_None && k >= 'A' && k <= 'Z') {
        if (room(t, 4) < 0)
            return -1;
        put(t, "null", 4);
        return 1;
    }
    switch (k | 0x20) {
    case 'f': return put_float(t, o);
    case 'i': return put_int(t, o);
    case 's': return put_str(t, o);
    case 'b':
        if (o != Py_True && o != Py_False)
            return 0;
        if (room(t, 5) < 0)
            return -1;
        put(t, o == Py_True ? "true" : "false", o == Py_True ? 4 : 5);
        return 1;
    }
    return 0;
}

int row_text(Text *t, const char *tag, PyObject *const *vals, const char *shape)
{
    Py_ssize_t at = t->len, tl = (Py_ssize_t)strlen(tag);
    if (room(t, tl + 4) < 0)
        return -1;
    put(t, "[\"", 2);
    put(t, tag, tl);
    t->p[t->len++] = '"';
    for (Py_ssize_t i = 0; shape[i]; i++) {
        if (room(t, 1) < 0)
            return -1;
        t->p[t->len++] = ',';
        int rc = put_value(t, vals[i], shape[i]);
        if (rc <= 0) {
            t->len = at;                    /* the row's start again */
            return rc;
        }
    }
    if (room(t, 2) < 0)
        return -1;
    put(t, "]\n", 2);
    return 1;
}

int row_bytes(Text *t, const char *s, Py_ssize_t n)
{
    if (n <= 0)                         /* (nothing: t may have no memory yet) */
        return 0;
    if (room(t, n) < 0)
        return -1;
    put(t, s, n);
    return 0;
}

PyObject *rows_taken(Text *t)
{
    PyObject *b = PyBytes_FromStringAndSize(t->p ? t->p : "", t->len);
    PyMem_Free(t->p);
    t->p = NULL;
    t->len = t->cap = 0;
    return b;
}

/* ------------------------------------------------------------------ rows from raw values */
/* A row written field by field (block.c: a call read from the log's bytes, no object made):
 * row_start, then each field (its comma first), then row_end. Each gives 1 written, 0 a value
 * whose text is not certain here (the caller sets t->len back to the row's start and has the
 * row made another way), -1 error. */
int row_start(Text *t, const char *tag)
{
    Py_ssize_t tl = (Py_ssize_t)strlen(tag);
    if (room(t, tl + 4) < 0)
        return -1;
    put(t, "[\"", 2);
    put(t, tag, tl);
    t->p[t->len++] = '"';
    return 1;
}

static int comma(Text *t)
{
    if (room(t, 1) < 0)
        return -1;
    t->p[t->len++] = ',';
    return 1;
}

int row_double(Text *t, double x)
{
    return comma(t) < 0 ? -1 : put_double(t, x);
}

/* x read from s[a:b]: where that text is digits, at most 6 decimals and a whole part below
 * 2**31 without leading zeros, its digits give put_double's text of x (llround(x * 1e6) is
 * exactly them there: its error is below 0.5), else put_double's */
int row_decimal(Text *t, const char *s, Py_ssize_t a, Py_ssize_t b, double x)
{
    unsigned long long k = 0;
    Py_ssize_t i = a;
    for (; i < b && s[i] >= '0' && s[i] <= '9'; i++)
        k = k * 10 + (unsigned)(s[i] - '0');
    Py_ssize_t whole = i - a, frac = 0;
    if (i < b && s[i] == '.')
        for (i++; i < b && s[i] >= '0' && s[i] <= '9'; i++, frac++)
            k = k * 10 + (unsigned)(s[i] - '0');
    if (i != b || whole < 1 || whole > 10 || (whole > 1 && s[a] == '0') || frac > 6
            || (i > a + whole && frac < 1) || !(x >= 0.0 && x < 2147483648.0))
        return row_double(t, x);
    return comma(t) < 0 ? -1 : put_decimal(t, k, -(int)frac);
}

int row_ll(Text *t, long long v)
{
    return comma(t) < 0 || put_ll(t, v) < 0 ? -1 : 1;
}

int row_null(Text *t)
{
    if (room(t, 5) < 0)
        return -1;
    put(t, ",null", 5);
    return 1;
}

int row_ascii(Text *t, const char *s, Py_ssize_t n)
{
    return comma(t) < 0 ? -1 : put_ascii(t, s, n);
}

/* the ASCII text s[0:n] scrubbed (lines.c scrub: each string literal written "...") */
int row_scrubbed(Text *t, const char *s, Py_ssize_t n)
{
    /* a literal of k >= 1 bytes becomes \"...\" (7), any other byte 6 at most */
    if (room(t, 7 * n + 3) < 0)
        return -1;
    t->p[t->len++] = ',';
    t->p[t->len++] = '"';
    Py_ssize_t copied = 0, a, b;
    while (next_literal(s, copied, n, &a, &b)) {
        escape_into(t, (const unsigned char *)s + copied, a - copied);
        put(t, "\\\"...\\\"", 7);
        copied = b;
    }
    escape_into(t, (const unsigned char *)s + copied, n - copied);
    t->p[t->len++] = '"';
    return 1;
}

int row_value(Text *t, PyObject *o, char k)
{
    return comma(t) < 0 ? -1 : put_value(t, o, k);
}

int row_end(Text *t)
{
    if (room(t, 2) < 0)
        return -1;
    put(t, "]\n", 2);
    return 1;
}
