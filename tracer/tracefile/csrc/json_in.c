#include "fast.h"

/* ------------------------------------------------------------------ decode_rows */
/* Short strings and ints recur in every row (call names, fd kinds, errors, paths, pids, tids):
 * one object each per decode_rows call instead of one per row (fewer allocations, and dict
 * lookups on them reuse the cached hash). Direct-mapped; a collision just makes a new one. */

void memo_clear(Memo *m)
{
    for (int i = 0; i < MEMO; i++) {
        Py_XDECREF(m->str[i]);
        Py_XDECREF(m->num[i]);
    }
}


static PyObject *memo_str(Memo *m, const char *s, Py_ssize_t a, Py_ssize_t b)
{
    Py_ssize_t len = b - a;
    if (!m || len > MEMO_STR_MAX)
        return ascii_str(s, a, b);
    /* hash of the length and the first and last 8 bytes (a miss only costs a new object) */
    uint64_t x = (uint64_t)len * 0x9E3779B97F4A7C15ULL, w = 0;
    memcpy(&w, s + a, len < 8 ? (size_t)len : 8);
    x ^= w * 0xC2B2AE3D27D4EB4FULL;
    if (len > 8) {
        memcpy(&w, s + b - 8, 8);
        x ^= w * 0x165667B19E3779F9ULL;
    }
    unsigned h = (unsigned)(x >> 40) & (MEMO - 1);
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
unsigned char STOP[256];      /* '"', '\\' and control characters end a plain run */

/* 8 ASCII bytes at a time (SWAR): does w hold a '"', a '\\' or a control character */
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
#define HAS_ZERO(v) (((v) - ONES) & ~(v) & HIGHS)
#define HAS_LESS(v, k) (((v) - ONES * (k)) & ~(v) & HIGHS)

/* The character of a one-letter JSON escape (\" \\ \/ \b \f \n \r \t), or -1 (\u, or bad) */
static int simple_escape(char e)
{
    switch (e) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    }
    return -1;
}

static PyObject *json_string(Cur *c)
{
    const char *s = c->s;
    Py_ssize_t i = c->i + 1, start = i;
    for (; i + 8 <= c->n; i += 8) {           /* the block is ASCII: no high bits */
        uint64_t w;
        memcpy(&w, s + i, 8);
        if (HAS_ZERO(w ^ (ONES * '"')) || HAS_ZERO(w ^ (ONES * '\\')) || HAS_LESS(w, 0x20))
            break;
    }
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
    /* With escapes. Most decode to ASCII (the \" around scrubbed literals): bytes, copied a
     * run at a time; a \u escape beyond ASCII goes to the code-point path below. */
    {
        char stackbuf[1024];
        size_t cap = (size_t)(c->n - start + 1);
        char *buf = cap <= sizeof(stackbuf) ? stackbuf : PyMem_Malloc(cap);
        if (!buf)
            return PyErr_NoMemory();
        Py_ssize_t k = i - start, j = i;
        memcpy(buf, s + start, (size_t)k);
        int wide = 0;
        while (j < c->n) {
            unsigned char ch = (unsigned char)s[j];
            if (ch == '"')
                break;
            if (ch < 0x20)
                break;                       /* malformed: the code-point path says so */
            if (ch != '\\') {
                Py_ssize_t r = j + 1;
                while (r < c->n && !STOP[(unsigned char)s[r]])
                    r++;
                memcpy(buf + k, s + j, (size_t)(r - j));
                k += r - j;
                j = r;
                continue;
            }
            if (j + 1 >= c->n)
                break;
            int v = simple_escape(s[j + 1]);
            if (v < 0) {                         /* \u and the rest: the code-point path */
                wide = 1;
                break;
            }
            buf[k++] = (char)v;
            j += 2;
        }
        if (!wide && j < c->n && s[j] == '"') {
            c->i = j + 1;
            PyObject *r = ascii_str(buf, 0, k);
            if (buf != stackbuf)
                PyMem_Free(buf);
            return r;
        }
        if (buf != stackbuf)
            PyMem_Free(buf);
    }
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
        int simple = simple_escape(e);
        Py_UCS4 v = simple < 0 ? 0 : (Py_UCS4)simple;
        switch (simple < 0 ? e : 0) {
        case 0:
            break;
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

PyObject *json_value(Cur *c, int depth)
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

