#include "text.h"

/* ------------------------------------------------------------------ helpers */
Py_ssize_t find_char(const char *s, Py_ssize_t from, Py_ssize_t n, char c)
{
    const char *p = memchr(s + from, c, (size_t)(n - from > 0 ? n - from : 0));
    return p ? (Py_ssize_t)(p - s) : -1;
}

Py_ssize_t find_str(const char *s, Py_ssize_t from, Py_ssize_t n, const char *w,
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

Py_ssize_t rfind_str(const char *s, Py_ssize_t from, Py_ssize_t n, const char *w,
                            Py_ssize_t wl)
{
    for (Py_ssize_t i = n - wl; i >= from; i--)
        if (s[i] == w[0] && memcmp(s + i, w, (size_t)wl) == 0)
            return i;
    return -1;
}

int ends_with(const char *s, Py_ssize_t a, Py_ssize_t b, const char *w)
{
    Py_ssize_t wl = (Py_ssize_t)strlen(w);
    return b - a >= wl && memcmp(s + b - wl, w, (size_t)wl) == 0;
}

PyObject *ascii_str(const char *s, Py_ssize_t a, Py_ssize_t b)
{
    if (b < a)
        b = a;
#ifdef Py_LIMITED_API
    return PyUnicode_DecodeASCII(s + a, b - a, NULL);      /* no str written in place */
#else
    PyObject *o = PyUnicode_New(b - a, 127);
    if (o)
        memcpy(PyUnicode_DATA(o), s + a, (size_t)(b - a));
    return o;
#endif
}


/* int(text[a:b], base) with Python's semantics: a fast path for plain digits, else int()
 * itself. Returns NULL with no exception set when int() would raise ValueError. */
PyObject *py_int(const char *s, Py_ssize_t a, Py_ssize_t b, int base)
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
#ifdef Py_LIMITED_API
    /* int(text, base) is PyLong_FromString over the whole text (what int() does with a str's
     * ASCII); a NUL in the text ends the C string before its end: ValueError, as int()'s */
    char small[64];
    Py_ssize_t len = b > a ? b - a : 0;
    char *buf = len < (Py_ssize_t)sizeof(small) ? small : PyMem_Malloc((size_t)len + 1);
    if (!buf)
        return PyErr_NoMemory();
    memcpy(buf, s + a, (size_t)len);
    buf[len] = '\0';
    char *end = NULL;
    PyObject *r = PyLong_FromString(buf, &end, base);
    if (r && end != buf + len) {
        Py_CLEAR(r);
        PyErr_SetString(PyExc_ValueError, "invalid literal for int()");
    }
    if (buf != small)
        PyMem_Free(buf);
#else
    PyObject *sub = ascii_str(s, a, b);
    if (!sub)
        return NULL;
    PyObject *r = PyLong_FromUnicodeObject(sub, base);
    Py_DECREF(sub);
#endif
    if (!r && PyErr_ExceptionMatches(PyExc_ValueError))
        PyErr_Clear();
    return r;
}

/* float(text[a:b]); NULL, no exception set, where float() raises ValueError. */
